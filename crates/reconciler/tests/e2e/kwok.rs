//! With kube-scheduler and kwok (1.37 only): a Deployment's Pods are scheduled onto kwok's
//! fake Nodes and become `Running` without any container runtime, so that end-to-end tests can
//! run workloads.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{ListParams, PostParams};
use kube::Api;
use palisade_testkit::control_plane::{temp_namespace, ControlPlane, Options};
use serde_json::json;

use crate::support::eventually;

const RUNNING_TIMEOUT: Duration = Duration::from_secs(120);
const REPLICAS: i32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deployment_pods_run_on_fake_nodes_on_1_37() {
    let started = Instant::now();
    let options = Options {
        workloads: true,
        ..Options::default()
    };
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start_with("1.37", &options))
        .await
        .unwrap();
    let client = plane.client().await;

    // The Nodes start.sh created for kwok to manage (annotation kwok.x-k8s.io/node=fake).
    let fake_nodes: BTreeSet<String> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|node| {
            node.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("kwok.x-k8s.io/node"))
                .is_some_and(|value| value == "fake")
        })
        .filter_map(|node| node.metadata.name)
        .collect();
    assert!(!fake_nodes.is_empty(), "start.sh created no fake Node");

    let namespace = temp_namespace(&client, None).await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": [{"name": "web", "image": "ghcr.io/acme/web:1.0"}]}}},
    }))
    .unwrap();
    let created = Instant::now();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();

    let (placement, _) = eventually(
        "the Deployment available with 3 Pods Running on fake Nodes",
        RUNNING_TIMEOUT,
        || async {
            let available = deployments
                .get_status("web")
                .await
                .unwrap()
                .status
                .and_then(|s| s.available_replicas);
            if available != Some(REPLICAS) {
                return None;
            }
            let running: Vec<(String, String)> = pods
                .list(&ListParams::default().labels("app=web"))
                .await
                .unwrap()
                .items
                .into_iter()
                .filter(|pod| {
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                })
                .filter_map(|pod| {
                    let node = pod.spec.and_then(|s| s.node_name)?;
                    fake_nodes
                        .contains(&node)
                        .then(|| (pod.metadata.name.unwrap_or_default(), node))
                })
                .collect();
            (running.len() == usize::try_from(REPLICAS).unwrap()).then_some(running)
        },
    )
    .await;
    eprintln!(
        "Kubernetes {} with kube-scheduler and kwok: {REPLICAS} Pods Running {:.1} s after the \
         control plane started to start (startup {:.1} s, {:.1} s after the Deployment's \
         creation): {placement:?}",
        plane.version(),
        started.elapsed().as_secs_f64(),
        plane.startup_time().as_secs_f64(),
        created.elapsed().as_secs_f64()
    );
    drop(client);
    tokio::task::spawn_blocking(move || drop(plane))
        .await
        .unwrap();
}
