//! Policy churn against a real API server (issue: scale, item 3): `BOUNDARIES` boundaries (default
//! 50) × 3 policies are installed in one cluster, then `CHANGES` policy changes (default 10,000)
//! are applied at a fixed rate (`RATE` per second, default 100), each changing one boundary's
//! `allowedRegistries` policy, while compliant Pods are created one after the other in the first
//! boundary's namespace. Measured, per layout and Kubernetes version:
//!
//! - API server crashes: whether its process is still the one started, and `fatal error` lines
//!   in its log;
//! - writes the API server compiles per change: the growth of `metadata.generation` summed over
//!   the installation's ValidatingAdmissionPolicies and bindings (each spec change of one makes
//!   every API server recompile it); the shared layout's changes write parameters only;
//! - parameter objects written per change (shared layout), the changes' achieved rate, and the
//!   creates alongside: how many, how many failed other than by a denial, and their p50/p99.
//!
//! `cargo bench -p palisade-bench --bench churn --profile dev -- VERSION...` (e.g. `1.30 1.37`;
//! environment: `LAYOUT=per-policy|shared|per-boundary`, `CHANGES`, `RATE`, `BOUNDARIES`; in the
//! per-boundary layout each change re-applies the boundary's one object holding its 3 policies).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a benchmark fails loudly"
)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Api, Resource};
use palisade_policy::Name;
use palisade_reconciler::Layout;
use palisade_testkit::bench::{args_or_usage, env_number};
use palisade_testkit::control_plane::{temp_namespace, ControlPlane};
use palisade_vap::shared::{PARAMS_GROUP, PARAMS_KIND, PARAMS_PLURAL, PARAMS_VERSION};
use serde_json::json;

#[path = "support/plane.rs"]
mod plane;

use plane::{layout_from_env, private_plane};

const INSTALLATION: &str = "benchchurn";

fn policy(name: &str, spec: serde_json::Value) -> palisade_policy::Policy {
    palisade_testkit::corpus::policy(name, "bench", spec)
}

/// The `allowedRegistries` policy in one of two versions (even, odd).
fn trusted(version: usize) -> palisade_policy::Policy {
    let registries = if version.is_multiple_of(2) {
        json!(["ghcr.io/acme"])
    } else {
        json!(["ghcr.io/acme", "registry.acme.internal"])
    };
    policy(
        "trusted",
        json!({"rules": [{"allowedRegistries": {"registries": registries}}]}),
    )
}

fn fixed_policies() -> Vec<palisade_policy::Policy> {
    vec![
        policy(
            "owner",
            json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}]}),
        ),
        policy("no-latest", json!({"rules": [{"disallowLatestTag": {}}]})),
    ]
}

/// The summed `metadata.generation` of the installation's policies and bindings.
async fn generations(client: &kube::Client) -> i64 {
    let params = ListParams::default().labels(&format!("palisade.dev/installation={INSTALLATION}"));
    let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .list(&params)
        .await
        .unwrap();
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .list(&params)
        .await
        .unwrap();
    policies
        .items
        .iter()
        .map(|p| p.meta().generation.unwrap_or(0))
        .chain(
            bindings
                .items
                .iter()
                .map(|b| b.meta().generation.unwrap_or(0)),
        )
        .sum()
}

/// The summed `metadata.generation` of the installation's parameter objects (0 without any).
async fn parameter_generations(client: &kube::Client) -> i64 {
    let api = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(PARAMS_GROUP, PARAMS_VERSION, PARAMS_KIND),
            PARAMS_PLURAL,
        ),
    );
    let params = ListParams::default().labels(&format!("palisade.dev/installation={INSTALLATION}"));
    match api.list(&params).await {
        Ok(list) => list
            .items
            .iter()
            .map(|o| o.metadata.generation.unwrap_or(0))
            .sum(),
        Err(_) => 0,
    }
}

fn apiserver_pid(plane: &ControlPlane) -> String {
    std::fs::read_to_string(plane.workdir().join("kube-apiserver.pid"))
        .unwrap()
        .trim()
        .to_owned()
}

/// The `fatal error` lines of the API server's log, each with the 12 lines after it (the
/// top of the crashing goroutine's stack).
fn fatal_errors(plane: &ControlPlane) -> Vec<String> {
    let log = std::fs::read_to_string(plane.workdir().join("logs/kube-apiserver.log"))
        .unwrap_or_default();
    let lines: Vec<&str> = log.lines().collect();
    lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.contains("fatal error"))
        .map(|(i, _)| lines[i..(i + 13).min(lines.len())].join("\n"))
        .collect()
}

fn pod(index: usize) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": format!("p-{index}"), "labels": {"team": "web"}},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1.0"}]},
    }))
    .unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(versions) = args_or_usage(
        "churn",
        "Kubernetes versions (private control planes, minutes each)",
        "cargo bench -p palisade-bench --bench churn -- 1.30 1.37",
    ) else {
        return;
    };
    let layout = layout_from_env();
    let changes = env_number("CHANGES", 10_000);
    let rate = env_number("RATE", 100);
    let boundaries = env_number("BOUNDARIES", 50);
    let label = layout.as_str();
    let mut rows = Vec::new();
    for version in versions {
        let (plane, client, cluster) = private_plane(&version, layout).await;
        let mut names = Vec::new();
        let mut first_namespace = None;
        for index in 0..boundaries {
            let boundary = Name::parse(&format!("tenant-{index}")).unwrap();
            let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
            first_namespace.get_or_insert(namespace);
            let policies: Vec<_> = fixed_policies().into_iter().chain([trusted(0)]).collect();
            cluster
                .apply_boundary(INSTALLATION, &boundary, &policies)
                .await
                .unwrap();
            names.push(boundary);
        }
        let namespace = first_namespace.unwrap();
        // Active: wait until the first boundary's namespace, where the creates go, denies.
        let latest = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe",
            "labels": {"team": "web"}},
            "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:latest"}]}});
        let deadline = Instant::now() + Duration::from_secs(120);
        while cluster
            .dry_run_create(&namespace, &latest)
            .await
            .unwrap()
            .admitted()
        {
            assert!(Instant::now() < deadline, "the policies never acted");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let pid = apiserver_pid(&plane);
        let generations_before = generations(&client).await;
        let parameters_before = parameter_generations(&client).await;

        // Creates alongside, one after the other, until the changes are done.
        let done = Arc::new(AtomicBool::new(false));
        let creates = {
            let done = done.clone();
            let api = Api::<Pod>::namespaced(client.clone(), &namespace);
            tokio::spawn(async move {
                let (mut latencies, mut failures, mut index) = (Vec::new(), 0usize, 0usize);
                while !done.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    match api.create(&PostParams::default(), &pod(index)).await {
                        Ok(_) => latencies.push(started.elapsed()),
                        Err(_) => failures += 1,
                    }
                    index += 1;
                }
                (latencies, failures)
            })
        };
        let started = Instant::now();
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failed_changes = 0usize;
        let mut first_failure = None;
        for change in 0..changes {
            ticker.tick().await;
            let boundary = &names[change % names.len()];
            let version = change / names.len() + 1;
            let policies: Vec<_> = if layout == Layout::PerBoundary {
                fixed_policies()
                    .into_iter()
                    .chain([trusted(version)])
                    .collect()
            } else {
                vec![trusted(version)]
            };
            let applied = cluster
                .apply_boundary(INSTALLATION, boundary, &policies)
                .await
                .is_ok();
            if !applied {
                failed_changes += 1;
                first_failure.get_or_insert(change);
            }
        }
        let took = started.elapsed();
        done.store(true, Ordering::Relaxed);
        let (mut latencies, create_failures) = creates.await.unwrap();
        latencies.sort();
        let alive =
            apiserver_pid(&plane) == pid && std::path::Path::new(&format!("/proc/{pid}")).exists();
        let (compiled, parameters) = if alive {
            (
                generations(&client).await - generations_before,
                parameter_generations(&client).await - parameters_before,
            )
        } else {
            (-1, -1)
        };
        let fatal = fatal_errors(&plane);
        for (index, text) in fatal.iter().enumerate() {
            eprintln!("churn {}: kube-apiserver fatal error {index} (first failed change: {first_failure:?}):\n{text}", plane.version());
        }
        let row = format!(
            "| {} | {} | {} | {changes} in {:.1} s ({:.0}/s), {failed_changes} failed | {} | {} | {:.3} | {:.3} | {} ({create_failures} failed) | {:.2} ms | {:.2} ms |",
            plane.version(),
            label,
            boundaries,
            took.as_secs_f64(),
            changes as f64 / took.as_secs_f64(),
            if alive { "0" } else { "1 (process gone)" },
            fatal.len(),
            compiled as f64 / changes as f64,
            parameters as f64 / changes as f64,
            latencies.len(),
            percentile(&latencies, 0.5),
            percentile(&latencies, 0.99),
        );
        eprintln!("churn {row}");
        rows.push(row);
    }
    println!("| Kubernetes | layout | boundaries × 3 policies | policy changes | API server crashes | `fatal error` lines | policy/binding spec writes per change | parameter writes per change | creates alongside | create p50 | create p99 |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!("{row}");
    }
}
