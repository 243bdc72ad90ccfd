//! Platform workloads (SPEC 5) as a user sees them: the time from `POST
//! /v1/boundaries/{b}/resources` of an app to its `status` reading `running` (an allowed image:
//! the reconciler applies the Deployment, kube-controller-manager makes the ReplicaSet and Pod,
//! kube-scheduler places it on one of kwok's fake nodes, kwok makes it Running, the status watch
//! sees the Deployment available) and to `rejected: ...` (a `latest` image that the boundary's
//! DisallowLatestTag policy denies: the API server refuses the Deployment).
//!
//! Runs what `palisade serve` runs (API and reconcile loop on one SQLite store, in this process)
//! against a private Kubernetes 1.37 control plane with kube-controller-manager, kube-scheduler
//! and kwok (`testenv/`, `START_WORKLOADS=1`). The clock starts before the `POST` is sent and
//! stops at the first `GET` of the resource (every 20 ms) that shows the status. Creates run one
//! after another: `CREATES` (default 50) of each kind, after `WARMUP` (default 2) of each that
//! are not counted. Prints min/p50/p99/max (nearest rank: with 50 samples p99 is the max).
//!
//! `cargo bench -p palisade-bench --bench workloads -- run`

use std::time::{Duration, Instant};

use palisade_testkit::bench::{args_or_usage, env_number};
use palisade_testkit::control_plane::{ControlPlane, Options};
use serde_json::json;

#[path = "support/stack.rs"]
mod stack;
use stack::Stack;

const BOUNDARY: &str = "bench";
const NAMESPACE: &str = "bench-apps";
const POLL: Duration = Duration::from_millis(20);
const TIMEOUT: Duration = Duration::from_secs(120);

/// Creates an app and waits until its status satisfies `done`; answers the time taken.
async fn create_until(stack: &Stack, name: &str, image: &str, done: fn(&str) -> bool) -> Duration {
    let started = Instant::now();
    stack
        .ok(
            "POST",
            &format!("/v1/boundaries/{BOUNDARY}/resources"),
            Some(json!({"type": "app", "name": name, "plan": "small", "image": image})),
        )
        .await;
    loop {
        let body = stack
            .ok(
                "GET",
                &format!("/v1/boundaries/{BOUNDARY}/resources/app/{name}"),
                None,
            )
            .await;
        if body["status"].as_str().is_some_and(done) {
            return started.elapsed();
        }
        assert!(started.elapsed() < TIMEOUT, "{name}: {body}");
        tokio::time::sleep(POLL).await;
    }
}

fn report(what: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let rank = |p: f64| {
        let index = ((p * samples.len() as f64).ceil() as usize).clamp(1, samples.len()) - 1;
        samples[index].as_secs_f64() * 1000.0
    };
    println!(
        "{what}: n={} min {:.0} ms, p50 {:.0} ms, p99 {:.0} ms, max {:.0} ms",
        samples.len(),
        rank(0.0),
        rank(0.5),
        rank(0.99),
        rank(1.0)
    );
}

fn main() {
    if args_or_usage(
        "workloads",
        "a control plane with kwok (minutes)",
        "cargo bench -p palisade-bench --bench workloads -- run",
    )
    .is_none()
    {
        return;
    }
    let creates = env_number("CREATES", 50);
    let warmup = env_number("WARMUP", 2);
    let options = Options {
        workloads: true,
        ..Options::default()
    };
    let plane = ControlPlane::start_with("1.37", &options);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let stack = Stack::start().await;
        stack
            .ok("POST", "/v1/boundaries", Some(json!({"name": BOUNDARY})))
            .await;
        stack
            .add_cluster("local", plane.kubeconfig_yaml(), BOUNDARY, NAMESPACE)
            .await;
        stack
            .ok(
                "PUT",
                &format!("/v1/boundaries/{BOUNDARY}/policies/no-latest"),
                Some(json!({"rules": [{"disallowLatestTag": {}}]})),
            )
            .await;
        stack
            .wait_enforced(BOUNDARY, "no-latest", 1, POLL, TIMEOUT)
            .await;
        let mut running = Vec::new();
        let mut rejected = Vec::new();
        for i in 0..warmup + creates {
            let to_running = create_until(
                &stack,
                &format!("ok-{i}"),
                &format!("ghcr.io/acme/web:1.{i}"),
                |s| s == "running",
            )
            .await;
            let to_rejected = create_until(
                &stack,
                &format!("bad-{i}"),
                "ghcr.io/acme/web:latest",
                |s| s.starts_with("rejected: "),
            )
            .await;
            if i >= warmup {
                running.push(to_running);
                rejected.push(to_rejected);
            }
        }
        report("POST to running", running);
        report("POST to rejected", rejected);
    });
}
