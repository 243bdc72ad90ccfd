//! Which namespaces a boundary may hold (SPEC 3.4 v3.2), as `palisade serve` runs against a
//! real API server:
//! - a boundary namespace deleted in the cluster and made again by someone else under the same
//!   name is not labelled (before: labelled within 8 s, its workloads then judged by the
//!   boundary's policies and its developers able to deploy there); the namespace reads
//!   `gone: ...`, and the boundary's workloads can no longer be placed there;
//! - `kube-system` cannot be taken, by a boundary-admin nor by an admin, and stays unlabelled;
//! - an image volume on 1.30, where the field does not exist, is never admitted with the volume.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::{DeleteParams, PostParams};
use kube::Api;
use palisade_testkit::control_plane::unique_name;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::serve::{namespace_path, Stack};
use crate::support::{on_both_versions, plane};

on_both_versions!(
    a_namespace_made_again_by_someone_else_is_not_the_boundary_s,
    an_image_volume_is_judged_or_never_admitted,
);

const LABEL: &str = "palisade.dev/boundary";

async fn label_of(api: &Api<Namespace>, name: &str) -> Option<String> {
    api.get_opt(name)
        .await
        .unwrap()
        .and_then(|n| n.metadata.labels)
        .and_then(|l| l.get(LABEL).cloned())
}

/// Deletes the namespace and waits until it is gone. A bare API server runs no namespace
/// controller, so the test finalizes it as that controller would.
async fn delete_namespace(api: &Api<Namespace>, name: &str) {
    api.delete(name, &DeleteParams::default()).await.unwrap();
    let started = Instant::now();
    loop {
        let Some(mut namespace) = api.get_opt(name).await.unwrap() else {
            return;
        };
        if let Some(spec) = namespace.spec.as_mut() {
            spec.finalizers = Some(Vec::new());
        }
        let _ = api
            .replace_subresource("finalize", name, &PostParams::default(), &namespace)
            .await;
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "namespace {name} still there after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A stack whose boundary (named from `prefix`) has cluster `k1` (the plane of `version`), one
/// namespace made through the API, and policy `trusted` of `rules`, enforced there.
struct Enforced {
    stack: Stack,
    admin: kube::Client,
    boundary: String,
    namespace: String,
    /// The namespace's path in the API, and its answer to the `PUT` that made it.
    path: String,
    created: Value,
}

async fn enforced(version: &str, prefix: &str, rules: Value) -> Enforced {
    let plane = plane(version).await;
    let stack = Stack::start(None).await;
    let namespace = unique_name(prefix);
    let boundary = stack
        .new_boundary(prefix, "k1", plane.kubeconfig_yaml())
        .await;
    let path = namespace_path(&boundary, "k1", &namespace);
    let created = stack.ok("PUT", &path, None).await;
    stack
        .enforce_policy(&boundary, "k1", "trusted", json!({ "rules": rules }))
        .await;
    Enforced {
        stack,
        admin: plane.client().await,
        boundary,
        namespace,
        path,
        created,
    }
}

async fn a_namespace_made_again_by_someone_else_is_not_the_boundary_s(version: &str) {
    let Enforced {
        stack,
        admin,
        boundary,
        namespace,
        path,
        created,
    } = enforced(
        version,
        "isolated",
        json!([{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]),
    )
    .await;
    let namespaces: Api<Namespace> = Api::all(admin);
    let uid = namespaces
        .get(&namespace)
        .await
        .unwrap()
        .metadata
        .uid
        .unwrap();
    assert_eq!(created["uid"], uid.as_str(), "{created}");
    assert_eq!(created["status"], "active");

    // Someone deletes the namespace and makes one of the same name.
    delete_namespace(&namespaces, &namespace).await;
    let stranger: Namespace =
        serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
    namespaces
        .create(&PostParams::default(), &stranger)
        .await
        .unwrap();

    // The record reads gone once a pass has looked (the watch sees the labelled namespace go).
    let expected = format!(
        "gone: namespace '{namespace}' was deleted in k1; a namespace of that name made since is not the boundary's (adopt it to take it)"
    );
    let started = Instant::now();
    loop {
        let view: Value = stack.ok("GET", &path, None).await;
        if view["status"] == expected.as_str() {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still {view} after 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Well past a pass (before this change the label came back within 8 s): still unlabelled.
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(label_of(&namespaces, &namespace).await, None);

    // The boundary's workloads can no longer be placed there.
    let (status, body) = stack
        .call(
            "POST",
            &format!("/v1/boundaries/{boundary}/resources"),
            Some(json!({
                "type": "app", "name": "web", "plan": "small",
                "image": "ghcr.io/acme/web:1.0",
                "cluster": "k1", "namespace": namespace,
            })),
        )
        .await;
    assert!(
        status.is_client_error(),
        "placed in a namespace that is not the boundary's: {status} {body}"
    );

    // An admin takes it on purpose: adopted, the new uid recorded, active again.
    let adopted = stack.ok("PUT", &path, Some(json!({"adopt": true}))).await;
    assert_eq!(adopted["action"], "adopted", "{adopted}");
    assert_eq!(adopted["status"], "active", "{adopted}");
    assert_ne!(adopted["uid"], uid.as_str(), "{adopted}");
    assert_eq!(
        label_of(&namespaces, &namespace).await.as_deref(),
        Some(boundary.as_str())
    );

    // The cluster's own namespaces cannot be taken, and stay unlabelled.
    for adopt in [false, true] {
        let (status, body) = stack
            .call(
                "PUT",
                &format!("/v1/boundaries/{boundary}/clusters/k1/namespaces/kube-system"),
                Some(json!({"adopt": adopt})),
            )
            .await;
        assert_eq!(status, StatusCode::CONFLICT, "{body}");
        assert_eq!(
            body["error"]["message"],
            "namespace 'kube-system' is reserved in cluster 'k1': it cannot belong to a boundary"
        );
    }
    assert_eq!(label_of(&namespaces, "kube-system").await, None);
}

/// The first scenario: with `trusted` (allowedRegistries `ghcr.io/acme`,
/// disallowLatestTag) enforced, a Pod whose container is `ghcr.io/acme/app:1.0` and whose
/// volume is `{image: {reference: evil.io/miner:latest}}` was admitted. On 1.37 the API server
/// now denies it with palisade's message; on 1.30, which does not know the field, it is refused
/// by validation or admitted without the volume, never with it.
async fn an_image_volume_is_judged_or_never_admitted(version: &str) {
    // The stack is kept (bound) for the whole test: its reconciler keeps the policy installed.
    let Enforced {
        stack: _stack,
        admin,
        namespace,
        ..
    } = enforced(
        version,
        "volumes",
        json!([
            {"allowedRegistries": {"registries": ["ghcr.io/acme"]}},
            {"disallowLatestTag": {}}
        ]),
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(admin, &namespace);
    let miner: Pod = serde_json::from_value(json!({
        "metadata": {"name": "miner"},
        "spec": {
            "containers": [{"name": "app", "image": "ghcr.io/acme/app:1.0"}],
            "volumes": [{"name": "m", "image": {"reference": "evil.io/miner:latest"}}]
        }
    }))
    .unwrap();
    let dry_run = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    let answer = pods.create(&dry_run, &miner).await;
    if version == "1.30" {
        match answer {
            // The field is unknown there: the volume has no source left, and validation refuses.
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{status:?}");
                assert!(
                    !status.message.contains("ValidatingAdmissionPolicy"),
                    "{status:?}"
                );
            }
            Ok(pod) => {
                let volumes = pod.spec.and_then(|s| s.volumes).unwrap_or_default();
                assert!(
                    volumes
                        .iter()
                        .all(|v| serde_json::to_value(v).unwrap()["image"].is_null()),
                    "admitted with the image volume: {volumes:?}"
                );
            }
            Err(other) => panic!("dry-run create: {other}"),
        }
    } else {
        match answer {
            Err(kube::Error::Api(status)) => {
                assert_eq!(status.code, 422, "{status:?}");
                assert!(
                    status.message.ends_with(
                        "denied request: Policy 'trusted' (AllowedRegistries) denied image evil.io/miner:latest: it is not under ghcr.io/acme."
                    ),
                    "{status:?}"
                );
            }
            other => panic!("the miner was not denied: {other:?}"),
        }
    }
}
