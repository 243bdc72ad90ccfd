//! Propagation delay: from the answer to `PUT /v1/boundaries/{b}/policies/{p}` to the first
//! request each cluster's API server denies with the new version.
//!
//! Runs what `palisade serve` runs (the HTTP API and the reconcile loop on one SQLite store,
//! in this process) against `CLUSTERS` private Kubernetes 1.37 control planes (etcd +
//! kube-apiserver from `testenv/`, one each). One boundary is attached to every
//! cluster and has one namespace in each, created through the API. Its one policy requires a
//! label; change `i` sets the required key to `team-<i>`. The probe of change `i` is a Pod
//! labelled `team-<i-1>` only: the previous version admits it, the new one denies it with
//! `Policy 'label' (RequiredLabels) requires the label team-<i>.`
//!
//! Per change: check that every cluster still admits the probe, `PUT` the new version, start
//! the clock when the answer has arrived, then poll every cluster at once with a server-side
//! dry-run create (`dryRun=All`) of the probe, every 20 ms, until it is denied with the new
//! version's message. Recorded: the time per cluster and the largest of them ("all
//! clusters"). Between changes the loop waits until the API reports the policy enforced in
//! every cluster, then a pseudo-random 0-1 s, so changes do not line up with the API server's
//! one-second policy reload. `WARMUP_CHANGES` (default 2) changes are not counted, `CHANGES`
//! (default 50) are. Prints min/p50/p99/max (nearest rank: with 50 samples p99 is the max).
//!
//! `cargo bench -p palisade-bench --bench propagation -- CLUSTERS` (e.g. `3`)

use std::time::{Duration, Instant};

use palisade_reconciler::ClusterClient;
use palisade_testkit::bench::{args_or_usage, env_number, jitter};
use palisade_testkit::control_plane::ControlPlane;
use serde_json::{json, Value};

const BOUNDARY: &str = "bench";
const POLICY: &str = "label";
const NAMESPACE: &str = "bench-probe";
const POLL: Duration = Duration::from_millis(20);
const TIMEOUT: Duration = Duration::from_secs(60);

#[path = "support/stack.rs"]
mod stack;
use stack::Stack;

fn spec(key: &str) -> Value {
    json!({"rules": [{"requiredLabels": {"labels": [{"key": key}]}}]})
}

fn key(change: usize) -> String {
    format!("team-{change}")
}

/// The probe of change `change`: admitted by the version before it, denied by it.
fn probe(change: usize) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "probe-", "labels": {key(change - 1): "bench"}},
        "spec": {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1.0"}]},
    })
}

fn message(change: usize) -> String {
    format!(
        "Policy '{POLICY}' (RequiredLabels) requires the label {}.",
        key(change)
    )
}

/// Polls `cluster` every 20 ms from `since` until the probe is denied with `wanted`.
async fn first_denial(
    cluster: ClusterClient,
    pod: Value,
    wanted: String,
    since: Instant,
) -> Duration {
    loop {
        let answer = cluster.dry_run_create(NAMESPACE, &pod).await.unwrap();
        if answer.denial_message() == Some(wanted.as_str()) {
            return since.elapsed();
        }
        assert!(
            answer.admitted(),
            "refused for another reason: {answer:?} (wanted {wanted})"
        );
        assert!(
            since.elapsed() < TIMEOUT,
            "not denied within {TIMEOUT:?}: {wanted}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// One change: check the previous version admits the probe everywhere, PUT, time the denials.
/// The per-cluster times, the PUT's own latency.
async fn change(
    stack: &Stack,
    clusters: &[ClusterClient],
    change: usize,
) -> (Vec<Duration>, Duration) {
    let pod = probe(change);
    for (i, cluster) in clusters.iter().enumerate() {
        let answer = cluster.dry_run_create(NAMESPACE, &pod).await.unwrap();
        assert!(
            answer.admitted(),
            "change {change}: cluster {i} refuses the probe before the PUT: {answer:?}"
        );
    }
    let sent = Instant::now();
    stack
        .ok(
            "PUT",
            &format!("/v1/boundaries/{BOUNDARY}/policies/{POLICY}"),
            Some(spec(&key(change))),
        )
        .await;
    let answered = Instant::now();
    let put = answered - sent;
    let polls: Vec<_> = clusters
        .iter()
        .map(|cluster| {
            tokio::spawn(first_denial(
                cluster.clone(),
                pod.clone(),
                message(change),
                answered,
            ))
        })
        .collect();
    let mut times = Vec::with_capacity(polls.len());
    for poll in polls {
        times.push(poll.await.unwrap());
    }
    (times, put)
}

/// Nearest-rank quantile of sorted samples.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn line(what: &str, samples: &mut [Duration]) -> String {
    samples.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "| {what} | {} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms |",
        samples.len(),
        ms(quantile(samples, 0.0)),
        ms(quantile(samples, 0.5)),
        ms(quantile(samples, 0.99)),
        ms(quantile(samples, 1.0)),
    )
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(args) = args_or_usage(
        "propagation",
        "real control planes and several minutes",
        "cargo bench -p palisade-bench --bench propagation -- CLUSTERS (or scripts/bench-k8s.sh)",
    ) else {
        return;
    };
    let count: usize = match args.as_slice() {
        [clusters] => clusters.parse().expect("CLUSTERS: a number"),
        _ => panic!("usage: propagation CLUSTERS"),
    };
    let changes = env_number("CHANGES", 50);
    let warmup = env_number("WARMUP_CHANGES", 2);
    let mut planes = Vec::new();
    for _ in 0..count {
        let plane = tokio::task::spawn_blocking(|| ControlPlane::start("1.37"))
            .await
            .unwrap();
        planes.push(plane);
    }
    let stack = Stack::start().await;
    stack
        .ok("POST", "/v1/boundaries", Some(json!({"name": BOUNDARY})))
        .await;
    let mut clusters = Vec::new();
    for (i, plane) in planes.iter().enumerate() {
        let name = format!("c{}", i + 1);
        stack
            .add_cluster(&name, plane.kubeconfig_yaml(), BOUNDARY, NAMESPACE)
            .await;
        clusters.push(
            ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
                .await
                .unwrap(),
        );
    }
    // Version 0, then the warm-up changes: not counted.
    stack
        .ok(
            "PUT",
            &format!("/v1/boundaries/{BOUNDARY}/policies/{POLICY}"),
            Some(spec(&key(0))),
        )
        .await;
    stack
        .wait_enforced(BOUNDARY, POLICY, count, Duration::from_millis(50), TIMEOUT)
        .await;
    let mut per_cluster = Vec::new();
    let mut all_clusters = Vec::new();
    let mut puts = Vec::new();
    for i in 1..=warmup + changes {
        tokio::time::sleep(jitter(i)).await;
        let (times, put) = change(&stack, &clusters, i).await;
        stack
            .wait_enforced(BOUNDARY, POLICY, count, Duration::from_millis(50), TIMEOUT)
            .await;
        let slowest = times.iter().copied().max().unwrap_or_default();
        let millis: Vec<String> = times
            .iter()
            .map(|t| format!("{} ms", t.as_millis()))
            .collect();
        eprintln!(
            "change {i}{}: PUT {put:.1?}, denied after [{}]",
            if i <= warmup { " (warm-up)" } else { "" },
            millis.join(", ")
        );
        if i > warmup {
            per_cluster.extend(times);
            all_clusters.push(slowest);
            puts.push(put);
        }
    }
    println!(
        "propagation: {changes} changes, {count} cluster(s) of Kubernetes {}, polled every {} ms",
        planes.first().map_or("?", |p| p.version()),
        POLL.as_millis()
    );
    println!("| clusters | measured | samples | min | p50 | p99 | max |");
    println!("|---|---|---|---|---|---|---|");
    println!(
        "{}",
        line(&format!("{count} | each cluster"), &mut per_cluster)
    );
    println!(
        "{}",
        line(&format!("{count} | all clusters"), &mut all_clusters)
    );
    println!("{}", line(&format!("{count} | the PUT itself"), &mut puts));
}
