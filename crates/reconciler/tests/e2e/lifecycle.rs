//! Installing, re-applying, deleting and garbage-collecting a policy's objects; what the
//! installed policy does to objects that predate it, to terminating objects, in audit mode,
//! and when its expression cannot be evaluated.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use palisade_policy::Name;
use palisade_reconciler::answer::policy_warning;
use palisade_reconciler::probe::{ADMITTED_VIOLATING, NOT_WARNED};
use palisade_reconciler::{EnforcementProbe, InLayout, ReconcileError};
use palisade_testkit::control_plane::temp_namespace;
use palisade_vap::object_name;
use serde_json::json;

use crate::support::{
    apply_enforced, connect, name, no_latest, on_both_versions, policy, unique_boundary, wait_gone,
    ACTIVATION_TIMEOUT, INSTALLATION,
};

on_both_versions!(
    apply_is_idempotent_and_removes_what_has_no_admission_rules,
    delete_and_garbage_collection_touch_only_this_installation_and_boundary,
    probe_enforcement_confirms_enforce_and_audit,
    updates_of_older_objects_are_denied_and_finalizers_can_be_removed,
    audit_mode_admits_with_a_warning,
    an_evaluation_error_rejects_the_object,
);

async fn resource_versions(cluster: &InLayout, object: &str) -> (Option<String>, Option<String>) {
    let policies = Api::<ValidatingAdmissionPolicy>::all(cluster.client().clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(cluster.client().clone());
    (
        policies
            .get_opt(object)
            .await
            .unwrap()
            .and_then(|p| p.metadata.resource_version),
        bindings
            .get_opt(object)
            .await
            .unwrap()
            .and_then(|b| b.metadata.resource_version),
    )
}

async fn apply_is_idempotent_and_removes_what_has_no_admission_rules(version: &str) {
    let (_, cluster) = connect(version).await;
    let boundary = unique_boundary("idem");
    let full = policy(
        "size-limits",
        json!({"rules": [
            {"allowedComputePlans": {"plans": ["small"]}},
            {"requiredLabels": {"labels": [{"key": "team", "value": "web"}]}},
            {"allowedRegistries": {"registries": ["ghcr.io/acme"]}},
            {"disallowLatestTag": {}}
        ]}),
    );
    let object = object_name(&boundary, full.name());
    cluster
        .apply_policy(INSTALLATION, &boundary, &full)
        .await
        .unwrap();
    let first = resource_versions(&cluster, &object).await;
    assert!(first.0.is_some() && first.1.is_some(), "{first:?}");
    cluster
        .apply_policy(INSTALLATION, &boundary, &full)
        .await
        .unwrap();
    assert_eq!(
        resource_versions(&cluster, &object).await,
        first,
        "a second apply must not change the objects"
    );
    let installed = Api::<ValidatingAdmissionPolicy>::all(cluster.client().clone())
        .get(&object)
        .await
        .unwrap();
    let labels = installed.metadata.labels.unwrap();
    assert_eq!(
        labels,
        BTreeMap::from([
            (
                "app.kubernetes.io/managed-by".to_owned(),
                "palisade".to_owned()
            ),
            ("palisade.dev/boundary".to_owned(), boundary.to_string()),
            (
                "palisade.dev/installation".to_owned(),
                INSTALLATION.to_owned()
            ),
            ("palisade.dev/policy".to_owned(), "size-limits".to_owned()),
        ])
    );
    let managers: Vec<String> = installed
        .metadata
        .managed_fields
        .unwrap_or_default()
        .into_iter()
        .filter_map(|m| m.manager)
        .collect();
    assert_eq!(managers, ["palisade"], "one field manager");

    // The same policy with only a compute-plan rule installs nothing: its objects go.
    let plans_only = policy(
        "size-limits",
        json!({"rules": [{"allowedComputePlans": {"plans": ["small"]}}]}),
    );
    cluster
        .apply_policy(INSTALLATION, &boundary, &plans_only)
        .await
        .unwrap();
    assert_eq!(resource_versions(&cluster, &object).await, (None, None));
    cluster
        .apply_policy(INSTALLATION, &boundary, &plans_only)
        .await
        .unwrap();
}

/// A look-alike pair of objects: applied as installation `installation`.
async fn install_as(cluster: &InLayout, installation: &str, boundary: &Name, policy_name: &str) {
    let p = policy(policy_name, no_latest());
    cluster
        .apply_policy(installation, boundary, &p)
        .await
        .unwrap();
}

async fn delete_and_garbage_collection_touch_only_this_installation_and_boundary(version: &str) {
    let (_, cluster) = connect(version).await;
    let boundary = unique_boundary("gc");
    let neighbour = unique_boundary("gc-neighbour");
    for p in ["keep", "stale-a", "stale-b"] {
        install_as(&cluster, INSTALLATION, &boundary, p).await;
    }
    install_as(&cluster, "another-installation", &boundary, "theirs").await;
    install_as(&cluster, INSTALLATION, &neighbour, "stale-a").await;
    // Labelled like ours but without the managed-by label: not palisade's.
    let foreign = object_name(&boundary, &name("foreign"));
    let labels = json!({
        "palisade.dev/installation": INSTALLATION,
        "palisade.dev/boundary": boundary.as_str(),
        "palisade.dev/policy": "foreign",
    });
    let foreign_policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "metadata": {"name": foreign, "labels": labels},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"],
                     "operations": ["CREATE"], "resources": ["configmaps"]}]},
                 "validations": [{"expression": "true"}]},
    }))
    .unwrap();
    Api::<ValidatingAdmissionPolicy>::all(cluster.client().clone())
        .create(&PostParams::default(), &foreign_policy)
        .await
        .unwrap();

    let mut deleted = cluster
        .garbage_collect(INSTALLATION, &boundary, &[name("keep")])
        .await
        .unwrap();
    deleted.sort();
    assert_eq!(
        deleted,
        [
            object_name(&boundary, &name("stale-a")),
            object_name(&boundary, &name("stale-b"))
        ]
    );
    let exists = |object: String| {
        let cluster = cluster.clone();
        async move { resource_versions(&cluster, &object).await }
    };
    for (object, present) in [
        (object_name(&boundary, &name("keep")), true),
        (object_name(&boundary, &name("stale-a")), false),
        (object_name(&boundary, &name("stale-b")), false),
        (object_name(&boundary, &name("theirs")), true),
        (object_name(&neighbour, &name("stale-a")), true),
    ] {
        let (p, b) = exists(object.clone()).await;
        assert_eq!((p.is_some(), b.is_some()), (present, present), "{object}");
    }
    assert!(
        exists(foreign.clone()).await.0.is_some(),
        "the unlabelled look-alike survives"
    );

    // apply_policy never takes over another installation's objects.
    let theirs = object_name(&boundary, &name("theirs"));
    let before = exists(theirs.clone()).await;
    match cluster
        .apply_policy(INSTALLATION, &boundary, &policy("theirs", no_latest()))
        .await
    {
        Err(ReconcileError::OtherInstallation {
            name: n,
            installation,
        }) => {
            assert_eq!(
                (n.as_str(), installation.as_str()),
                (theirs.as_str(), "another-installation")
            );
        }
        other => panic!("expected OtherInstallation, got {other:?}"),
    }
    assert_eq!(exists(theirs).await, before);

    // delete_policy: never another installation's objects, nor unlabelled ones; absent is fine.
    cluster
        .delete_policy(INSTALLATION, &boundary, &name("theirs"))
        .await
        .unwrap();
    assert!(exists(object_name(&boundary, &name("theirs")))
        .await
        .0
        .is_some());
    cluster
        .delete_policy(INSTALLATION, &boundary, &name("foreign"))
        .await
        .unwrap();
    assert!(exists(foreign.clone()).await.0.is_some());
    cluster
        .delete_policy(INSTALLATION, &boundary, &name("keep"))
        .await
        .unwrap();
    assert_eq!(
        exists(object_name(&boundary, &name("keep"))).await,
        (None, None)
    );
    cluster
        .delete_policy(INSTALLATION, &boundary, &name("keep"))
        .await
        .unwrap();
    // An empty keep list removes the rest of ours, and only ours.
    let deleted = cluster
        .garbage_collect(INSTALLATION, &boundary, &[])
        .await
        .unwrap();
    assert!(deleted.is_empty(), "{deleted:?}");
    let deleted = cluster
        .garbage_collect("another-installation", &boundary, &[])
        .await
        .unwrap();
    assert_eq!(deleted, [object_name(&boundary, &name("theirs"))]);
    assert!(exists(foreign).await.0.is_some());
    assert!(cluster
        .garbage_collect("not a label value!", &boundary, &[])
        .await
        .is_err());
}

async fn probe_enforcement_confirms_enforce_and_audit(version: &str) {
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let boundary = unique_boundary("probe");
    let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
    let unlabelled = temp_namespace(&client, None).await;
    let enforce = policy(
        "labels",
        json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}, {"disallowLatestTag": {}}]}),
    );
    let audit = policy(
        "watch",
        json!({"mode": "audit", "rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
    );
    // Not installed yet.
    let probe = cluster
        .probe_enforcement(INSTALLATION, &boundary, &enforce, &namespace)
        .await
        .unwrap();
    assert!(
        matches!(&probe, EnforcementProbe::NotEnforced(r) if r.contains("is not installed")),
        "{probe:?}"
    );
    let took = apply_enforced(&cluster, &boundary, &enforce, &namespace).await;
    eprintln!(
        "Kubernetes {}: a new policy was enforced {:.1} s after it was applied",
        plane.version(),
        took.as_secs_f64()
    );
    // A namespace outside the boundary admits the violating Pod.
    assert_eq!(
        cluster
            .probe_enforcement(INSTALLATION, &boundary, &enforce, &unlabelled)
            .await
            .unwrap(),
        EnforcementProbe::NotEnforced(ADMITTED_VIOLATING.to_owned())
    );
    // Audit mode: enforced means admitted with the policy's warning.
    let audit_boundary = unique_boundary("probe-audit");
    let audit_namespace = temp_namespace(&client, Some(audit_boundary.as_str())).await;
    apply_enforced(&cluster, &audit_boundary, &audit, &audit_namespace).await;
    assert_eq!(
        cluster
            .probe_enforcement(INSTALLATION, &audit_boundary, &audit, &unlabelled)
            .await
            .unwrap(),
        EnforcementProbe::NotEnforced(NOT_WARNED.to_owned())
    );
    // A policy without admission rules cannot be probed.
    let plans = policy(
        "plans",
        json!({"rules": [{"allowedComputePlans": {"plans": ["small"]}}]}),
    );
    assert!(cluster
        .probe_enforcement(INSTALLATION, &boundary, &plans, &namespace)
        .await
        .is_err());
}

fn latest_pod(pod_name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": pod_name, "labels": {"team": "web"}, "finalizers": ["palisade.dev/e2e-test"]},
        "spec": {"containers": [{"name": "app", "image": "nginx:latest"}]},
    }))
    .unwrap()
}

async fn updates_of_older_objects_are_denied_and_finalizers_can_be_removed(version: &str) {
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let boundary = unique_boundary("older");
    let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace);
    // Stored before the policy exists.
    pods.create(&PostParams::default(), &latest_pod("web"))
        .await
        .unwrap();
    let no_latest = policy("no-latest", no_latest());
    apply_enforced(&cluster, &boundary, &no_latest, &namespace).await;
    let vap = object_name(&boundary, no_latest.name());
    let message = "Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag.";

    // Stored objects are not re-checked; the next user UPDATE is.
    assert!(pods.get_opt("web").await.unwrap().is_some());
    let update = pods
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"touched": "yes"}}})),
        )
        .await;
    match update {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert_eq!(
                status.message,
                format!("pods \"web\" is forbidden: ValidatingAdmissionPolicy '{vap}' with binding '{vap}' denied request: {message}")
            );
        }
        other => panic!("the UPDATE must be denied, got {other:?}"),
    }

    // Deleting it leaves it terminating (finalizer); removing the finalizer is an UPDATE of a
    // terminating object: not checked, so it passes and the Pod goes.
    pods.delete("web", &DeleteParams::default()).await.unwrap();
    let terminating = pods.get("web").await.unwrap();
    assert!(terminating.metadata.deletion_timestamp.is_some());
    pods.patch(
        "web",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_gone("the Pod is gone", ACTIVATION_TIMEOUT, &pods, "web").await;
}

async fn audit_mode_admits_with_a_warning(version: &str) {
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let boundary = unique_boundary("audit");
    let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
    let watch = policy(
        "watch",
        json!({"mode": "audit", "rules": [{"requiredLabels": {"labels": [{"key": "team", "value": "web"}]}}]}),
    );
    apply_enforced(&cluster, &boundary, &watch, &namespace).await;
    let vap = object_name(&boundary, watch.name());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"team": "api"}},
        "spec": {"containers": [{"name": "app", "image": "ghcr.io/acme/web:1.4"}]}});
    let answer = cluster.dry_run_create(&namespace, &pod).await.unwrap();
    assert_eq!(answer.code, 201, "{answer:?}");
    assert_eq!(
        answer.warnings,
        [policy_warning(
            &vap,
            &vap,
            "Policy 'watch' (RequiredLabels) requires label team=web, found api"
        )]
    );
    // A real create too: stored, with the same warning.
    let stored = cluster
        .client()
        .request_text(
            kube::core::Request::new(format!("/api/v1/namespaces/{namespace}/pods"))
                .create(&PostParams::default(), serde_json::to_vec(&pod).unwrap())
                .unwrap(),
        )
        .await;
    assert!(stored.is_ok(), "{stored:?}");
    assert!(Api::<Pod>::namespaced(client, &namespace)
        .get_opt("web")
        .await
        .unwrap()
        .is_some());
}

/// 64 registry prefixes of 250 characters; images under the last one must be compared with all
/// of them, so enough containers exceed the per-expression CEL cost limit at run time.
fn costly_registries() -> Vec<String> {
    let long = "a".repeat(225);
    (0..64)
        .map(|i| format!("registry.example.com/{long}/p{i:02}"))
        .collect()
}

fn costly_pod(containers: usize) -> serde_json::Value {
    let last = costly_registries().pop().unwrap();
    let containers: Vec<_> = (0..containers)
        .map(|i| json!({"name": format!("c{i}"), "image": format!("{last}/img:1")}))
        .collect();
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "costly"},
           "spec": {"containers": containers}})
}

async fn an_evaluation_error_rejects_the_object(version: &str) {
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let unlabelled = temp_namespace(&client, None).await;
    let mut results = Vec::new();
    for mode in ["enforce", "audit"] {
        let boundary = unique_boundary("costly");
        let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
        let costly = policy(
            "costly",
            json!({"mode": mode, "rules": [{"allowedRegistries": {"registries": costly_registries()}}]}),
        );
        apply_enforced(&cluster, &boundary, &costly, &namespace).await;
        let vap = object_name(&boundary, costly.name());
        // A few containers are compliant and admitted: the expression works.
        let small = cluster
            .dry_run_create(&namespace, &costly_pod(3))
            .await
            .unwrap();
        assert!(small.admitted() && small.warnings.is_empty(), "{small:?}");
        let pod = costly_pod(1000);
        let answer = cluster.dry_run_create(&namespace, &pod).await.unwrap();
        let outside = cluster.dry_run_create(&unlabelled, &pod).await.unwrap();
        assert!(outside.admitted(), "the Pod itself is valid: {outside:?}");
        match mode {
            // failurePolicy: Fail, so an expression that fails denies.
            "enforce" => {
                assert_eq!(answer.code, 422, "{answer:?}");
                assert_eq!(answer.denying_policy(), Some(vap.as_str()), "{answer:?}");
                let message = answer.denial_message().unwrap();
                // `expression '<the whole expression>' resulted in error: <why>`
                let (_, why) = message.rsplit_once("resulted in error: ").unwrap();
                assert!(why.contains("cost"), "{why}");
                results.push(format!(
                    "denied, {} bytes: expression '...' resulted in error: {why}",
                    message.len()
                ));
            }
            // Audit mode: the evaluation error only warns (Kubernetes' behaviour, SPEC 3.4).
            _ => {
                assert!(answer.admitted(), "{answer:?}");
                let prefix = format!("Validation failed for ValidatingAdmissionPolicy '{vap}' with binding '{vap}': ");
                assert!(
                    answer
                        .warnings
                        .iter()
                        .any(|w| w.starts_with(&prefix) && w.contains("cost")),
                    "{answer:?}"
                );
            }
        }
    }
    eprintln!(
        "Kubernetes {}: an evaluation error: {}",
        plane.version(),
        results.join(" | ")
    );
}
