//! The boundary-label guard and namespace labelling: only palisade's own identity may add,
//! change or remove a namespace's `palisade.dev/boundary` label; anyone else (here an
//! impersonated user with full RBAC rights on namespaces) is denied with palisade's message.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use palisade_reconciler::{ClusterClient, LabelOutcome, ReconcileError};
use palisade_testkit::control_plane::{temp_namespace, unique_name, ControlPlane};
use palisade_vap::{guard_message, guard_name};
use serde_json::json;

use crate::support::{
    admin_of, boundary_label, eventually, on_both_versions, unique_boundary, ACTIVATION_TIMEOUT,
};

on_both_versions!(
    only_palisade_may_change_the_boundary_label,
    label_namespace_creates_adopts_and_refuses
);

/// Grants `user` everything on namespaces (so only the guard can stop it).
async fn grant_namespaces(admin: &kube::Client, user: &str) {
    let role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": format!("e2e-namespaces-{user}")},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["*"]}],
    }))
    .unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("e2e-namespaces-{user}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": format!("e2e-namespaces-{user}")},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

fn namespace(name: &str, boundary: Option<&str>) -> Namespace {
    serde_json::from_value(json!({"metadata": {
        "name": name,
        "labels": boundary.map(|b| json!({"palisade.dev/boundary": b})).unwrap_or(json!({})),
    }}))
    .unwrap()
}

/// Asserts `result` is the guard's denial for namespace `ns`.
fn assert_guarded<T: std::fmt::Debug>(result: Result<T, kube::Error>, guard: &str, ns: &str) {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(
                status.message.ends_with(&format!(
                    "ValidatingAdmissionPolicy '{guard}' with binding '{guard}' denied request: {}",
                    guard_message(ns)
                )),
                "{}",
                status.message
            );
        }
        other => panic!("the guard must deny this, got {other:?}"),
    }
}

/// Merges `labels` into the labels of namespace `ns` through `api` (`null` removes one).
async fn relabel(
    api: &Api<Namespace>,
    ns: &str,
    labels: serde_json::Value,
) -> Result<Namespace, kube::Error> {
    let patch = Patch::Merge(json!({"metadata": {"labels": labels}}));
    api.patch(ns, &PatchParams::default(), &patch).await
}

async fn only_palisade_may_change_the_boundary_label(version: &str) {
    // A plane of its own: the guards other tests' palisades install on the shared plane deny
    // the user too, and the API server names one of them.
    let wanted = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start(&wanted))
        .await
        .unwrap();
    let plane = &plane;
    let cluster = admin_of(plane).await;
    let admin = plane.client().await;
    let palisade = cluster.whoami().await.unwrap();
    assert_eq!(palisade, "admin", "testenv's admin certificate is CN=admin");
    let installation = unique_name("guard");
    let guard = guard_name(&installation);
    cluster
        .install_boundary_label_guard(&installation, &palisade)
        .await
        .unwrap();
    // Re-installing changes nothing.
    let policies =
        Api::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>::all(
            admin.clone(),
        );
    let before = policies
        .get(&guard)
        .await
        .unwrap()
        .metadata
        .resource_version;
    cluster
        .install_boundary_label_guard(&installation, &palisade)
        .await
        .unwrap();
    let after = policies
        .get(&guard)
        .await
        .unwrap()
        .metadata
        .resource_version;
    assert_eq!(before, after);

    let user = unique_name("mallory");
    grant_namespaces(&admin, &user).await;
    let mallory_client = plane.impersonating_client(&user, &[]).await;
    assert_eq!(
        ClusterClient::from_client(mallory_client.clone())
            .whoami()
            .await
            .unwrap(),
        user
    );
    let mallory = Api::<Namespace>::all(mallory_client);
    let as_admin = Api::<Namespace>::all(admin.clone());
    let dry_run = PostParams {
        dry_run: true,
        field_manager: None,
    };

    // Wait until the guard acts: a labelled create by the user is denied.
    let probe_ns = unique_name("guard-probe");
    let (_, took) = eventually("the guard acts", ACTIVATION_TIMEOUT, || async {
        // 422 from the guard, not 403 from an RBAC cache that has not seen the grant yet.
        match mallory
            .create(&dry_run, &namespace(&probe_ns, Some("shop")))
            .await
        {
            Err(kube::Error::Api(status))
                if status.code == 422 && status.message.contains(&guard) =>
            {
                Some(())
            }
            _ => None,
        }
    })
    .await;
    eprintln!(
        "Kubernetes {}: the guard acted {:.1} s after it was applied",
        plane.version(),
        took.as_secs_f64()
    );

    // Adding the label at creation: denied for the user, allowed for palisade.
    let ns = unique_name("guarded");
    let guarded = |result| assert_guarded(result, &guard, &ns);
    guarded(
        mallory
            .create(&PostParams::default(), &namespace(&ns, Some("shop")))
            .await,
    );
    as_admin
        .create(&dry_run, &namespace(&ns, Some("shop")))
        .await
        .unwrap();
    // Without the label the user may create it, and change other labels freely.
    mallory
        .create(&PostParams::default(), &namespace(&ns, None))
        .await
        .unwrap();
    relabel(&mallory, &ns, json!({"team": "web"}))
        .await
        .unwrap();
    // Adding the label later: denied.
    guarded(relabel(&mallory, &ns, json!({"palisade.dev/boundary": "shop"})).await);
    // palisade adopts it.
    let shop = unique_boundary("shop");
    assert_eq!(
        cluster.label_namespace(&shop, &ns, true).await.unwrap(),
        LabelOutcome::Adopted
    );
    // Changing and removing it: denied; other labels still free.
    guarded(relabel(&mallory, &ns, json!({"palisade.dev/boundary": "other"})).await);
    guarded(relabel(&mallory, &ns, json!({"palisade.dev/boundary": null})).await);
    // A full replace (PUT) without the label is an UPDATE that removes it, too.
    let mut replaced = mallory.get(&ns).await.unwrap();
    replaced
        .metadata
        .labels
        .as_mut()
        .unwrap()
        .remove("palisade.dev/boundary");
    guarded(
        mallory
            .replace(&ns, &PostParams::default(), &replaced)
            .await,
    );
    relabel(&mallory, &ns, json!({"team": "api"}))
        .await
        .unwrap();
    let labels = as_admin.get(&ns).await.unwrap().metadata.labels.unwrap();
    assert_eq!(labels["palisade.dev/boundary"], shop.as_str());
    assert_eq!(labels["team"], "api");
    // palisade itself may change and remove it.
    relabel(
        &as_admin,
        &ns,
        json!({"palisade.dev/boundary": "elsewhere"}),
    )
    .await
    .unwrap();
    relabel(&as_admin, &ns, json!({"palisade.dev/boundary": null}))
        .await
        .unwrap();
    assert_eq!(boundary_label(&as_admin, &ns).await, None);
}

async fn label_namespace_creates_adopts_and_refuses(version: &str) {
    let (plane, cluster) = crate::support::connect(version).await;
    let admin = plane.client().await;
    let shop = unique_boundary("shop");
    let other = unique_boundary("other");
    let fresh = unique_name("fresh");
    assert_eq!(
        cluster.label_namespace(&shop, &fresh, false).await.unwrap(),
        LabelOutcome::Created
    );
    assert_eq!(
        cluster.label_namespace(&shop, &fresh, false).await.unwrap(),
        LabelOutcome::Unchanged
    );
    match cluster.label_namespace(&other, &fresh, true).await {
        Err(ReconcileError::LabelledForOtherBoundary(b)) => assert_eq!(b, shop.as_str()),
        other => panic!("expected LabelledForOtherBoundary, got {other:?}"),
    }
    let existing = temp_namespace(&admin, None).await;
    assert!(matches!(
        cluster.label_namespace(&shop, &existing, false).await,
        Err(ReconcileError::NamespaceExists(n)) if n == existing
    ));
    assert_eq!(
        cluster
            .label_namespace(&shop, &existing, true)
            .await
            .unwrap(),
        LabelOutcome::Adopted
    );
    let labels = Api::<Namespace>::all(admin)
        .get(&existing)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(labels["palisade.dev/boundary"], shop.as_str());
}
