//! The shared layout's life in a real API server: one policy and two bindings per
//! installation, each policy's rules in a `BoundaryPolicy` per namespace of its boundary.
//! Enforcement is confirmed per policy; a change writes parameters only (the policy object,
//! and so what the API server compiles, stays the same); an unchanged apply writes nothing;
//! garbage collection goes by installation and boundary, also across a change of layout.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::Api;
use palisade_reconciler::{ClusterClient, Layout};
use palisade_testkit::control_plane::temp_namespace;
use palisade_vap::object_name;
use palisade_vap::shared::{
    shared_binding_name, shared_policy_name, PARAMS_GROUP, PARAMS_KIND, PARAMS_PLURAL,
    PARAMS_VERSION,
};
use serde_json::json;

use crate::support::{
    eventually, installed, no_latest, on_both_versions, policy, unique_boundary, wait_enforced_in,
};

on_both_versions!(the_shared_layout_installs_confirms_changes_and_collects);

const INSTALLATION: &str = "e2e-shared-life";
const OTHER: &str = "e2e-shared-other";

fn params_api(client: &kube::Client) -> Api<DynamicObject> {
    Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(PARAMS_GROUP, PARAMS_VERSION, PARAMS_KIND),
            PARAMS_PLURAL,
        ),
    )
}

/// `namespace/name` → resourceVersion of the installation's parameters of `boundary`.
async fn parameters(
    client: &kube::Client,
    installation: &str,
    boundary: &str,
) -> BTreeMap<String, String> {
    installed(&params_api(client), installation, boundary)
        .await
        .into_iter()
        .map(|o| {
            (
                format!(
                    "{}/{}",
                    o.metadata.namespace.unwrap(),
                    o.metadata.name.unwrap()
                ),
                o.metadata.resource_version.unwrap(),
            )
        })
        .collect()
}

/// The names of the objects `params` selects.
async fn names<K>(api: &Api<K>, params: &ListParams) -> Vec<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api.list(params).await.unwrap();
    list.items
        .into_iter()
        .filter_map(|o| o.meta().name.clone())
        .collect()
}

async fn resource_version<K>(api: &Api<K>, name: &str) -> Option<String>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name)
        .await
        .unwrap()
        .and_then(|o| o.meta().resource_version.clone())
}

async fn the_shared_layout_installs_confirms_changes_and_collects(version: &str) {
    let (plane, admin) = crate::support::connect(version).await;
    let cluster = admin.to(Layout::Shared);
    let client = plane.client().await;
    let boundary = unique_boundary("shared");
    let first = temp_namespace(&client, Some(boundary.as_str())).await;
    let second = temp_namespace(&client, Some(boundary.as_str())).await;
    let no_latest = policy("no-latest", no_latest());
    let watch = policy(
        "watch",
        json!({"mode": "audit", "rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
    );
    for p in [&no_latest, &watch] {
        cluster
            .apply_policy(INSTALLATION, &boundary, p)
            .await
            .unwrap();
    }
    for namespace in [&first, &second] {
        wait_enforced_in(&cluster, INSTALLATION, &boundary, &no_latest, namespace).await;
        wait_enforced_in(&cluster, INSTALLATION, &boundary, &watch, namespace).await;
    }

    // The objects: one policy, two bindings, a parameter object per policy and namespace.
    let policies = Api::<ValidatingAdmissionPolicy>::all(client.clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone());
    let ours = ListParams::default().labels(&format!("palisade.dev/installation={INSTALLATION}"));
    assert_eq!(
        names(&policies, &ours).await,
        vec![shared_policy_name(INSTALLATION)]
    );
    assert_eq!(
        names(&bindings, &ours).await,
        vec![
            format!("{INSTALLATION}.audit.palisade.dev"),
            format!("{INSTALLATION}.enforce.palisade.dev"),
        ]
    );
    let installed = parameters(&client, INSTALLATION, boundary.as_str()).await;
    let expected: Vec<String> = [&first, &second]
        .iter()
        .flat_map(|ns| {
            [
                format!("{ns}/no-latest.{INSTALLATION}"),
                format!("{ns}/watch.{INSTALLATION}"),
            ]
        })
        .collect();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(
        installed.keys().cloned().collect::<Vec<_>>(),
        expected_sorted
    );

    // What a user sees: the exact message, naming the shared policy and the enforce binding.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "nginx:latest"}]}});
    let answer = cluster.dry_run_create(&second, &pod).await.unwrap();
    assert_eq!(
        answer.message.as_deref(),
        Some(format!(
            "pods \"web\" is forbidden: ValidatingAdmissionPolicy '{}' with binding '{}' denied request: \
             Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag.",
            shared_policy_name(INSTALLATION),
            shared_binding_name(INSTALLATION, palisade_policy::Mode::Enforce)
        )
        .as_str())
    );
    assert_eq!(answer.code, 422);

    // An unchanged apply writes nothing.
    let policy_version = resource_version(&policies, &shared_policy_name(INSTALLATION)).await;
    cluster.install_shared(INSTALLATION).await.unwrap();
    for p in [&no_latest, &watch] {
        cluster
            .apply_policy(INSTALLATION, &boundary, p)
            .await
            .unwrap();
    }
    assert_eq!(
        parameters(&client, INSTALLATION, boundary.as_str()).await,
        installed
    );
    assert_eq!(
        resource_version(&policies, &shared_policy_name(INSTALLATION)).await,
        policy_version
    );

    // A change writes the policy's parameters only: the compiled policy object is unchanged.
    let stricter = policy(
        "no-latest",
        json!({"rules": [{"disallowLatestTag": {}}, {"requiredLabels": {"labels": [{"key": "team"}]}}]}),
    );
    cluster
        .apply_policy(INSTALLATION, &boundary, &stricter)
        .await
        .unwrap();
    let changed = parameters(&client, INSTALLATION, boundary.as_str()).await;
    for (key, version) in &changed {
        assert_eq!(
            installed[key] != *version,
            key.contains("/no-latest."),
            "only no-latest's parameters change: {key}"
        );
    }
    assert_eq!(
        resource_version(&policies, &shared_policy_name(INSTALLATION)).await,
        policy_version
    );
    let labelled_ok = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1"}]}});
    eventually(
        "the changed policy denies",
        Duration::from_secs(30),
        || async {
            let answer = cluster.dry_run_create(&first, &labelled_ok).await.unwrap();
            (answer.denial_message()
                == Some("Policy 'no-latest' (RequiredLabels) requires the label team."))
            .then_some(())
        },
    )
    .await;

    // A namespace that leaves the boundary loses its parameters; a deleted policy its own.
    let parameter_names = || async {
        parameters(&client, INSTALLATION, boundary.as_str())
            .await
            .into_keys()
            .collect::<Vec<_>>()
    };
    cluster.release_namespace(&boundary, &second).await.unwrap();
    let keep = [stricter.name().clone(), watch.name().clone()];
    cluster
        .garbage_collect(INSTALLATION, &boundary, &keep)
        .await
        .unwrap();
    assert_eq!(
        parameter_names().await,
        vec![
            format!("{first}/no-latest.{INSTALLATION}"),
            format!("{first}/watch.{INSTALLATION}"),
        ]
    );
    cluster
        .garbage_collect(INSTALLATION, &boundary, &keep[..1])
        .await
        .unwrap();
    assert_eq!(
        parameter_names().await,
        vec![format!("{first}/no-latest.{INSTALLATION}")]
    );

    // Objects of the per-policy layout left from before go at the shared layout's collection.
    admin
        .apply_policy(INSTALLATION, &boundary, &stricter)
        .await
        .unwrap();
    let old = object_name(&boundary, stricter.name());
    assert!(resource_version(&policies, &old).await.is_some());
    cluster
        .garbage_collect(INSTALLATION, &boundary, &keep[..1])
        .await
        .unwrap();
    assert_eq!(resource_version(&policies, &old).await, None);
    assert_eq!(resource_version(&bindings, &old).await, None);
    assert!(cluster
        .installed_boundaries(INSTALLATION)
        .await
        .unwrap()
        .contains(boundary.as_str()));

    // Removing the installation removes its shared objects and parameters, not another's.
    let other = ClusterClient::from_client(client.clone()).with_layout(Layout::Shared);
    other
        .apply_policy(OTHER, &boundary, &stricter)
        .await
        .unwrap();
    cluster.remove_installation(INSTALLATION).await.unwrap();
    assert!(parameters(&client, INSTALLATION, boundary.as_str())
        .await
        .is_empty());
    assert_eq!(
        resource_version(&policies, &shared_policy_name(INSTALLATION)).await,
        None
    );
    for mode in [palisade_policy::Mode::Enforce, palisade_policy::Mode::Audit] {
        assert_eq!(
            resource_version(&bindings, &shared_binding_name(INSTALLATION, mode)).await,
            None
        );
    }
    assert_eq!(parameters(&client, OTHER, boundary.as_str()).await.len(), 1);
    assert!(resource_version(&policies, &shared_policy_name(OTHER))
        .await
        .is_some());
    other.remove_installation(OTHER).await.unwrap();
    assert!(parameters(&client, OTHER, boundary.as_str())
        .await
        .is_empty());
}
