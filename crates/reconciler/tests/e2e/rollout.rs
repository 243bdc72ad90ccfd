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
use palisade_policy::{Mode, Name, Policy};
use palisade_reconciler::{AdmissionAnswer, ClusterClient, InLayout};
use palisade_testkit::control_plane::temp_namespace;
use palisade_vap::per_boundary::{render_boundary_staged, Rolling};
use palisade_vap::per_policy::{
    render_staged, version_audit_binding_name, version_object_name, Staged,
};
use palisade_vap::shared::{
    parameters_name, parameters_staged, shared_binding_name, shared_policy_name, PARAMS_GROUP,
    PARAMS_KIND, PARAMS_PLURAL, PARAMS_VERSION,
};
use palisade_vap::{boundary_object_name, object_name, Layout, FIELD_MANAGER};
use serde_json::{json, Value};

use crate::support::{
    apiserver_counter, connect, eventually, name, on_both_versions, policy, requires_label,
    unique_boundary, wait_enforced_in, ACTIVATION_TIMEOUT,
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

/// A boundary with two namespaces, the first of them reached by the stage, and the two
/// versions: version 1 requires a label; version 2, being rolled out, allows one registry.
struct Setting {
    cluster: InLayout,
    client: kube::Client,
    boundary: Name,
    reached_ns: String,
    other_ns: String,
    previous: Policy,
    current: Policy,
    reached: BTreeSet<Name>,
}

impl Setting {
    async fn new(version: &str, layout: Layout) -> Self {
        let (plane, admin) = connect(version).await;
        let client = plane.client().await;
        let boundary = unique_boundary("rollout");
        let reached_ns = temp_namespace(&client, Some(boundary.as_str())).await;
        let other_ns = temp_namespace(&client, Some(boundary.as_str())).await;
        let reached = BTreeSet::from([name(&reached_ns)]);
        Setting {
            cluster: admin.to(layout),
            client,
            boundary,
            reached_ns,
            other_ns,
            previous: policy("trusted", requires_label("team")),
            current: policy(
                "trusted",
                json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}}]}),
            ),
            reached,
        }
    }

    fn policies(&self) -> Api<ValidatingAdmissionPolicy> {
        Api::all(self.client.clone())
    }

    fn bindings(&self) -> Api<ValidatingAdmissionPolicyBinding> {
        Api::all(self.client.clone())
    }

    /// Writes `objects` and `bindings`.
    async fn write(
        &self,
        objects: &[&ValidatingAdmissionPolicy],
        bindings: &[&ValidatingAdmissionPolicyBinding],
    ) {
        for object in objects {
            apply(&self.policies(), *object).await;
        }
        for binding in bindings {
            apply(&self.bindings(), *binding).await;
        }
    }

    /// Deletes `bindings`, then `objects`.
    async fn remove(
        &self,
        objects: &[&ValidatingAdmissionPolicy],
        bindings: &[&ValidatingAdmissionPolicyBinding],
    ) {
        for binding in bindings {
            let binding_name = binding.metadata.name.clone().unwrap();
            self.bindings()
                .delete(&binding_name, &DeleteParams::default())
                .await
                .unwrap();
        }
        for object in objects {
            let object_name = object.metadata.name.clone().unwrap();
            self.policies()
                .delete(&object_name, &DeleteParams::default())
                .await
                .unwrap();
        }
    }

    /// What the API server answers in both namespaces once the stage's objects are loaded:
    /// outside the stage, version 1's denial through `before` (its policy object and binding)
    /// and version 2's warning through its audit binding; inside, version 2's denial through
    /// its own objects and version 1 silent. Then what version 2 denied inside is counted under
    /// its binding alone.
    async fn judges_by_stage(&self, before: (&str, &str)) {
        let (cluster, reached_ns, other_ns) = (&self.cluster, &self.reached_ns, &self.other_ns);
        let unlabelled = pod("unlabelled", json!({}), "ghcr.io/acme/web:1.4");
        let elsewhere = pod(
            "elsewhere",
            json!({"team": "web"}),
            "docker.io/library/nginx:1.27",
        );
        let v2 = version_object_name(&self.boundary, &name("trusted"), 2);
        let audit = version_audit_binding_name(&self.boundary, &name("trusted"), 2);
        eventually("the stage in force", ACTIVATION_TIMEOUT, || async {
            let outside = create(cluster, other_ns, &unlabelled).await;
            let warned = create(cluster, other_ns, &elsewhere).await;
            let inside = create(cluster, reached_ns, &elsewhere).await;
            let admitted = create(cluster, reached_ns, &unlabelled).await;
            (!outside.admitted()
                && !warned.warnings.is_empty()
                && !inside.admitted()
                && admitted.admitted())
            .then_some(())
        })
        .await;
        let denied = |pod: &str, object: &str, binding: &str, rest: &str| {
            format!(
                "pods \"{pod}\" is forbidden: ValidatingAdmissionPolicy '{object}' with binding '{binding}' denied request: Policy 'trusted' {rest}"
            )
        };
        let registry = "(AllowedRegistries) denied image docker.io/library/nginx:1.27: it is not under ghcr.io/acme.";

        let outside = create(cluster, other_ns, &unlabelled).await;
        assert_eq!(
            outside.message,
            Some(denied(
                "unlabelled",
                before.0,
                before.1,
                "(RequiredLabels) requires the label team."
            )),
            "{outside:?}"
        );
        let warned = create(cluster, other_ns, &elsewhere).await;
        assert!(warned.admitted(), "{warned:?}");
        assert_eq!(
            warned.warnings,
            [format!(
                "Validation failed for ValidatingAdmissionPolicy '{v2}' with binding '{audit}': Policy 'trusted' {registry}"
            )],
            "{warned:?}"
        );
        let inside = create(cluster, reached_ns, &elsewhere).await;
        assert_eq!(
            inside.message,
            Some(denied("elsewhere", &v2, &v2, registry)),
            "{inside:?}"
        );
        let admitted = create(cluster, reached_ns, &unlabelled).await;
        assert!(admitted.admitted(), "{admitted:?}");
        assert!(admitted.warnings.is_empty(), "{admitted:?}");

        // What version 2 denies where it is in force is counted by the API server under its own
        // binding: 3 more denials there are 3 more, apart from the audit binding's and version 1's.
        let checks = || {
            apiserver_counter(
                &self.client,
                "apiserver_validating_admission_policy_check_total",
                ["policy_binding", "enforcement_action"],
            )
        };
        let counted_before = checks().await;
        for _ in 0..3 {
            assert!(!create(cluster, reached_ns, &elsewhere).await.admitted());
        }
        assert!(create(cluster, other_ns, &elsewhere).await.admitted());
        let counted_after = checks().await;
        let delta = |binding: &str, action: &str| {
            let key = (binding.to_owned(), action.to_owned());
            counted_after.get(&key).copied().unwrap_or(0.0)
                - counted_before.get(&key).copied().unwrap_or(0.0)
        };
        assert_eq!(delta(&v2, "deny"), 3.0, "{counted_after:?}");
        assert_eq!(delta(&audit, "warn"), 1.0, "{counted_after:?}");
        assert_eq!(delta(before.1, "deny"), 0.0, "{counted_after:?}");
    }

    /// The new version's own objects, without a previous version (as the per-boundary and
    /// shared layouts have them beside their own).
    fn side_objects(&self, installation: &str) -> Staged {
        render_staged(&self.boundary, None, self.rolling(), installation, &[]).unwrap()
    }

    /// Version 2 in the reached namespace, which version 1 has left.
    fn rolling(&self) -> Rolling<'_> {
        Rolling {
            current: &self.current,
            version: 2,
            reached: &self.reached,
            left: &self.reached,
        }
    }
}

/// The per-policy layout: the version in force before keeps its objects, bound to every
/// namespace but the reached ones.
async fn a_stage_splits_a_boundary_between_two_versions(version: &str) {
    let setting = Setting::new(version, Layout::PerPolicy).await;
    let staged = render_staged(
        &setting.boundary,
        Some(&setting.previous),
        setting.rolling(),
        INSTALLATION,
        &[],
    )
    .unwrap();
    let before = staged.previous.clone().unwrap();
    let objects = [&before.policy, &staged.policy];
    let bindings: Vec<_> = staged.bindings.iter().chain([&before.binding]).collect();
    setting.write(&objects, &bindings).await;
    let v1 = object_name(&setting.boundary, &name("trusted"));
    setting.judges_by_stage((&v1, &v1)).await;
    setting.remove(&objects, &bindings).await;
}

/// The per-boundary layout: the version in force before stays in the boundary's object beside
/// the boundary's other policies, skipping the reached namespaces; the other policies still
/// judge there.
async fn a_stage_splits_a_boundary_in_the_per_boundary_layout(version: &str) {
    let setting = Setting::new(version, Layout::PerBoundary).await;
    let untouched = policy("no-latest", json!({"rules": [{"disallowLatestTag": {}}]}));
    let rolling = BTreeMap::from([(name("trusted"), setting.rolling())]);
    let (objects, staged) = render_boundary_staged(
        &setting.boundary,
        &[setting.previous.clone(), untouched],
        &rolling,
        INSTALLATION,
        &[],
    );
    assert_eq!(objects.len(), 1, "both policies in one enforce object");
    assert_eq!(staged, [setting.side_objects(INSTALLATION)]);
    let held = &objects[0].rendered;
    let side = &staged[0];
    let all_objects = [&held.policy, &side.policy];
    let bindings: Vec<_> = side.bindings.iter().chain([&held.binding]).collect();
    setting.write(&all_objects, &bindings).await;
    let holder = boundary_object_name(&setting.boundary, Mode::Enforce, 1);
    setting.judges_by_stage((&holder, &holder)).await;

    // The boundary's other policy still judges the reached namespace, from the same object.
    let latest = pod("latest", json!({}), "ghcr.io/acme/web:latest");
    let denied = create(&setting.cluster, &setting.reached_ns, &latest).await;
    let message = denied.message.unwrap_or_default();
    assert!(
        message.starts_with(&format!(
            "pods \"latest\" is forbidden: ValidatingAdmissionPolicy '{holder}' with binding '{holder}' denied request: Policy 'no-latest' (DisallowLatestTag)"
        )),
        "{message}"
    );
    setting.remove(&all_objects, &bindings).await;
}

/// The shared layout: its one policy object and two bindings stay; the version in force before
/// keeps its parameters where the stage has not reached, and has none where it has; the new
/// version judges from objects of its own, as in the per-boundary layout.
async fn a_stage_splits_a_boundary_in_the_shared_layout(version: &str) {
    const SHARED: &str = "e2e-rollout-shared";
    let setting = Setting::new(version, Layout::Shared).await;
    let (cluster, boundary) = (&setting.cluster, &setting.boundary);
    // Version 1 in force everywhere, as the shared layout installs it.
    cluster
        .apply_policy(SHARED, boundary, &setting.previous)
        .await
        .unwrap();
    for namespace in [&setting.reached_ns, &setting.other_ns] {
        wait_enforced_in(cluster, SHARED, boundary, &setting.previous, namespace).await;
    }
    let rolling = setting.rolling();
    for namespace in [&setting.reached_ns, &setting.other_ns] {
        let params = params_in(&setting.client, namespace);
        match parameters_staged(
            boundary,
            Some(&setting.previous),
            rolling,
            SHARED,
            namespace,
            &[],
        ) {
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
    let side = setting.side_objects(SHARED);
    let bindings: Vec<_> = side.bindings.iter().collect();
    setting.write(&[&side.policy], &bindings).await;
    let shared = shared_policy_name(SHARED);
    let enforce = shared_binding_name(SHARED, Mode::Enforce);
    setting.judges_by_stage((&shared, &enforce)).await;
    setting.remove(&[&side.policy], &bindings).await;
    cluster.remove_installation(SHARED).await.unwrap();
}
