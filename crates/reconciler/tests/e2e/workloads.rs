//! With kube-controller-manager (1.37 only): a Deployment stored before a policy it violates
//! is scaled up; the controllers' own UPDATEs pass, the Pods they then create are denied, and
//! the ReplicaSet's `FailedCreate` event carries palisade's message (SPEC 3.1, 5).

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::Api;
use palisade_testkit::control_plane::{temp_namespace, ControlPlane, Options};
use palisade_vap::object_name;
use serde_json::json;

use crate::support::{admin_of, apply_enforced, eventually, no_latest, policy, unique_boundary};
use std::time::{Duration, Instant};

const CONTROLLERS_TIMEOUT: Duration = Duration::from_secs(120);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaled_up_pods_of_an_older_deployment_are_denied_on_1_37() {
    let started = Instant::now();
    let options = Options {
        controller_manager: true,
        workloads: false,
        apiserver_args: Vec::new(),
    };
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start_with("1.37", &options))
        .await
        .unwrap();
    let client = plane.client().await;
    let cluster = admin_of(&plane).await;
    let boundary = unique_boundary("workloads");
    let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
    let deployments = Api::<Deployment>::namespaced(client.clone(), &namespace);
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    let labels = json!({"app": "web", "team": "web"});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": labels},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "app", "image": "nginx:latest"}]}}},
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    // Its Pod is created once the namespace's default service account exists.
    eventually(
        "the Deployment's first Pod",
        CONTROLLERS_TIMEOUT,
        || async {
            (pods.list(&ListParams::default()).await.unwrap().items.len() == 1).then_some(())
        },
    )
    .await;

    let no_latest = policy("no-latest", no_latest());
    apply_enforced(&cluster, &boundary, &no_latest, &namespace).await;

    // Scale through the /scale subresource (not checked); the deployment controller then
    // UPDATEs the ReplicaSet (exempt), whose controller CREATEs Pods (checked, denied).
    deployments
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    let vap = object_name(&boundary, no_latest.name());
    let wanted = format!(
        "ValidatingAdmissionPolicy '{vap}' with binding '{vap}' denied request: \
         Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag."
    );
    let events = Api::<Event>::namespaced(client.clone(), &namespace);
    let (event, _) = eventually(
        "a FailedCreate event with palisade's message",
        CONTROLLERS_TIMEOUT,
        || async {
            events
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("FailedCreate")
                        && e.involved_object.kind.as_deref() == Some("ReplicaSet")
                        && e.message.as_deref().is_some_and(|m| m.contains(&wanted))
                })
        },
    )
    .await;
    let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), &namespace)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert_eq!(replica_sets.len(), 1);
    assert_eq!(
        replica_sets[0].spec.as_ref().and_then(|s| s.replicas),
        Some(3),
        "the controller's UPDATE of the ReplicaSet passed"
    );
    assert_eq!(
        pods.list(&ListParams::default()).await.unwrap().items.len(),
        1,
        "no new Pod was created"
    );
    eprintln!(
        "Kubernetes {} with kube-controller-manager: FailedCreate on ReplicaSet {}: {}; {:.1} s in all",
        plane.version(),
        event.involved_object.name.unwrap_or_default(),
        event.message.unwrap_or_default(),
        started.elapsed().as_secs_f64()
    );
    drop(cluster);
    drop(client);
    tokio::task::spawn_blocking(move || drop(plane))
        .await
        .unwrap();
}
