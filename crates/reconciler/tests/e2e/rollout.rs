//! Staged rollout in the per-policy layout (SPEC 8), judged by a real API server: while a stage
//! has reached some namespaces of a boundary, the new version denies there in its mode and the
//! version in force before denies everywhere else exactly as before (its object names and
//! message), where the new one only warns.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::Api;
use palisade_reconciler::{AdmissionAnswer, ClusterClient};
use palisade_testkit::control_plane::temp_namespace;
use palisade_vap::per_policy::{render_staged, version_audit_binding_name, version_object_name};
use palisade_vap::{object_name, FIELD_MANAGER};
use serde_json::{json, Value};

use crate::support::{
    connect, eventually, name, on_both_versions, policy, requires_label, unique_boundary,
    ACTIVATION_TIMEOUT,
};

on_both_versions!(a_stage_splits_a_boundary_between_two_versions);

/// The installation of this test's objects (its own: no other test removes them).
const INSTALLATION: &str = "e2e-rollout";

fn pod(pod_name: &str, labels: Value, image: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": image}]},
    })
}

async fn create(cluster: &ClusterClient, namespace: &str, object: &Value) -> AdmissionAnswer {
    cluster.dry_run_create(namespace, object).await.unwrap()
}

async fn apply<K>(api: &Api<K>, object: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let object_name = object.meta().name.clone().unwrap();
    api.patch(
        &object_name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .unwrap();
}

async fn a_stage_splits_a_boundary_between_two_versions(version: &str) {
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let boundary = unique_boundary("rollout");
    let reached_ns = temp_namespace(&client, Some(boundary.as_str())).await;
    let other_ns = temp_namespace(&client, Some(boundary.as_str())).await;
    // Version 1 requires a label; version 2, being rolled out, allows one registry instead.
    let previous = policy("trusted", requires_label("team"));
    let current = policy(
        "trusted",
        json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
    );
    let reached = BTreeSet::from([name(&reached_ns)]);
    let staged = render_staged(
        &boundary,
        Some(&previous),
        &current,
        2,
        &reached,
        INSTALLATION,
        &[],
    )
    .unwrap();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let before = staged.previous.clone().unwrap();
    apply(&policies, &before.policy).await;
    apply(&policies, &staged.policy).await;
    apply(&bindings, &before.binding).await;
    for binding in &staged.bindings {
        apply(&bindings, binding).await;
    }

    let unlabelled = pod("unlabelled", json!({}), "ghcr.io/acme/web:1.4");
    let elsewhere = pod(
        "elsewhere",
        json!({"team": "web"}),
        "docker.io/library/nginx:1.27",
    );
    let v1 = object_name(&boundary, &name("trusted"));
    let v2 = version_object_name(&boundary, &name("trusted"), 2);
    // Both versions act once the API server has loaded all four objects.
    let (denied_outside, _) = eventually("both versions in force", ACTIVATION_TIMEOUT, || async {
        let outside = create(&cluster, &other_ns, &unlabelled).await;
        let inside = create(&cluster, &reached_ns, &elsewhere).await;
        (!outside.admitted() && !inside.admitted()).then_some(outside)
    })
    .await;

    // Where the stage has not reached: version 1, exactly as before the change.
    assert_eq!(
        denied_outside.message.as_deref(),
        Some(
            format!(
                "pods \"unlabelled\" is forbidden: ValidatingAdmissionPolicy '{v1}' with binding '{v1}' denied request: Policy 'trusted' (RequiredLabels) requires the label team."
            )
            .as_str()
        ),
        "{denied_outside:?}"
    );
    // ... where version 2 only warns.
    let warned = create(&cluster, &other_ns, &elsewhere).await;
    assert!(warned.admitted(), "{warned:?}");
    let audit = version_audit_binding_name(&boundary, &name("trusted"), 2);
    assert_eq!(
        warned.warnings,
        [format!(
            "Validation failed for ValidatingAdmissionPolicy '{v2}' with binding '{audit}': Policy 'trusted' (AllowedRegistries) denied image docker.io/library/nginx:1.27: it is not under ghcr.io/acme."
        )],
        "{warned:?}"
    );

    // Where it has reached: version 2 in its mode, and version 1 no more.
    let denied_inside = create(&cluster, &reached_ns, &elsewhere).await;
    assert_eq!(
        denied_inside.message.as_deref(),
        Some(
            format!(
                "pods \"elsewhere\" is forbidden: ValidatingAdmissionPolicy '{v2}' with binding '{v2}' denied request: Policy 'trusted' (AllowedRegistries) denied image docker.io/library/nginx:1.27: it is not under ghcr.io/acme."
            )
            .as_str()
        ),
        "{denied_inside:?}"
    );
    let admitted = create(&cluster, &reached_ns, &unlabelled).await;
    assert!(admitted.admitted(), "{admitted:?}");
    assert!(admitted.warnings.is_empty(), "{admitted:?}");

    for binding in staged.bindings.iter().chain([&before.binding]) {
        let binding_name = binding.metadata.name.clone().unwrap();
        bindings
            .delete(&binding_name, &DeleteParams::default())
            .await
            .unwrap();
    }
    for object in [&before.policy, &staged.policy] {
        let object_name = object.metadata.name.clone().unwrap();
        policies
            .delete(&object_name, &DeleteParams::default())
            .await
            .unwrap();
    }
}
