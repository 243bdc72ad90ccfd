//! Staged rollout in every layout (SPEC 8), judged by a real API server: while a stage has
//! reached some namespaces of a boundary, the new version denies there in its mode and the
//! version in force before denies everywhere else exactly as before (its object names and
//! message), where the new one only warns. The objects are written here as the renderers make
//! them; the reconciler does not write them yet.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::Api;
use palisade_policy::Mode;
use palisade_reconciler::{AdmissionAnswer, ClusterClient};
use palisade_testkit::control_plane::temp_namespace;
use palisade_vap::per_boundary::{render_boundary_staged, Rolling};
use palisade_vap::per_policy::{render_staged, version_audit_binding_name, version_object_name};
use palisade_vap::shared::{
    parameters_name, parameters_staged, shared_binding_name, shared_policy_name, PARAMS_GROUP,
    PARAMS_KIND, PARAMS_PLURAL, PARAMS_VERSION,
};
use palisade_vap::{boundary_object_name, object_name, Layout, FIELD_MANAGER};
use serde_json::{json, Value};

use crate::support::{
    connect, eventually, name, on_both_versions, policy, requires_label, unique_boundary,
    wait_enforced_in, ACTIVATION_TIMEOUT,
};

on_both_versions!(
    a_stage_splits_a_boundary_between_two_versions,
    a_stage_splits_a_boundary_in_the_per_boundary_layout,
    a_stage_splits_a_boundary_in_the_shared_layout
);

/// The installation of this test's objects (its own: no other test removes them).
const INSTALLATION: &str = "e2e-rollout";

fn pod(pod_name: &str, labels: Value, image: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": pod_name, "labels": labels},
        "spec": {"containers": [{"name": "c", "image": image}]},
    })
}

/// The API server's `apiserver_validating_admission_policy_check_total`, by binding and
/// enforcement action (summed over the other labels), read from its `/metrics` as admin.
async fn policy_checks(client: &kube::Client) -> BTreeMap<(String, String), f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = client.request_text(request).await.unwrap();
    let mut counts = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with("apiserver_validating_admission_policy_check_total{"))
    {
        let label = |name: &str| {
            line.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("")
                .to_owned()
        };
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *counts
            .entry((label("policy_binding"), label("enforcement_action")))
            .or_insert(0.0) += value;
    }
    counts
}

/// The shared layout's parameter objects in `namespace`.
fn params_in(client: &kube::Client, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(PARAMS_GROUP, PARAMS_VERSION, PARAMS_KIND),
            PARAMS_PLURAL,
        ),
    )
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

    // What the new version denied where it is in force is counted by the API server under its
    // own binding's name: 3 more denials there are 3 more, and the version in force before and
    // the audit binding count apart.
    let counts_before = policy_checks(&client).await;
    for _ in 0..3 {
        assert!(!create(&cluster, &reached_ns, &elsewhere).await.admitted());
    }
    assert!(create(&cluster, &other_ns, &elsewhere).await.admitted());
    let counts_after = policy_checks(&client).await;
    let delta = |binding: &str, action: &str| {
        let key = (binding.to_owned(), action.to_owned());
        counts_after.get(&key).copied().unwrap_or(0.0)
            - counts_before.get(&key).copied().unwrap_or(0.0)
    };
    eprintln!("{version}: policy checks: {counts_after:?}");
    assert_eq!(delta(&v2, "deny"), 3.0, "{counts_after:?}");
    assert_eq!(delta(&audit, "warn"), 1.0, "{counts_after:?}");
    assert_eq!(delta(&v1, "deny"), 0.0, "{counts_after:?}");

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

/// The per-boundary layout: the version in force before stays in the boundary's object beside
/// the boundary's other policies, skipping the reached namespaces; the other policies still
/// judge there.
async fn a_stage_splits_a_boundary_in_the_per_boundary_layout(version: &str) {
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let boundary = unique_boundary("rollout");
    let reached_ns = temp_namespace(&client, Some(boundary.as_str())).await;
    let other_ns = temp_namespace(&client, Some(boundary.as_str())).await;
    let previous = policy("trusted", requires_label("team"));
    let untouched = policy("no-latest", json!({"rules": [{"disallowLatestTag": {}}]}));
    let current = policy(
        "trusted",
        json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
    );
    let reached = BTreeSet::from([name(&reached_ns)]);
    let rolling = BTreeMap::from([(
        name("trusted"),
        Rolling {
            current: &current,
            version: 2,
            reached: &reached,
        },
    )]);
    let (objects, staged) = render_boundary_staged(
        &boundary,
        &[previous.clone(), untouched.clone()],
        &rolling,
        INSTALLATION,
        &[],
    );
    assert_eq!(objects.len(), 1, "both policies in one enforce object");
    assert_eq!(staged.len(), 1);
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    let object = &objects[0].rendered;
    let side = &staged[0];
    assert_eq!(side.previous, None);
    apply(&policies, &object.policy).await;
    apply(&policies, &side.policy).await;
    apply(&bindings, &object.binding).await;
    for binding in &side.bindings {
        apply(&bindings, binding).await;
    }

    let unlabelled = pod("unlabelled", json!({}), "ghcr.io/acme/web:1.4");
    let elsewhere = pod(
        "elsewhere",
        json!({"team": "web"}),
        "docker.io/library/nginx:1.27",
    );
    let latest = pod("latest", json!({}), "ghcr.io/acme/web:latest");
    let held = boundary_object_name(&boundary, Mode::Enforce, 1);
    let v2 = version_object_name(&boundary, &name("trusted"), 2);
    let (denied_outside, _) = eventually("both versions in force", ACTIVATION_TIMEOUT, || async {
        let outside = create(&cluster, &other_ns, &unlabelled).await;
        let inside = create(&cluster, &reached_ns, &elsewhere).await;
        (!outside.admitted() && !inside.admitted()).then_some(outside)
    })
    .await;
    assert_eq!(
        denied_outside.message.as_deref(),
        Some(
            format!(
                "pods \"unlabelled\" is forbidden: ValidatingAdmissionPolicy '{held}' with binding '{held}' denied request: Policy 'trusted' (RequiredLabels) requires the label team."
            )
            .as_str()
        ),
        "{denied_outside:?}"
    );
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
    // The boundary's other policy still judges the reached namespace, from the same object.
    let denied_latest = create(&cluster, &reached_ns, &latest).await;
    let message = denied_latest.message.unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "pods \"latest\" is forbidden: ValidatingAdmissionPolicy '{held}' with binding '{held}' denied request: Policy 'no-latest' (DisallowLatestTag)"
        )),
        "{message}"
    );

    for binding in side.bindings.iter().chain([&object.binding]) {
        let binding_name = binding.metadata.name.clone().unwrap();
        bindings
            .delete(&binding_name, &DeleteParams::default())
            .await
            .unwrap();
    }
    for object in [&object.policy, &side.policy] {
        let object_name = object.metadata.name.clone().unwrap();
        policies
            .delete(&object_name, &DeleteParams::default())
            .await
            .unwrap();
    }
}

/// The shared layout: its one policy object and two bindings stay; the version in force before
/// keeps its parameters where the stage has not reached, and has none where it has; the new
/// version judges from objects of its own, as in the other layouts.
async fn a_stage_splits_a_boundary_in_the_shared_layout(version: &str) {
    const SHARED: &str = "e2e-rollout-shared";
    let (plane, admin) = connect(version).await;
    let cluster = admin.with_layout(Layout::Shared);
    let client = plane.client().await;
    let boundary = unique_boundary("rollout");
    let reached_ns = temp_namespace(&client, Some(boundary.as_str())).await;
    let other_ns = temp_namespace(&client, Some(boundary.as_str())).await;
    let previous = policy("trusted", requires_label("team"));
    let current = policy(
        "trusted",
        json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
    );
    // Version 1 in force everywhere, as the shared layout installs it.
    cluster
        .apply_policy(SHARED, &boundary, &previous)
        .await
        .unwrap();
    for namespace in [&reached_ns, &other_ns] {
        wait_enforced_in(&cluster, SHARED, &boundary, &previous, namespace).await;
    }
    let reached = BTreeSet::from([name(&reached_ns)]);
    let rolling = Rolling {
        current: &current,
        version: 2,
        reached: &reached,
    };
    for namespace in [&reached_ns, &other_ns] {
        let staged = parameters_staged(&boundary, Some(&previous), rolling, SHARED, namespace, &[]);
        let params = params_in(&client, namespace);
        match staged {
            Some(object) => {
                let object: DynamicObject = serde_json::from_value(object).unwrap();
                apply(&params, &object).await;
            }
            None => {
                let parameters = parameters_name(SHARED, &name("trusted"));
                params
                    .delete(&parameters, &DeleteParams::default())
                    .await
                    .unwrap();
            }
        }
    }
    let side = render_staged(&boundary, None, &current, 2, &reached, SHARED, &[]).unwrap();
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(client.clone());
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(client.clone());
    apply(&policies, &side.policy).await;
    for binding in &side.bindings {
        apply(&bindings, binding).await;
    }

    let unlabelled = pod("unlabelled", json!({}), "ghcr.io/acme/web:1.4");
    let elsewhere = pod(
        "elsewhere",
        json!({"team": "web"}),
        "docker.io/library/nginx:1.27",
    );
    let shared = shared_policy_name(SHARED);
    let enforce = shared_binding_name(SHARED, Mode::Enforce);
    let v2 = version_object_name(&boundary, &name("trusted"), 2);
    let audit = version_audit_binding_name(&boundary, &name("trusted"), 2);
    eventually("the new version in force", ACTIVATION_TIMEOUT, || async {
        let inside = create(&cluster, &reached_ns, &elsewhere).await;
        let outside = create(&cluster, &other_ns, &elsewhere).await;
        let admitted = create(&cluster, &reached_ns, &unlabelled).await;
        (!inside.admitted() && !outside.warnings.is_empty() && admitted.admitted()).then_some(())
    })
    .await;
    let denied_outside = create(&cluster, &other_ns, &unlabelled).await;
    assert_eq!(
        denied_outside.message.as_deref(),
        Some(
            format!(
                "pods \"unlabelled\" is forbidden: ValidatingAdmissionPolicy '{shared}' with binding '{enforce}' denied request: Policy 'trusted' (RequiredLabels) requires the label team."
            )
            .as_str()
        ),
        "{denied_outside:?}"
    );
    let warned = create(&cluster, &other_ns, &elsewhere).await;
    assert!(warned.admitted(), "{warned:?}");
    assert_eq!(
        warned.warnings,
        [format!(
            "Validation failed for ValidatingAdmissionPolicy '{v2}' with binding '{audit}': Policy 'trusted' (AllowedRegistries) denied image docker.io/library/nginx:1.27: it is not under ghcr.io/acme."
        )],
        "{warned:?}"
    );
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

    for binding in &side.bindings {
        let binding_name = binding.metadata.name.clone().unwrap();
        bindings
            .delete(&binding_name, &DeleteParams::default())
            .await
            .unwrap();
    }
    let side_name = side.policy.metadata.name.clone().unwrap();
    policies
        .delete(&side_name, &DeleteParams::default())
        .await
        .unwrap();
    cluster.remove_installation(SHARED).await.unwrap();
}
