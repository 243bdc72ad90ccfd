//! Open-loop load generator for `scripts/bench-api.sh`: sends creates at a fixed rate, each
//! with a unique resource name, and measures every latency from the moment the request was
//! due (so a slow server cannot hide queueing: no coordinated omission).
//!
//! `cargo bench -p palisade-bench --bench load -- URL TOKEN RATE SECONDS`; without arguments
//! (a plain `cargo bench`) it only says what it needs. `RATE` `max:N` runs closed loop instead:
//! N workers each sending its next create when the last is answered, which measures the
//! sustainable create rate.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(args) = palisade_testkit::bench::args_or_usage(
        "load",
        "a running palisade server",
        "cargo bench -p palisade-bench --bench load -- URL TOKEN RATE SECONDS (or scripts/bench-api.sh)",
    ) else {
        return Ok(());
    };
    let [url, token, rate, seconds] = args.as_slice() else {
        anyhow::bail!("usage: load URL TOKEN RATE SECONDS");
    };
    let seconds: u64 = seconds.parse()?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    if let Some(workers) = rate.strip_prefix("max:") {
        return closed_loop(client, url, token, workers.parse()?, seconds).await;
    }
    let rate: u64 = rate.parse()?;
    let total = rate * seconds;
    let interval = Duration::from_nanos(1_000_000_000 / rate);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for i in 0..total {
        let due = start + interval * i as u32;
        tokio::time::sleep_until(due.into()).await;
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        tasks.push(tokio::spawn(async move {
            let status = create(&client, &url, &token, &format!("a-{i}")).await;
            (status, due.elapsed())
        }));
    }
    let mut answers = Answers::new()?;
    for task in tasks {
        let (status, latency) = task.await?;
        answers.record(status, latency)?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "{total} requests in {elapsed:.1} s ({:.0} req/s), {answers}",
        total as f64 / elapsed,
    );
    Ok(())
}

/// Latencies and statuses of the answers.
struct Answers {
    histogram: Histogram<u64>,
    statuses: std::collections::BTreeMap<u16, u64>,
}

impl Answers {
    fn new() -> anyhow::Result<Self> {
        Ok(Answers {
            histogram: Histogram::new_with_bounds(1, 60_000_000, 3)?,
            statuses: Default::default(),
        })
    }

    fn record(&mut self, status: u16, latency: Duration) -> anyhow::Result<()> {
        *self.statuses.entry(status).or_insert(0) += 1;
        Ok(self.histogram.record(latency.as_micros().max(1) as u64)?)
    }

    fn count(&self, status: u16) -> u64 {
        self.statuses.get(&status).copied().unwrap_or(0)
    }
}

impl std::fmt::Display for Answers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |us: u64| us as f64 / 1000.0;
        write!(
            f,
            "p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, status {:?}",
            ms(self.histogram.value_at_quantile(0.5)),
            ms(self.histogram.value_at_quantile(0.99)),
            ms(self.histogram.max()),
            self.statuses,
        )
    }
}

/// Creates the app `name`; the answer's status (0: no answer).
async fn create(client: &reqwest::Client, url: &str, token: &str, name: &str) -> u16 {
    let body = format!(
        r#"{{"type": "app", "name": "{name}", "plan": "small", "image": "ghcr.io/acme/x:1"}}"#
    );
    client
        .post(url)
        .bearer_auth(token)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .map(|r| r.status().as_u16())
        .unwrap_or(0)
}

/// `workers` loops, each creating one app after another for `seconds`: the rate the server
/// sustains, and the latency at that rate.
async fn closed_loop(
    client: reqwest::Client,
    url: &str,
    token: &str,
    workers: usize,
    seconds: u64,
) -> anyhow::Result<()> {
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (client, url, token) = (client.clone(), url.to_owned(), token.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::new();
            let mut i = 0u64;
            while Instant::now() < end {
                let sent = Instant::now();
                let status = create(&client, &url, &token, &format!("w{w}-{i}")).await;
                seen.push((status, sent.elapsed()));
                i += 1;
            }
            seen
        }));
    }
    let mut answers = Answers::new()?;
    for task in tasks {
        for (status, latency) in task.await? {
            answers.record(status, latency)?;
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let created = answers.count(201);
    println!(
        "closed loop, {workers} workers: {created} created in {elapsed:.1} s ({:.0} creates/s), {answers}",
        created as f64 / elapsed,
    );
    Ok(())
}
