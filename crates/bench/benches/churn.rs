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
//! environment: `LAYOUT=per-policy|shared|per-boundary|auto`, `CHANGES`, `RATE`, `BOUNDARIES`; in
//! the per-boundary layout each change re-applies the boundary's one object holding its 3
//! policies). With `LAYOUT=auto` palisade itself makes the changes: `palisade serve`'s API and
//! reconcile loop run in this process (`--admission-layout auto`), each change is a `PUT` of a
//! boundary's policy, and the reconciler decides what the cluster gets, in which layout; the
//! table then also says the layout before and after, and how long after the last change every
//! boundary's last version was `enforced`.

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
#[path = "support/stack.rs"]
mod stack;

use plane::{layout_from_env, private_plane};
use stack::Stack;

const INSTALLATION: &str = "benchchurn";

fn policy(name: &str, spec: serde_json::Value) -> palisade_policy::Policy {
    palisade_testkit::corpus::policy(name, "bench", spec)
}

/// A boundary's 3 policies as documents (name, spec): two that never change, then the
/// `allowedRegistries` policy `trusted` in one of two versions (even, odd).
fn policy_specs(version: usize) -> [(&'static str, serde_json::Value); 3] {
    let registries = if version.is_multiple_of(2) {
        json!(["ghcr.io/acme"])
    } else {
        json!(["ghcr.io/acme", "registry.acme.internal"])
    };
    [
        (
            "owner",
            json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}]}),
        ),
        ("no-latest", json!({"rules": [{"disallowLatestTag": {}}]})),
        (
            "trusted",
            json!({"rules": [{"allowedRegistries": {"registries": registries}}]}),
        ),
    ]
}

/// `trusted` in `version`.
fn trusted(version: usize) -> palisade_policy::Policy {
    let [_, _, (name, spec)] = policy_specs(version);
    policy(name, spec)
}

/// The two policies that never change.
fn fixed_policies() -> Vec<palisade_policy::Policy> {
    let [owner, no_latest, _] = policy_specs(0);
    [owner, no_latest]
        .into_iter()
        .map(|(name, spec)| policy(name, spec))
        .collect()
}

/// Changes paced at `rate` a second, with compliant Pods created one after the other in
/// `namespace` alongside until [`Alongside::creates`] stops them.
struct Alongside {
    done: Arc<AtomicBool>,
    creates: tokio::task::JoinHandle<(Vec<Duration>, usize)>,
    started: Instant,
    ticker: tokio::time::Interval,
}

impl Alongside {
    fn start(client: &kube::Client, namespace: &str, rate: usize) -> Alongside {
        let done = Arc::new(AtomicBool::new(false));
        let api = Api::<Pod>::namespaced(client.clone(), namespace);
        let creating = done.clone();
        let creates = tokio::spawn(async move {
            let (mut latencies, mut failures, mut index) = (Vec::new(), 0usize, 0usize);
            while !creating.load(Ordering::Relaxed) {
                let started = Instant::now();
                match api.create(&PostParams::default(), &pod(index)).await {
                    Ok(_) => latencies.push(started.elapsed()),
                    Err(_) => failures += 1,
                }
                index += 1;
            }
            (latencies, failures)
        });
        let started = Instant::now();
        let mut ticker = tokio::time::interval(Duration::from_secs_f64(1.0 / rate as f64));
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        Alongside {
            done,
            creates,
            started,
            ticker,
        }
    }

    /// Stops the creates: their latencies and how many failed.
    async fn creates(self) -> (Vec<Duration>, usize) {
        self.done.store(true, Ordering::Relaxed);
        self.creates.await.unwrap()
    }
}

/// What a run of changes did to the API server: whether the process started is still alive,
/// the growth of the policies' and parameters' generations (`-1` each when it is not), and
/// its `fatal error` lines (printed with `context`).
async fn aftermath(
    plane: &ControlPlane,
    client: &kube::Client,
    selector: &str,
    pid: &str,
    (policies_before, parameters_before): (i64, i64),
    context: &str,
) -> (bool, i64, i64, usize) {
    let alive =
        apiserver_pid(plane) == pid && std::path::Path::new(&format!("/proc/{pid}")).exists();
    let (compiled, parameters) = if alive {
        (
            generations(client, selector).await - policies_before,
            parameter_generations(client, selector).await - parameters_before,
        )
    } else {
        (-1, -1)
    };
    let fatal = fatal_errors(plane);
    for (index, text) in fatal.iter().enumerate() {
        eprintln!(
            "churn {}: kube-apiserver fatal error {index} ({context}):\n{text}",
            plane.version()
        );
    }
    (alive, compiled, parameters, fatal.len())
}

/// The cells a row shares, from the policy changes to the create p99: `changes` made in
/// `took` (`failed_changes` of them refused), what they did to the API server (`aftermath`),
/// and the latencies and failures of the creates alongside.
fn change_cells(
    (changes, failed_changes, took): (usize, usize, Duration),
    (alive, compiled, parameters, fatal): (bool, i64, i64, usize),
    (mut latencies, create_failures): (Vec<Duration>, usize),
) -> String {
    latencies.sort();
    format!(
        "{changes} in {:.1} s ({:.0}/s), {failed_changes} failed | {} | {} | {:.3} | {:.3} | {} ({create_failures} failed) | {:.2} ms | {:.2} ms",
        took.as_secs_f64(),
        changes as f64 / took.as_secs_f64(),
        if alive { "0" } else { "1 (process gone)" },
        fatal,
        compiled as f64 / changes as f64,
        parameters as f64 / changes as f64,
        latencies.len(),
        percentile(&latencies, 0.5),
        percentile(&latencies, 0.99),
    )
}

/// The objects this bench's fixed layouts write.
fn installation_selector() -> String {
    format!("palisade.dev/installation={INSTALLATION}")
}

/// The summed `metadata.generation` of the policies and bindings `selector` picks.
async fn generations(client: &kube::Client, selector: &str) -> i64 {
    let params = ListParams::default().labels(selector);
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

/// The summed `metadata.generation` of the parameter objects `selector` picks (0 without any).
async fn parameter_generations(client: &kube::Client, selector: &str) -> i64 {
    let api = Api::<DynamicObject>::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(PARAMS_GROUP, PARAMS_VERSION, PARAMS_KIND),
            PARAMS_PLURAL,
        ),
    );
    let params = ListParams::default().labels(selector);
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
    let changes = env_number("CHANGES", 10_000);
    let rate = env_number("RATE", 100);
    let boundaries = env_number("BOUNDARIES", 50);
    if std::env::var("LAYOUT").is_ok_and(|l| l == "auto") {
        let mut rows = Vec::new();
        for version in versions {
            rows.push(churn_auto(&version, changes, rate, boundaries).await);
        }
        println!("| Kubernetes | layout before | layout after | boundaries × 3 policies | policy changes (PUTs) | API server crashes | `fatal error` lines | policy/binding spec writes per change | parameter writes per change | creates alongside | create p50 | create p99 | last versions enforced after the changes |");
        println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
        for row in rows {
            println!("{row}");
        }
        return;
    }
    let layout = layout_from_env();
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
        let generations_before = generations(&client, &installation_selector()).await;
        let parameters_before = parameter_generations(&client, &installation_selector()).await;

        // Creates alongside, one after the other, until the changes are done.
        let mut run = Alongside::start(&client, &namespace, rate);
        let mut failed_changes = 0usize;
        let mut first_failure = None;
        for change in 0..changes {
            run.ticker.tick().await;
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
        let took = run.started.elapsed();
        let creates = run.creates().await;
        let after = aftermath(
            &plane,
            &client,
            &installation_selector(),
            &pid,
            (generations_before, parameters_before),
            &format!("first failed change: {first_failure:?}"),
        )
        .await;
        let row = format!(
            "| {} | {label} | {boundaries} | {} |",
            plane.version(),
            change_cells((changes, failed_changes, took), after, creates),
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

/// Waits until every boundary's `trusted` policy, as stored now, is `enforced` in the cluster;
/// how long that took, or `None` after `limit`.
async fn all_enforced(stack: &Stack, boundaries: &[String], limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut waiting: Vec<&String> = boundaries.iter().collect();
    while !waiting.is_empty() {
        if started.elapsed() > limit {
            return None;
        }
        let mut still = Vec::new();
        for boundary in waiting {
            let policy = stack
                .ok(
                    "GET",
                    &format!("/v1/boundaries/{boundary}/policies/trusted"),
                    None,
                )
                .await;
            let enforced = policy["status"]["clusters"]
                .as_array()
                .is_some_and(|c| c.iter().all(|c| c["status"] == "enforced") && !c.is_empty());
            if !enforced {
                still.push(boundary);
            }
        }
        waiting = still;
        if !waiting.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Some(started.elapsed())
}

/// `LAYOUT=auto`: palisade as `serve` runs it (the API and the reconcile loop, with
/// `--admission-layout auto`, the default) makes the changes: each is a `PUT` of a boundary's
/// `trusted` policy, and the reconciler decides what the cluster gets and in which layout.
async fn churn_auto(version: &str, changes: usize, rate: usize, boundaries: usize) -> String {
    let wanted = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start(&wanted))
        .await
        .unwrap();
    let client = plane.client().await;
    let stack = Stack::start().await;
    stack
        .ok(
            "PUT",
            "/v1/clusters/churn",
            Some(json!({"kubeconfig": plane.kubeconfig_yaml()})),
        )
        .await;
    let mut names = Vec::new();
    for index in 0..boundaries {
        let boundary = format!("tenant-{index}");
        stack
            .ok("POST", "/v1/boundaries", Some(json!({"name": boundary})))
            .await;
        stack
            .ok(
                "PUT",
                &format!("/v1/boundaries/{boundary}/clusters/churn"),
                None,
            )
            .await;
        stack
            .ok(
                "PUT",
                &format!("/v1/boundaries/{boundary}/clusters/churn/namespaces/{boundary}-web"),
                None,
            )
            .await;
        for (name, spec) in policy_specs(0) {
            stack
                .ok(
                    "PUT",
                    &format!("/v1/boundaries/{boundary}/policies/{name}"),
                    Some(spec),
                )
                .await;
        }
        names.push(boundary);
    }
    all_enforced(&stack, &names, Duration::from_secs(300))
        .await
        .expect("the policies were never enforced");
    let layout_before = stack.ok("GET", "/v1/clusters/churn", None).await["layout"].clone();
    // Every object palisade writes (the installation's id is the runtime's own).
    let selector = format!(
        "{}={}",
        palisade_policy::labels::MANAGED_BY_LABEL,
        palisade_policy::labels::MANAGER
    );
    let selector = selector.as_str();
    let pid = apiserver_pid(&plane);
    let generations_before = generations(&client, selector).await;
    let parameters_before = parameter_generations(&client, selector).await;

    let namespace = format!("{}-web", names[0]);
    let mut run = Alongside::start(&client, &namespace, rate);
    let mut failed_changes = 0usize;
    for change in 0..changes {
        run.ticker.tick().await;
        let boundary = &names[change % names.len()];
        let (_, spec) = policy_specs(change / names.len() + 1)[2].clone();
        let (status, _) = stack
            .call(
                "PUT",
                &format!("/v1/boundaries/{boundary}/policies/trusted"),
                Some(spec),
            )
            .await;
        if !status.is_success() {
            failed_changes += 1;
        }
    }
    let took = run.started.elapsed();
    let settled = all_enforced(&stack, &names, Duration::from_secs(120)).await;
    let creates = run.creates().await;
    let after = aftermath(
        &plane,
        &client,
        selector,
        &pid,
        (generations_before, parameters_before),
        "auto",
    )
    .await;
    let layout = stack.ok("GET", "/v1/clusters/churn", None).await["layout"].clone();
    let shown = |l: &serde_json::Value| {
        format!(
            "{} ({})",
            l["name"].as_str().unwrap_or("-"),
            l["reason"].as_str().unwrap_or("-")
        )
    };
    let row = format!(
        "| {} | {} | {} | {boundaries} | {} | {} |",
        plane.version(),
        shown(&layout_before),
        shown(&layout),
        change_cells((changes, failed_changes, took), after, creates),
        settled.map_or("not within 120 s".to_owned(), |d| format!(
            "{:.1} s",
            d.as_secs_f64()
        )),
    );
    eprintln!("churn auto {row}");
    row
}
