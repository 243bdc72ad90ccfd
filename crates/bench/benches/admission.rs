//! Admission overhead of palisade's policies on real Pod creates.
//!
//! For each Kubernetes version asked for (for example `1.30 1.37`), a private control plane
//! (etcd + kube-apiserver from `testenv/`) is started and a namespace labelled
//! `palisade.dev/boundary=bench` is created. One client then creates Pods sequentially (real
//! creates, not dry-run), timing each create from the request to the answer:
//!
//! 1. a warm-up of `WARMUP` Pods (default 100), not counted;
//! 2. `PODS` Pods (default 1,000) with no palisade object in the cluster;
//! 3. palisade's boundary-label guard and three policies of the boundary are installed (one
//!    `requiredLabels`, one `allowedRegistries`, one `disallowLatestTag`), and each is
//!    confirmed active by a server-side dry-run of a Pod that only it denies;
//! 4. `PODS` more Pods, all compliant, so every create is admitted;
//! 5. palisade's objects are removed (and a Pod breaking all three rules is admitted again),
//!    and `PODS` Pods are created once more: an order check, since the run with policies
//!    always comes after the first run without.
//!
//! The Pods are deleted after every step (unscheduled Pods go at once), so etcd holds the same
//! number of Pods (none) at the start of every measured run. Prints p50/p99 of the three runs and
//! their ratios to the first run without policies.
//!
//! `cargo bench -p palisade-bench --bench admission -- VERSION...` (e.g. `1.30 1.37`)
//! (environment: `PODS`, `WARMUP`, `POLICIES` to install only the first 0, 1 or 2 of the
//! three policies, for a breakdown, and `BLOCKS`: with `BLOCKS=10` both runs are cut into 10
//! blocks of `PODS/10` Pods, alternated without/with, with/without, ..., so that slow drifts
//! of a shared machine affect both alike; there is no order-check run then).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use palisade_policy::{Name, Policy};
use palisade_reconciler::{ClusterClient, InLayout, Layout};
use palisade_testkit::bench::{args_or_usage, env_number};
use palisade_testkit::control_plane::{self, ControlPlane};
use serde_json::json;

const BOUNDARY: &str = "bench";
const INSTALLATION: &str = "bench-admission";

/// A validated policy named `name` of the bench boundary, from its spec.
fn policy(name: &str, spec: serde_json::Value) -> Policy {
    palisade_testkit::corpus::policy(name, BOUNDARY, spec)
}

/// A Pod that every policy of the benchmark admits.
fn compliant_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"team": "bench", "app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1.0"}]},
    }))
    .unwrap()
}

/// Nearest-rank quantile of sorted samples.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Creates `count` Pods one after the other; the sorted latencies.
async fn create_pods(pods: &Api<Pod>, prefix: &str, count: usize) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(count);
    for i in 0..count {
        let pod = compliant_pod(&format!("{prefix}-{i}"));
        let started = Instant::now();
        let created = pods.create(&PostParams::default(), &pod).await;
        latencies.push(started.elapsed());
        if let Err(error) = created {
            panic!("create {prefix}-{i} was refused: {error}");
        }
    }
    latencies.sort();
    latencies
}

/// Deletes every Pod of the namespace and waits until none is left.
async fn delete_pods(pods: &Api<Pod>) {
    pods.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    let started = Instant::now();
    while !pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .is_empty()
    {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "pods still there"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The benchmark's policies, each with a probe Pod (labels, image) that breaks its rule only.
fn policies() -> Vec<(Policy, serde_json::Value, &'static str)> {
    vec![
        (
            policy(
                "team-label",
                json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}]}),
            ),
            json!({}),
            "ghcr.io/acme/web:1.0",
        ),
        (
            policy(
                "registries",
                json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
            ),
            json!({"team": "bench"}),
            "docker.io/library/nginx:1.0",
        ),
        (
            policy("no-latest", json!({"rules": [{"disallowLatestTag": {}}]})),
            json!({"team": "bench"}),
            "ghcr.io/acme/web:latest",
        ),
    ]
}

/// Installs the guard and the first `count` policies, and waits until each denies its probe.
async fn install_policies(cluster: &InLayout, namespace: &str, count: usize) -> Duration {
    let started = Instant::now();
    let identity = cluster.whoami().await.unwrap();
    cluster
        .install_boundary_label_guard(INSTALLATION, &identity)
        .await
        .unwrap();
    let boundary = Name::parse(BOUNDARY).unwrap();
    let mut installed = policies();
    installed.truncate(count);
    for (policy, _, _) in &installed {
        cluster
            .apply_policy(INSTALLATION, &boundary, policy)
            .await
            .unwrap();
    }
    for (policy, labels, image) in installed {
        let pod = json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": "probe-", "labels": labels},
            "spec": {"containers": [{"name": "web", "image": image}]},
        });
        let object = palisade_vap::object_name(&boundary, policy.name());
        loop {
            let answer = cluster.dry_run_create(namespace, &pod).await.unwrap();
            if answer.denying_policy() == Some(object.as_str()) {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{} not enforced: {answer:?}",
                policy.name()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    started.elapsed()
}

/// Removes everything palisade installed and waits until a Pod breaking all three rules is
/// admitted again.
async fn remove_policies(cluster: &InLayout, namespace: &str) -> Duration {
    let started = Instant::now();
    cluster.remove_installation(INSTALLATION).await.unwrap();
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "probe-"},
        "spec": {"containers": [{"name": "web", "image": "docker.io/library/nginx"}]},
    });
    loop {
        let answer = cluster.dry_run_create(namespace, &pod).await.unwrap();
        if answer.admitted() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still refused: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

struct Figures {
    version: String,
    without: Vec<Duration>,
    with: Vec<Duration>,
    after: Vec<Duration>,
}

/// The schedule of one version's runs.
#[derive(Clone, Copy)]
struct Plan {
    pods_per_run: usize,
    warmup: usize,
    /// How many of the three policies are installed.
    policies: usize,
    /// 1: the runs one after the other; more: each run cut into this many blocks, alternated.
    blocks: usize,
}

async fn run(version: &str, plan: Plan) -> Figures {
    let wanted = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start(&wanted))
        .await
        .unwrap();
    let client = plane.client().await;
    let namespace = control_plane::temp_namespace(&client, Some(BOUNDARY)).await;
    let pods: Api<Pod> = Api::namespaced(client, &namespace);
    let cluster = ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
        .await
        .unwrap()
        .with_layout(Layout::PerPolicy);
    let version = plane.version().to_owned();
    let count = plan.policies;

    let warm = create_pods(&pods, "warm", plan.warmup).await;
    delete_pods(&pods).await;
    eprintln!(
        "{version}: warm-up of {} pods, p50 {:.2} ms",
        plan.warmup,
        ms(quantile(&warm, 0.5))
    );
    if plan.blocks > 1 {
        return run_alternating(&version, &pods, &cluster, &namespace, plan).await;
    }
    let without = create_pods(&pods, "without", plan.pods_per_run).await;
    delete_pods(&pods).await;
    let took = install_policies(&cluster, &namespace, count).await;
    eprintln!("{version}: guard and {count} policies installed and confirmed in {took:.2?}");
    let with = create_pods(&pods, "with", plan.pods_per_run).await;
    delete_pods(&pods).await;
    // The order check: without policies again, after the run with them.
    let took = remove_policies(&cluster, &namespace).await;
    eprintln!("{version}: palisade's objects removed and inactive in {took:.2?}");
    let after = create_pods(&pods, "after", plan.pods_per_run).await;
    delete_pods(&pods).await;
    Figures {
        version,
        without,
        with,
        after,
    }
}

/// Both runs cut into `blocks` blocks, alternated so that slow drifts of the machine fall on
/// both alike: without, with | with, without | without, with | ... (one install or removal
/// per block).
async fn run_alternating(
    version: &str,
    pods: &Api<Pod>,
    cluster: &InLayout,
    namespace: &str,
    plan: Plan,
) -> Figures {
    let per_block = plan.pods_per_run / plan.blocks;
    let mut without = Vec::new();
    let mut with = Vec::new();
    for block in 0..plan.blocks {
        if block % 2 == 0 {
            without.extend(create_pods(pods, &format!("without-{block}"), per_block).await);
            delete_pods(pods).await;
            install_policies(cluster, namespace, plan.policies).await;
            with.extend(create_pods(pods, &format!("with-{block}"), per_block).await);
            delete_pods(pods).await;
        } else {
            with.extend(create_pods(pods, &format!("with-{block}"), per_block).await);
            delete_pods(pods).await;
            remove_policies(cluster, namespace).await;
            without.extend(create_pods(pods, &format!("without-{block}"), per_block).await);
            delete_pods(pods).await;
        }
    }
    remove_policies(cluster, namespace).await;
    without.sort();
    with.sort();
    eprintln!(
        "{version}: {} blocks of {per_block} pods without and with, alternated",
        plan.blocks
    );
    Figures {
        version: version.to_owned(),
        without,
        with,
        after: Vec::new(),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(versions) = args_or_usage(
        "admission",
        "real control planes and several minutes",
        "cargo bench -p palisade-bench --bench admission -- 1.30 1.37 (or scripts/bench-k8s.sh)",
    ) else {
        return;
    };
    let pods_per_run = env_number("PODS", 1000);
    let warmup = env_number("WARMUP", 100);
    let count = env_number("POLICIES", 3).min(3);
    let blocks = env_number("BLOCKS", 1).max(1);
    let plan = Plan {
        pods_per_run,
        warmup,
        policies: count,
        blocks,
    };
    let mut all = Vec::new();
    for version in &versions {
        all.push(run(version, plan).await);
    }
    let order = if blocks > 1 {
        format!(
            "each run in {blocks} blocks of {}, alternated",
            pods_per_run / blocks
        )
    } else {
        "the runs one after the other".to_owned()
    };
    println!(
        "admission overhead: {pods_per_run} sequential Pod creates per run, one client, \
         after a warm-up of {warmup}; {order}"
    );
    println!("| Kubernetes | run | p50 | p99 | p50 ratio to without | p99 ratio to without |");
    println!("|---|---|---|---|---|---|");
    let with = format!("with the guard and {count} policies");
    for figures in &all {
        let base = (
            quantile(&figures.without, 0.5),
            quantile(&figures.without, 0.99),
        );
        for (run, samples) in [
            ("without palisade", &figures.without),
            (with.as_str(), &figures.with),
            ("without again (order check)", &figures.after),
        ] {
            if samples.is_empty() {
                continue;
            }
            let (p50, p99) = (quantile(samples, 0.5), quantile(samples, 0.99));
            println!(
                "| {} | {run} | {:.2} ms | {:.2} ms | {:.3}× | {:.3}× |",
                figures.version,
                ms(p50),
                ms(p99),
                p50.as_secs_f64() / base.0.as_secs_f64(),
                p99.as_secs_f64() / base.1.as_secs_f64(),
            );
        }
    }
}
