//! Open-loop load generator for `scripts/bench-api.sh`: sends creates at a fixed rate, each
//! with a unique resource name, and measures every latency from the moment the request was
//! due (so a slow server cannot hide queueing: no coordinated omission).
//!
//! `cargo bench -p palisade-server --bench load -- URL TOKEN RATE SECONDS`; without arguments
//! (a plain `cargo bench`) it only says what it needs.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(args) = palisade_testkit::bench::args_or_usage(
        "load",
        "a running palisade server",
        "cargo bench -p palisade-server --bench load -- URL TOKEN RATE SECONDS (or scripts/bench-api.sh)",
    ) else {
        return Ok(());
    };
    let [url, token, rate, seconds] = args.as_slice() else {
        anyhow::bail!("usage: load URL TOKEN RATE SECONDS");
    };
    let rate: u64 = rate.parse()?;
    let seconds: u64 = seconds.parse()?;
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()?;
    let total = rate * seconds;
    let interval = Duration::from_nanos(1_000_000_000 / rate);
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(total as usize);
    for i in 0..total {
        let due = start + interval * i as u32;
        tokio::time::sleep_until(due.into()).await;
        let (client, url, token) = (client.clone(), url.clone(), token.clone());
        tasks.push(tokio::spawn(async move {
            let body = format!(
                r#"{{"type": "app", "name": "a-{i}", "plan": "small", "image": "ghcr.io/acme/x:1"}}"#
            );
            let status = client
                .post(&url)
                .bearer_auth(&token)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map(|r| r.status().as_u16())
                .unwrap_or(0);
            (status, due.elapsed())
        }));
    }
    let mut histogram = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3)?;
    let mut statuses = std::collections::BTreeMap::new();
    for task in tasks {
        let (status, latency) = task.await?;
        *statuses.entry(status).or_insert(0u64) += 1;
        histogram.record(latency.as_micros().max(1) as u64)?;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let ms = |us: u64| us as f64 / 1000.0;
    println!(
        "{total} requests in {elapsed:.1} s ({:.0} req/s), p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms, status {statuses:?}",
        total as f64 / elapsed,
        ms(histogram.value_at_quantile(0.5)),
        ms(histogram.value_at_quantile(0.99)),
        ms(histogram.max()),
    );
    Ok(())
}
