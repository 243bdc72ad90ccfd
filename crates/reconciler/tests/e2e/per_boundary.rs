//! The per-boundary layout's life in a real API server: a boundary's policies of one mode in
//! one `ValidatingAdmissionPolicy` and binding, at most 5 policies each. Enforcement is
//! confirmed per policy inside a shared object; the denial is each policy's exact message; an
//! unchanged apply writes nothing; a change rewrites only the objects whose policies changed;
//! garbage collection goes by installation and boundary, also across a change of layout.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::Api;
use palisade_policy::{Mode, Policy};
use palisade_reconciler::{ClusterClient, EnforcementProbe, InLayout, Layout, ReconcileError};
use palisade_testkit::control_plane::temp_namespace;
use palisade_vap::boundary_object_name;
use palisade_vap::object_name;
use palisade_vap::per_boundary::POLICIES_ANNOTATION;
use serde_json::json;

use crate::support::{
    eventually, installed, on_both_versions, policy, unique_boundary, ACTIVATION_TIMEOUT,
};

on_both_versions!(the_per_boundary_layout_installs_confirms_changes_and_collects);

const INSTALLATION: &str = "e2e-per-boundary-life";
const OTHER: &str = "e2e-per-boundary-other";

/// name → (resourceVersion, policies held) of the installation's objects of `boundary`.
async fn objects<K>(
    client: &kube::Client,
    installation: &str,
    boundary: &str,
) -> BTreeMap<String, (String, String)>
where
    K: kube::Resource<Scope = k8s_openapi::ClusterResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    installed(&Api::<K>::all(client.clone()), installation, boundary)
        .await
        .into_iter()
        .map(|o| {
            let meta = o.meta();
            let held = meta
                .annotations
                .as_ref()
                .and_then(|a| a.get(POLICIES_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            (
                meta.name.clone().unwrap(),
                (meta.resource_version.clone().unwrap(), held),
            )
        })
        .collect()
}

fn held(objects: &BTreeMap<String, (String, String)>) -> BTreeMap<String, String> {
    objects
        .iter()
        .map(|(name, (_, held))| (name.clone(), held.clone()))
        .collect()
}

/// Waits until each of `policies` is confirmed enforced in `namespace` (each probe complies
/// with the others, as the controller's do).
async fn wait_all_enforced(
    cluster: &InLayout,
    boundary: &palisade_policy::Name,
    policies: &[Policy],
    namespace: &str,
) {
    for policy in policies {
        let what = format!("policy {} enforced", policy.name());
        eventually(&what, ACTIVATION_TIMEOUT, || async {
            let probe = cluster
                .probe_enforcement_among(INSTALLATION, boundary, policy, policies, namespace)
                .await
                .unwrap();
            (probe == EnforcementProbe::Enforced).then_some(())
        })
        .await;
    }
}

/// Policy `label-<n>`, requiring label `l<n>` (in enforce mode unless `audit`).
fn label_policy(n: usize, audit: bool) -> Policy {
    let mode = if audit { "audit" } else { "enforce" };
    policy(
        &format!("label-{n}"),
        json!({"mode": mode, "rules": [{"requiredLabels": {"labels": [{"key": format!("l{n}")}]}}]}),
    )
}

async fn the_per_boundary_layout_installs_confirms_changes_and_collects(version: &str) {
    let (plane, admin) = crate::support::connect(version).await;
    let cluster = admin.to(Layout::PerBoundary);
    let client = plane.client().await;
    let boundary = unique_boundary("perb");
    let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
    // 6 policies in enforce mode (5 in the first object, 1 in the second), 1 in audit mode.
    let mut policies: Vec<Policy> = (1..=6).map(|n| label_policy(n, false)).collect();
    policies.push(label_policy(7, true));

    // One policy alone is refused: its object holds others.
    assert!(matches!(
        cluster
            .apply_policy(INSTALLATION, &boundary, &policies[0])
            .await,
        Err(ReconcileError::WholeBoundary(_))
    ));
    cluster
        .apply_boundary(INSTALLATION, &boundary, &policies)
        .await
        .unwrap();
    wait_all_enforced(&cluster, &boundary, &policies, &namespace).await;
    let enforce_1 = boundary_object_name(&boundary, Mode::Enforce, 1);
    let enforce_2 = boundary_object_name(&boundary, Mode::Enforce, 2);
    let audit_1 = boundary_object_name(&boundary, Mode::Audit, 1);
    let installed =
        objects::<ValidatingAdmissionPolicy>(&client, INSTALLATION, boundary.as_str()).await;
    assert_eq!(
        held(&installed),
        BTreeMap::from([
            (audit_1.clone(), "label-7".to_owned()),
            (
                enforce_1.clone(),
                "label-1,label-2,label-3,label-4,label-5".to_owned()
            ),
            (enforce_2.clone(), "label-6".to_owned()),
        ])
    );
    let bindings =
        objects::<ValidatingAdmissionPolicyBinding>(&client, INSTALLATION, boundary.as_str()).await;
    assert_eq!(held(&bindings), held(&installed));

    // What a user sees: the object's first failed policy's exact message, naming the object;
    // the audit-mode policy's warning.
    let pod = |labels: serde_json::Value| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": labels},
            "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1"}]}})
    };
    // (The Pod complies with the second object's label-6: which of two denying objects the
    // API server reports is not specified.)
    let answer = cluster
        .dry_run_create(&namespace, &pod(json!({"l1": "x", "l6": "x"})))
        .await
        .unwrap();
    assert_eq!(
        answer.message.as_deref(),
        Some(format!(
            "pods \"web\" is forbidden: ValidatingAdmissionPolicy '{enforce_1}' with binding '{enforce_1}' denied request: \
             Policy 'label-2' (RequiredLabels) requires the label l2."
        )
        .as_str())
    );
    assert_eq!(answer.code, 422);
    let all_but_7 = json!({"l1": "x", "l2": "x", "l3": "x", "l4": "x", "l5": "x", "l6": "x"});
    let answer = cluster
        .dry_run_create(&namespace, &pod(all_but_7.clone()))
        .await
        .unwrap();
    assert!(answer.admitted(), "{answer:?}");
    assert_eq!(
        answer.warnings,
        vec![format!(
            "Validation failed for ValidatingAdmissionPolicy '{audit_1}' with binding '{audit_1}': \
             Policy 'label-7' (RequiredLabels) requires the label l7."
        )]
    );

    // An unchanged apply writes nothing.
    cluster
        .apply_boundary(INSTALLATION, &boundary, &policies)
        .await
        .unwrap();
    assert_eq!(
        objects::<ValidatingAdmissionPolicy>(&client, INSTALLATION, boundary.as_str()).await,
        installed
    );

    // A change rewrites the object holding the policy and no other.
    policies[5] = policy(
        "label-6",
        json!({"rules": [{"requiredLabels": {"labels": [{"key": "l6"}, {"key": "team"}]}}]}),
    );
    cluster
        .apply_boundary(INSTALLATION, &boundary, &policies)
        .await
        .unwrap();
    let changed =
        objects::<ValidatingAdmissionPolicy>(&client, INSTALLATION, boundary.as_str()).await;
    for (name, (version, _)) in &changed {
        assert_eq!(
            installed[name].0 != *version,
            *name == enforce_2,
            "only {enforce_2} changes: {name}"
        );
    }
    wait_all_enforced(&cluster, &boundary, &policies, &namespace).await;

    // A policy removed from the first object: the others move up, the second object goes.
    policies.remove(0);
    cluster
        .apply_boundary(INSTALLATION, &boundary, &policies)
        .await
        .unwrap();
    let keep: Vec<_> = policies.iter().map(|p| p.name().clone()).collect();
    cluster
        .garbage_collect(INSTALLATION, &boundary, &keep)
        .await
        .unwrap();
    assert_eq!(
        held(&objects::<ValidatingAdmissionPolicy>(&client, INSTALLATION, boundary.as_str()).await),
        BTreeMap::from([
            (audit_1.clone(), "label-7".to_owned()),
            (
                enforce_1.clone(),
                "label-2,label-3,label-4,label-5,label-6".to_owned()
            ),
        ])
    );
    assert_eq!(
        held(
            &objects::<ValidatingAdmissionPolicyBinding>(&client, INSTALLATION, boundary.as_str())
                .await
        )
        .len(),
        2
    );
    wait_all_enforced(&cluster, &boundary, &policies, &namespace).await;

    // Garbage collection of a policy an object holds removes that object (the next apply
    // writes the others again).
    cluster
        .garbage_collect(INSTALLATION, &boundary, &keep[..5])
        .await
        .unwrap();
    assert_eq!(
        held(&objects::<ValidatingAdmissionPolicy>(&client, INSTALLATION, boundary.as_str()).await)
            .into_keys()
            .collect::<Vec<_>>(),
        vec![enforce_1.clone()]
    );

    // Objects of the per-policy layout left from before go at this layout's collection, and
    // per-boundary objects at the per-policy layout's.
    let single = &policies[0];
    admin
        .apply_policy(INSTALLATION, &boundary, single)
        .await
        .unwrap();
    let old = object_name(&boundary, single.name());
    let policy_api = Api::<ValidatingAdmissionPolicy>::all(client.clone());
    assert!(policy_api.get_opt(&old).await.unwrap().is_some());
    cluster
        .garbage_collect(INSTALLATION, &boundary, &keep)
        .await
        .unwrap();
    assert!(policy_api.get_opt(&old).await.unwrap().is_none());
    admin
        .garbage_collect(INSTALLATION, &boundary, &keep)
        .await
        .unwrap();
    assert!(
        objects::<ValidatingAdmissionPolicy>(&client, INSTALLATION, boundary.as_str())
            .await
            .is_empty()
    );

    // Objects of another installation under the same name are never taken over; removing an
    // installation removes its objects, not another's.
    let other = ClusterClient::from_client(client.clone()).with_layout(Layout::PerBoundary);
    other
        .apply_boundary(OTHER, &boundary, &policies[..1])
        .await
        .unwrap();
    assert!(matches!(
        cluster
            .apply_boundary(INSTALLATION, &boundary, &policies[..1])
            .await,
        Err(ReconcileError::OtherInstallation { .. })
    ));
    cluster.remove_installation(INSTALLATION).await.unwrap();
    assert_eq!(
        objects::<ValidatingAdmissionPolicy>(&client, OTHER, boundary.as_str())
            .await
            .len(),
        1
    );
    other.remove_installation(OTHER).await.unwrap();
    assert!(
        objects::<ValidatingAdmissionPolicy>(&client, OTHER, boundary.as_str())
            .await
            .is_empty()
    );
}

on_both_versions!(a_switch_of_layout_is_confirmed_only_by_the_new_layouts_switch_binding);

/// While a boundary's policy is in the per-policy layout AND the per-boundary one, a probe
/// is denied with the policy's message whichever object the API server reports; only the
/// per-boundary object's switch binding's warning confirms the new layout at work. Without
/// it, every probe says the earlier layout enforces (so the controller keeps its objects).
async fn a_switch_of_layout_is_confirmed_only_by_the_new_layouts_switch_binding(version: &str) {
    const SWITCHING: &str = "e2e-switch-probe";
    let (plane, admin) = crate::support::connect(version).await;
    let old = admin.to(Layout::PerPolicy);
    let new = admin.to(Layout::PerBoundary);
    let client = plane.client().await;
    let boundary = unique_boundary("switch");
    let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
    let policies = vec![label_policy(1, false)];
    let policy = &policies[0];

    old.apply_boundary(SWITCHING, &boundary, &policies)
        .await
        .unwrap();
    eventually(
        "the per-policy object enforcing",
        ACTIVATION_TIMEOUT,
        || async {
            let probe = old
                .probe_enforcement_among(SWITCHING, &boundary, policy, &policies, &namespace)
                .await
                .unwrap();
            (probe == EnforcementProbe::Enforced).then_some(())
        },
    )
    .await;
    new.apply_boundary(SWITCHING, &boundary, &policies)
        .await
        .unwrap();
    let new_object = boundary_object_name(&boundary, Mode::Enforce, 1);
    eventually(
        "the per-boundary object present",
        ACTIVATION_TIMEOUT,
        || async {
            Api::<ValidatingAdmissionPolicy>::all(client.clone())
                .get_opt(&new_object)
                .await
                .unwrap()
                .map(|_| ())
        },
    )
    .await;
    // Both deny; without the switch binding nothing proves the new object at work.
    for _ in 0..10 {
        let probe = new
            .probe_during_switch(SWITCHING, &boundary, policy, &policies, &namespace)
            .await
            .unwrap();
        assert_eq!(probe, EnforcementProbe::EnforcedByEarlierLayout);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    new.apply_switch_bindings(SWITCHING, &boundary, &policies)
        .await
        .unwrap();
    eventually("the new layout confirmed", ACTIVATION_TIMEOUT, || async {
        let probe = new
            .probe_during_switch(SWITCHING, &boundary, policy, &policies, &namespace)
            .await
            .unwrap();
        (probe == EnforcementProbe::Enforced).then_some(())
    })
    .await;
    // Done: the earlier layout's objects and the switch binding go; the new object stays.
    new.garbage_collect(SWITCHING, &boundary, &[policy.name().clone()])
        .await
        .unwrap();
    let left =
        objects::<ValidatingAdmissionPolicyBinding>(&client, SWITCHING, boundary.as_str()).await;
    assert_eq!(
        left.keys().cloned().collect::<Vec<_>>(),
        vec![new_object.clone()]
    );
    new.garbage_collect(SWITCHING, &boundary, &[])
        .await
        .unwrap();
}
