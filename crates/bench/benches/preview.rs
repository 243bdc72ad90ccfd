//! Preview at scale (issue: preview and audit, item 4): OBJECTS objects (default 100,000)
//! spread over CLUSTERS private Kubernetes 1.37 control planes (default 3), previewed through
//! the application's `preview_policy`, the path of `POST .../preview`, with the Kubernetes
//! adapter: paged lists (500 a page) and the Rust evaluator.
//!
//! Each cluster holds NAMESPACES (default 10) namespaces of the boundary; each namespace holds
//! Deployments, each with the ReplicaSet it owns and 8 Pods that ReplicaSet owns (real owner
//! references with real uids, as controllers set them; no controller runs). One Deployment in
//! five runs `nginx:latest`. The policy previewed disallows the latest tag and requires a label
//! every object has.
//!
//! Printed: per cluster, the objects read, the time spent listing (the API server's share) and
//! evaluating (palisade's share); in all, the evaluation time, the findings, and the peak of
//! heap memory the preview took above what was live before it (a counting allocator), beside
//! the size of the JSON the API servers sent.
//!
//! `cargo bench -p palisade-bench --bench preview -- OBJECTS CLUSTERS`

use std::sync::Arc;
use std::time::Instant;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::Api;
use palisade_api_types::view::NewBoundary;
use palisade_app::caller::caller_from_token;
use palisade_policy::Catalog;
use palisade_server::SealingKey;
use palisade_testkit::bench::{args_or_usage, env_number};
use palisade_testkit::control_plane::{temp_namespace, ControlPlane};
use peak_alloc::PeakAlloc;
use serde_json::json;

/// Counts live heap bytes and their peak.
#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

const BOUNDARY: &str = "bench";
const PODS_PER_DEPLOYMENT: usize = 8;
const IN_FLIGHT: usize = 48;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Creates the namespaced object `object` (its JSON) in `namespace`: what the API server
/// stored, with the uid its dependents' owner references name.
async fn create<K>(client: &kube::Client, namespace: &str, object: serde_json::Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + k8s_openapi::serde::Serialize
        + k8s_openapi::serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &object)
        .await
        .unwrap()
}

/// Creates `deployments` Deployments, their ReplicaSets and Pods in `namespace`.
async fn populate(client: kube::Client, namespace: String, first: usize, deployments: usize) {
    let semaphore = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = tokio::task::JoinSet::new();
    for index in first..first + deployments {
        let permit = semaphore.clone().acquire_owned().await.unwrap();
        let client = client.clone();
        let namespace = namespace.clone();
        tasks.spawn(async move {
            let image = if index % 5 == 0 {
                "nginx:latest".to_owned()
            } else {
                format!("ghcr.io/acme/app-{index}:1.{index}")
            };
            let name = format!("app-{index}");
            let labels = json!({"app": name, "team": "web"});
            let template = json!({"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "app", "image": image}]}});
            let deployment: Deployment = create(&client, &namespace, json!({
                "metadata": {"name": name, "labels": labels},
                "spec": {"replicas": PODS_PER_DEPLOYMENT, "selector": {"matchLabels": {"app": name}},
                         "template": template},
            }))
            .await;
            let owner = |kind: &str, name: &str, uid: Option<String>| {
                json!([{"apiVersion": "apps/v1", "kind": kind, "name": name,
                        "uid": uid.unwrap(), "controller": true}])
            };
            let set_name = format!("{name}-5d9c");
            let replica_set: ReplicaSet = create(&client, &namespace, json!({
                "metadata": {"name": set_name, "labels": labels,
                    "ownerReferences": owner("Deployment", &name, deployment.metadata.uid)},
                "spec": {"replicas": PODS_PER_DEPLOYMENT, "selector": {"matchLabels": {"app": name}},
                         "template": template},
            }))
            .await;
            for pod_index in 0..PODS_PER_DEPLOYMENT {
                let _: Pod = create(&client, &namespace, json!({
                    "metadata": {"name": format!("{set_name}-{pod_index}"), "labels": labels,
                        "ownerReferences": owner("ReplicaSet", &set_name, replica_set.metadata.uid.clone())},
                    "spec": template["spec"],
                }))
                .await;
            }
            drop(permit);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(args) = args_or_usage(
        "preview",
        "OBJECTS and CLUSTERS (private control planes, minutes to fill)",
        "cargo bench -p palisade-bench --bench preview -- 100000 3",
    ) else {
        return;
    };
    let objects: usize = args[0].parse().expect("OBJECTS is a number");
    let clusters: usize = args
        .get(1)
        .map_or(3, |c| c.parse().expect("CLUSTERS is a number"));
    let namespaces = env_number("NAMESPACES", 10);
    let per_deployment = PODS_PER_DEPLOYMENT + 2;
    let deployments_per_namespace = objects.div_ceil(clusters * namespaces * per_deployment);

    let mut planes = Vec::new();
    for _ in 0..clusters {
        planes.push(
            tokio::task::spawn_blocking(|| ControlPlane::start("1.37"))
                .await
                .unwrap(),
        );
    }
    let started = Instant::now();
    let mut fills = tokio::task::JoinSet::new();
    for plane in &planes {
        let client = plane.client().await;
        for _ in 0..namespaces {
            let namespace = temp_namespace(&client, Some(BOUNDARY)).await;
            fills.spawn(populate(
                client.clone(),
                namespace,
                0,
                deployments_per_namespace,
            ));
        }
    }
    while let Some(done) = fills.join_next().await {
        done.unwrap();
    }
    let stored = clusters * namespaces * deployments_per_namespace * per_deployment;
    eprintln!(
        "preview: {stored} objects created in {clusters} clusters in {:.0} s",
        started.elapsed().as_secs_f64()
    );

    // The application as `palisade serve` builds it, on a SQLite store.
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
    let store = palisade_store::connect(&url).await.unwrap();
    palisade_app::caller::bootstrap_admin(store.as_ref(), dir.path())
        .await
        .unwrap();
    let token = std::fs::read_to_string(dir.path().join("admin.token")).unwrap();
    let app = palisade_app::App::new(store, Catalog::builtin(), SealingKey::random())
        .with_clusters(Arc::new(palisade_reconciler::KubeClusters));
    let admin = caller_from_token(&app, token.trim()).await.unwrap();
    let boundary: NewBoundary = serde_json::from_value(json!({"name": BOUNDARY})).unwrap();
    app.create_boundary(&admin, boundary).await.unwrap();
    let access = app.open(&admin, BOUNDARY).await.unwrap();
    for (index, plane) in planes.iter().enumerate() {
        let name = format!("c{index}");
        app.put_cluster(&admin, &name, plane.kubeconfig_yaml(), None)
            .await
            .unwrap();
        app.attach_cluster(&access, &name).await.unwrap();
    }
    let spec = serde_json::to_vec(&json!({"rules": [
        {"requiredLabels": {"labels": [{"key": "team"}]}},
        {"disallowLatestTag": {}},
    ]}))
    .unwrap();

    for round in ["warm-up", "measured"] {
        let before = ALLOCATOR.current_usage();
        ALLOCATOR.reset_peak_usage();
        let started = Instant::now();
        let preview = app
            .preview_policy(&access, "no-latest", &spec)
            .await
            .unwrap();
        let took = started.elapsed();
        let peak = ALLOCATOR.peak_usage().saturating_sub(before);
        if round == "warm-up" {
            continue;
        }
        let mut checked = 0;
        let mut evaluate_ms = 0;
        for cluster in &preview.clusters {
            assert!(cluster.error.is_none(), "{:?}", cluster.error);
            println!(
                "cluster {}: {} objects checked in {} namespaces; list {} ms, evaluation {} ms",
                cluster.cluster,
                cluster.checked,
                cluster.namespaces.len(),
                cluster.list_ms,
                cluster.evaluate_ms
            );
            checked += cluster.checked;
            evaluate_ms += cluster.evaluate_ms;
        }
        let s = &preview.summary;
        println!(
            "preview of {checked} objects in {clusters} clusters: {:.2} s in all (clusters read at once); \
             evaluation {evaluate_ms} ms summed over clusters; {} denied, {} workloads, {} replicas at risk; \
             peak heap above the baseline {:.1} MiB (the answer itself included)",
            took.as_secs_f64(),
            s.objects,
            s.workloads,
            s.replicas_at_risk,
            mib(peak),
        );
        let answer = serde_json::to_vec(&preview).unwrap().len();
        println!("the answer's JSON: {:.1} MiB", mib(answer));
    }

    // The evaluator alone, on the same number of objects held in memory as pages.
    let page: Vec<serde_json::Value> = (0..500)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}"), "namespace": "n", "uid": format!("u{i}"),
                             "labels": {"team": "web"},
                             "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                  "name": "rs", "uid": "rs", "controller": true}]},
                "spec": {"containers": [{"name": "c",
                    "image": if i % 5 == 0 { "nginx:latest".to_owned() } else { format!("ghcr.io/acme/a:{i}") }}]}})
        })
        .collect();
    let policy = palisade_testkit::corpus::policy(
        "no-latest",
        BOUNDARY,
        json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}, {"disallowLatestTag": {}}]}),
    );
    let started = Instant::now();
    let mut scan = palisade_policy::scan::Scan::new(vec![&policy]);
    for _ in 0..objects.div_ceil(page.len()) {
        for object in &page {
            scan.observe(object);
        }
    }
    let found = scan.finish();
    println!(
        "evaluator alone: {} objects in {} ms ({} findings)",
        objects.div_ceil(page.len()) * page.len(),
        started.elapsed().as_millis(),
        found[0].violations.len()
    );
}
