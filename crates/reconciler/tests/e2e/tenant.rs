//! A tenant with every right in its own namespace (a Role of `*` on `*`, as many platforms
//! grant) tries every way past its boundary's policies that the API server offers, in every
//! admission layout, on both versions: a violating create, the boundary label through the
//! namespace and its `status` and `finalize` subresources, the shared layout's parameter
//! objects, `kubectl debug` (ephemeral containers), a Pod's labels through `pods/status`, an
//! update of a terminating Pod,
//! impersonation, and palisade's own objects. Each is denied with the exact message, or by
//! RBAC. The tenant acts with its own credentials (a service account token), not through the
//! admin's impersonation.

use std::time::Duration;

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams,
};
use kube::core::GroupVersionKind;
use kube::Api;
use palisade_reconciler::Layout;
use palisade_testkit::control_plane::ControlPlane;
use palisade_vap::{guard_message, guard_name, parameters_guard_message, parameters_guard_name};
use serde_json::{json, Value};

use crate::serve::Stack;
use crate::support::{
    boundary_label, in_every_layout, plane, requires_label, wait_boundary_label, ACTIVATION_TIMEOUT,
};

in_every_layout!(a_tenant_does_not_escape_its_boundary);

const REGISTRY_DENIAL: &str =
    "Policy 'trusted' (AllowedRegistries) denied image busybox:latest: it is not under ghcr.io/acme.";

/// A boundary with namespace `ns` in the plane (cluster `k1`) and two policies, enforced.
struct Fixture {
    stack: Stack,
    boundary: String,
    namespace: String,
}

impl Fixture {
    async fn new(plane: &ControlPlane, layout: Layout) -> Fixture {
        let stack = Stack::start_in(layout).await;
        let boundary = stack
            .new_boundary("tenant", "k1", plane.kubeconfig_yaml())
            .await;
        let namespace = stack.new_namespace(&boundary, "k1", "team").await;
        for (name, spec) in [
            ("owner", requires_label("team")),
            (
                "trusted",
                json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}},
                                  {"disallowLatestTag": {}}]}),
            ),
        ] {
            stack.put_policy(&boundary, name, spec).await;
            stack.wait_enforced(&boundary, name, "k1").await;
        }
        Fixture {
            stack,
            boundary,
            namespace,
        }
    }
}

/// A service account `tenant` in `namespace`, every account there holding `*` on `*` there,
/// and the tenant's token.
async fn tenant_token(admin: &kube::Client, namespace: &str) -> String {
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), namespace);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "tenant"}})).unwrap();
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap();
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "tenant-all"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}],
    }))
    .unwrap();
    Api::<Role>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "tenant-all"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant-all"},
        // Every account of the namespace: the tenant's workloads and tools.
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                      "name": format!("system:serviceaccounts:{namespace}")}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), namespace)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(3600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer: TokenRequest = accounts
        .create_subresource("token", "tenant", &PostParams::default(), &request)
        .await
        .unwrap();
    answer.status.unwrap().token
}

/// The API server's message of a denied request (422 or 403), or a panic naming `what`.
fn refusal<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("{what}: must be refused, got {other:?}"),
    }
}

/// Asserts a 422 whose message ends with `denied request: <message>`.
fn assert_denied<T: std::fmt::Debug>(what: &str, result: Result<T, kube::Error>, message: &str) {
    let (code, text) = refusal(what, result);
    assert_eq!(code, 422, "{what}: {text}");
    assert!(
        text.ends_with(&format!("denied request: {message}")),
        "{what}: {text}"
    );
}

fn pod(name: &str, image: &str, extra: Value) -> Pod {
    let mut object = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"team": "web"}},
        "spec": {"containers": [{"name": "c", "image": image}]},
    });
    if let (Some(meta), Some(extra)) = (object["metadata"].as_object_mut(), extra.as_object()) {
        meta.extend(extra.clone());
    }
    serde_json::from_value(object).unwrap()
}

async fn a_tenant_does_not_escape_its_boundary(version: &str, layout: Layout) {
    let plane = plane(version).await;
    let admin = plane.client().await;
    let f = Fixture::new(plane, layout).await;
    let ns = f.namespace.as_str();
    let token = tenant_token(&admin, ns).await;
    let tenant = plane.token_client(&token).await;
    let identity = format!("system:serviceaccount:{ns}:tenant");
    let pods: Api<Pod> = Api::namespaced(tenant.clone(), ns);
    // The API server's authorizer learns the new RoleBinding from its informer: under load
    // that takes a moment, during which the tenant is refused by RBAC (403), not by policy.
    crate::support::eventually(
        "the tenant's Role in effect",
        ACTIVATION_TIMEOUT,
        || async {
            pods.list(&kube::api::ListParams::default())
                .await
                .ok()
                .map(|_| ())
        },
    )
    .await;

    // 1. A violating create.
    assert_denied(
        "a violating Pod",
        pods.create(
            &PostParams::default(),
            &pod("bad", "busybox:latest", json!({})),
        )
        .await,
        REGISTRY_DENIAL,
    );

    // 2. The boundary label, every way a namespace's labels change (the tenant's Role covers
    // its own namespace object).
    let namespaces: Api<Namespace> = Api::all(tenant.clone());
    let guard_denial = |what: &str, result: Result<Namespace, kube::Error>| {
        let (code, text) = refusal(what, result);
        assert_eq!(code, 422, "{what}: {text}");
        // Every installation sharing the plane has a guard; any of them may answer.
        assert!(
            text.contains(".boundary-label-guard.palisade.dev' with binding ")
                && text.ends_with(&format!("denied request: {}", guard_message(ns))),
            "{what}: {text}"
        );
    };
    let removed = json!({"metadata": {"labels": {"palisade.dev/boundary": null}}});
    let changed = json!({"metadata": {"labels": {"palisade.dev/boundary": "elsewhere"}}});
    for (what, patch) in [("removed", &removed), ("changed", &changed)] {
        guard_denial(
            &format!("label {what} on the namespace"),
            namespaces
                .patch(ns, &PatchParams::default(), &Patch::Merge(patch))
                .await,
        );
        guard_denial(
            &format!("label {what} through namespaces/status"),
            namespaces
                .patch_subresource("status", ns, &PatchParams::default(), &Patch::Merge(patch))
                .await,
        );
    }
    let mut current = namespaces.get(ns).await.unwrap();
    if let Some(labels) = current.metadata.labels.as_mut() {
        labels.remove("palisade.dev/boundary");
    }
    guard_denial(
        "label removed through namespaces/finalize",
        namespaces
            .replace_subresource("finalize", ns, &PostParams::default(), &current)
            .await,
    );
    let namespaces = Api::<Namespace>::all(admin.clone());
    assert_eq!(
        boundary_label(&namespaces, ns).await,
        Some(f.boundary.clone()),
        "the label stays"
    );

    // 3. The shared layout's parameters live in the tenant's namespace.
    if layout == Layout::Shared {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("palisade.dev", "v1", "BoundaryPolicy"),
            "boundarypolicies",
        );
        let params: Api<DynamicObject> = Api::namespaced_with(tenant.clone(), ns, &resource);
        let found = params.list(&ListParams::default()).await.unwrap().items;
        assert_eq!(found.len(), 2, "one parameter object per policy: {found:?}");
        let guard = parameters_guard_name(&f.stack.installation);
        // The guard is written in the pass that confirmed the policies, but the API server
        // loads admission policies from its informer every second or so: under load it may
        // judge with the guard a moment later. A dry-run delete (nothing is deleted) waits
        // for that.
        let first = found[0].metadata.name.clone().unwrap();
        let dry_run = DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        };
        crate::support::eventually(
            "the parameters guard in force",
            ACTIVATION_TIMEOUT,
            || async { params.delete(&first, &dry_run).await.is_err().then_some(()) },
        )
        .await;
        let params_denial = |what: &str, name: &str, result: Result<Value, kube::Error>| {
            let (code, text) = refusal(what, result);
            assert_eq!(code, 422, "{what}: {text}");
            assert!(
                text.ends_with(&format!(
                    "ValidatingAdmissionPolicy '{guard}' with binding '{guard}' denied request: {}",
                    parameters_guard_message(name, ns)
                )),
                "{what}: {text}"
            );
        };
        for object in &found {
            let name = object.metadata.name.clone().unwrap();
            params_denial(
                "deleting a parameter object",
                &name,
                params
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(|_| Value::Null),
            );
            params_denial(
                "emptying a parameter object's rules",
                &name,
                params
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"spec": {"rules": []}})),
                    )
                    .await
                    .map(|_| Value::Null),
            );
            params_denial(
                "taking a parameter object out of the guard by its label",
                &name,
                params
                    .patch(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(
                            json!({"metadata": {"labels": {"palisade.dev/installation": null}}}),
                        ),
                    )
                    .await
                    .map(|_| Value::Null),
            );
        }
        params_denial(
            "deleting every parameter object at once",
            found[0].metadata.name.as_deref().unwrap(),
            params
                .delete_collection(&DeleteParams::default(), &ListParams::default())
                .await
                .map(|_| Value::Null),
        );
        let remaining = Api::<DynamicObject>::namespaced_with(admin.clone(), ns, &resource)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items;
        assert_eq!(remaining.len(), 2, "nothing was deleted");
    }

    // 4. `kubectl debug`: an ephemeral container with a disallowed image in a compliant Pod.
    Api::<Pod>::namespaced(admin.clone(), ns)
        .create(
            &PostParams::default(),
            &pod("ok", "ghcr.io/acme/web:1.0", json!({})),
        )
        .await
        .unwrap();
    // `kubectl debug`: an ephemeral container on `image`.
    let debug = |image: &'static str| {
        let patch = Patch::Strategic(json!({"spec": {"ephemeralContainers": [
            {"name": "debugger", "image": image, "targetContainerName": "c"}
        ]}}));
        let pods = &pods;
        async move {
            pods.patch_subresource("ephemeralcontainers", "ok", &PatchParams::default(), &patch)
                .await
        }
    };
    assert_denied(
        "an ephemeral container on busybox:latest",
        debug("busybox:latest").await,
        REGISTRY_DENIAL,
    );
    assert_denied(
        "an ephemeral container under the registry, tagged latest",
        debug("ghcr.io/acme/debug:latest").await,
        "Policy 'trusted' (DisallowLatestTag) denied image ghcr.io/acme/debug:latest: it is tagged latest or carries no tag.",
    );
    debug("ghcr.io/acme/debug:1.0")
        .await
        .expect("an allowed debug image is admitted");

    // 4b. The required label removed from a running Pod through `pods/status`, which keeps
    // the labels an update sends (the kubelet's status updates keep them, and pass).
    assert_denied(
        "the required label removed through pods/status",
        pods.patch_subresource(
            "status",
            "ok",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"team": null}}})),
        )
        .await,
        "Policy 'owner' (RequiredLabels) requires the label team.",
    );
    pods.patch_subresource(
        "status",
        "ok",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"message": "a status update keeping the labels"}})),
    )
    .await
    .expect("a status update that keeps the labels passes");

    // 5. A terminating Pod (held by a finalizer) whose image is swapped.
    pods.create(
        &PostParams::default(),
        &pod(
            "held",
            "ghcr.io/acme/web:1.0",
            json!({"finalizers": ["example.com/hold"]}),
        ),
    )
    .await
    .unwrap();
    pods.delete("held", &DeleteParams::default()).await.unwrap();
    assert!(pods
        .get("held")
        .await
        .unwrap()
        .metadata
        .deletion_timestamp
        .is_some());
    assert_denied(
        "swapping the image of a terminating Pod",
        pods.patch(
            "held",
            &PatchParams::default(),
            &Patch::Strategic(
                json!({"spec": {"containers": [{"name": "c", "image": "busybox:latest"}]}}),
            ),
        )
        .await,
        REGISTRY_DENIAL,
    );
    pods.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("removing the finalizer of a terminating Pod passes");

    // 6. Impersonation: a service account of its own namespace is judged like the tenant;
    // Kubernetes' controllers and other namespaces' accounts cannot be impersonated.
    let builder = format!("system:serviceaccount:{ns}:builder");
    let as_builder = plane.token_client_as(&token, &builder).await;
    assert_denied(
        "a violating Pod as an impersonated account of the namespace",
        Api::<Pod>::namespaced(as_builder, ns)
            .create(
                &PostParams::default(),
                &pod("bad2", "busybox:latest", json!({})),
            )
            .await,
        REGISTRY_DENIAL,
    );
    for user in [
        "system:kube-controller-manager",
        "system:serviceaccount:kube-system:replicaset-controller",
    ] {
        let client = plane.token_client_as(&token, user).await;
        let (code, text) = refusal(
            user,
            Api::<Pod>::namespaced(client, ns)
                .create(
                    &PostParams::default(),
                    &pod("bad3", "busybox:latest", json!({})),
                )
                .await,
        );
        assert_eq!(code, 403, "impersonating {user}: {text}");
        assert!(
            text.contains(&format!("\"{identity}\" cannot impersonate")),
            "{text}"
        );
    }

    // 7. palisade's own objects are cluster-scoped: the tenant's Role does not reach them.
    let policies: Api<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy> =
        Api::all(tenant.clone());
    let (code, _) = refusal(
        "listing admission policies",
        policies.list(&ListParams::default()).await,
    );
    assert_eq!(code, 403);
    let (code, _) = refusal(
        "deleting the guard",
        policies
            .delete(&guard_name(&f.stack.installation), &DeleteParams::default())
            .await,
    );
    assert_eq!(code, 403);

    // Enforcement held throughout.
    for policy in ["owner", "trusted"] {
        assert_eq!(
            f.stack
                .policy_status(&f.boundary, policy, "k1")
                .await
                .as_deref(),
            Some("enforced")
        );
    }
}

/// Someone who may (a cluster admin who deleted the guard) removes a boundary's label: the
/// guard comes back, then the label, each counted and shown on the cluster, with no change in
/// the store to wake a pass (the watches do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_boundary_label_is_restored_and_reported() {
    // A plane of its own: the guards of other tests' installations would keep the label.
    let plane = tokio::task::spawn_blocking(|| ControlPlane::start("1.37"))
        .await
        .unwrap();
    let admin = plane.client().await;
    let f = Fixture::new(&plane, Layout::PerPolicy).await;
    let ns = f.namespace.as_str();
    let guard = guard_name(&f.stack.installation);
    let bindings = Api::<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding,
    >::all(admin.clone());
    bindings
        .delete(&guard, &DeleteParams::default())
        .await
        .unwrap();
    let cluster = f
        .stack
        .wait_cluster("k1", "the guard's repair recorded", |c| c["repairs"] == 1)
        .await;
    assert_eq!(
        cluster["last_repair"]["message"],
        format!("guard {guard} was deleted; restored"),
        "{cluster}"
    );
    assert!(bindings.get_opt(&guard).await.unwrap().is_some());
    // palisade runs as the plane's admin here, whom its guard lets through: the admin stands
    // for whoever may still change the label.
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    namespaces
        .patch(
            ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"palisade.dev/boundary": null}}})),
        )
        .await
        .unwrap();
    wait_boundary_label(&namespaces, ns, &f.boundary, Duration::from_millis(100)).await;
    let cluster = f
        .stack
        .wait_cluster("k1", "the label's repair recorded", |c| c["repairs"] == 2)
        .await;
    assert_eq!(
        cluster["last_repair"]["message"],
        format!("namespace {ns} lost its boundary label; restored"),
        "{cluster}"
    );
}
