//! Every verb of the ClusterRole `palisade cluster rbac` prints is needed: for each (resource,
//! verb) of the role, the operation of palisade that uses it succeeds with the whole role and
//! is refused with 403 by the API server under the same role without that one verb. (The other
//! test, `rbac.rs`, shows that the role is enough.)
//!
//! A private 1.37 control plane that serves OpenReports reports, without the bootstrap binding
//! that grants every authenticated user `create` on SelfSubjectReviews (`system:basic-user`;
//! a hardened cluster may lack it, and then the role's own rule is what palisade relies on); the
//! identities are users the admin impersonates, each bound to its own role.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ListParams, PostParams};
use kube::Api;
use palisade_policy::Name;
use palisade_reconciler::drift::DriftWatch;
use palisade_reconciler::rbac::{cluster_role, cluster_role_binding, rules, Grantee};
use palisade_reconciler::reports::{render_report, NamespaceAudit};
use palisade_reconciler::statuses::StatusWatch;
use palisade_reconciler::workloads::{self, Workloads};
use palisade_reconciler::{ClusterClient, InLayout, Layout};
use palisade_store::{NamespaceRecord, ResourceRecord};
use palisade_testkit::control_plane::{temp_namespace, unique_name, ControlPlane, Options};
use palisade_vap::shared::PARAMS_CRD;
use serde_json::json;
use std::collections::BTreeMap;

use crate::audit::serve_reports;
use crate::support::{eventually, no_latest, policy, wait_gone};

const INSTALLATION: &str = "rbacverbs";
/// The installation whose guard the `get` case installs and removes.
const GUARD_INSTALLATION: &str = "rbacverbsguard";

/// Runs the operation that uses `verb` on `resource`, as `cluster`; `admin` prepares what it
/// needs. The error's text when it fails.
async fn exercise(
    plane: &ControlPlane,
    admin: &InLayout,
    cluster: &InLayout,
    resource: &str,
    verb: &str,
) -> Result<(), String> {
    let text = |e: palisade_reconciler::ReconcileError| e.to_string();
    let boundary = Name::parse(&unique_name("b")).unwrap();
    let probe = policy("probe", no_latest());
    let client = plane.client().await;
    match (resource, verb) {
        (
            "validatingadmissionpolicies"
            | "validatingadmissionpolicybindings"
            | "namespaces"
            | "boundarypolicies"
            | "customresourcedefinitions",
            "watch",
        )
        | ("customresourcedefinitions", "list") => {
            // The drift watches: every kind read once (the parameter objects' once their
            // definition is established), or a failure.
            shared(admin)
                .install_shared(INSTALLATION)
                .await
                .map_err(text)?;
            let (sender, _receiver) = tokio::sync::mpsc::channel(16);
            let watch = DriftWatch::start(cluster.client(), "c", INSTALLATION, sender);
            ready_or_refused("the drift watches", || watch.is_ready(), || watch.error()).await
        }
        ("validatingadmissionpolicies" | "validatingadmissionpolicybindings", verb) => match verb {
            "get" => {
                // Removing an installation reads its guard by name. The guard is removed again
                // (it would refuse the other identities' namespace labels) and its end awaited.
                admin
                    .install_boundary_label_guard(GUARD_INSTALLATION, "admin")
                    .await
                    .map_err(text)?;
                let result = cluster
                    .remove_installation(GUARD_INSTALLATION)
                    .await
                    .map(|_| ())
                    .map_err(text);
                admin
                    .remove_installation(GUARD_INSTALLATION)
                    .await
                    .map_err(text)?;
                let full = ClusterClient::from_client(
                    plane.impersonating_client("palisade-full", &[]).await,
                );
                let labelled = json!({"apiVersion": "v1", "kind": "Namespace",
                    "metadata": {"name": "guard-gone", "labels": {"palisade.dev/boundary": "x"}}});
                eventually(
                    "the guard gone",
                    std::time::Duration::from_secs(30),
                    || async {
                        full.dry_run_create("", &labelled)
                            .await
                            .ok()
                            .filter(|a| a.admitted())
                    },
                )
                .await;
                result
            }
            "list" => cluster
                .installed_boundaries(INSTALLATION)
                .await
                .map(|_| ())
                .map_err(text),
            "create" => cluster
                .apply_policy(INSTALLATION, &boundary, &probe)
                .await
                .map_err(text),
            "patch" => {
                admin
                    .apply_policy(INSTALLATION, &boundary, &probe)
                    .await
                    .map_err(text)?;
                cluster
                    .apply_policy(INSTALLATION, &boundary, &probe)
                    .await
                    .map_err(text)
            }
            "delete" => {
                admin
                    .apply_policy(INSTALLATION, &boundary, &probe)
                    .await
                    .map_err(text)?;
                cluster
                    .delete_policy(INSTALLATION, &boundary, probe.name())
                    .await
                    .map(|_| ())
                    .map_err(text)
            }
            other => panic!("no operation for verb {other}"),
        },
        ("namespaces", "get") => {
            let existing = temp_namespace(&client, Some(boundary.as_str())).await;
            cluster
                .label_namespace(&boundary, &existing, false)
                .await
                .map(|_| ())
                .map_err(text)
        }
        ("namespaces", "list") => cluster
            .boundary_namespaces(&boundary)
            .await
            .map(|_| ())
            .map_err(text),
        ("namespaces", "create") => cluster
            .label_namespace(&boundary, &unique_name("new"), false)
            .await
            .map(|_| ())
            .map_err(text),
        ("namespaces", "patch") => {
            let existing = temp_namespace(&client, None).await;
            cluster
                .label_namespace(&boundary, &existing, true)
                .await
                .map(|_| ())
                .map_err(text)
        }
        ("pods", "create") => {
            let namespace = temp_namespace(&client, None).await;
            let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/a:1"}]}});
            let answer = cluster
                .dry_run_create(&namespace, &pod)
                .await
                .map_err(text)?;
            if answer.admitted() {
                Ok(())
            } else {
                Err(format!("{} {:?}", answer.code, answer.message))
            }
        }
        (
            "pods" | "deployments" | "replicasets" | "statefulsets" | "daemonsets" | "jobs"
            | "cronjobs",
            "list",
        ) => {
            temp_namespace(&client, Some(boundary.as_str())).await;
            cluster
                .scan_boundary(&boundary, 100, &mut |_| {})
                .await
                .map(|_| ())
                .map_err(text)
        }
        ("reports", verb) => {
            let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
            let audit = NamespaceAudit {
                namespace: &namespace,
                checked: 0,
                violations: Vec::new(),
                excepted: Vec::new(),
            };
            let report = render_report(INSTALLATION, &boundary, &probe, &audit, 1);
            match verb {
                // Listing is how stale reports are found.
                "list" => cluster
                    .sync_reports(INSTALLATION, &boundary, &[])
                    .await
                    .map(|_| ())
                    .map_err(text),
                "create" => cluster
                    .sync_reports(INSTALLATION, &boundary, &[report])
                    .await
                    .map(|_| ())
                    .map_err(text),
                "patch" | "delete" => {
                    admin
                        .sync_reports(INSTALLATION, &boundary, std::slice::from_ref(&report))
                        .await
                        .map_err(text)?;
                    let keep = if verb == "patch" {
                        vec![report]
                    } else {
                        Vec::new()
                    };
                    cluster
                        .sync_reports(INSTALLATION, &boundary, &keep)
                        .await
                        .map(|_| ())
                        .map_err(text)
                }
                other => panic!("no operation for verb {other}"),
            }
        }
        ("customresourcedefinitions", verb) => {
            // `create`: palisade creates the parameters' definition (and re-applies it until it
            // is established); `patch`: it re-applies the one that is there.
            if verb == "patch" {
                shared(admin)
                    .install_shared(INSTALLATION)
                    .await
                    .map_err(text)?;
            } else {
                remove_definition(&client).await;
            }
            shared(cluster)
                .install_shared(INSTALLATION)
                .await
                .map_err(text)
        }
        ("boundarypolicies", verb) => {
            // A namespace of the boundary: where its parameters are written.
            temp_namespace(&client, Some(boundary.as_str())).await;
            let (admin, cluster) = (shared(admin), shared(cluster));
            if verb != "create" && verb != "list" {
                admin
                    .apply_policy(INSTALLATION, &boundary, &probe)
                    .await
                    .map_err(text)?;
            }
            match verb {
                // A first apply creates the policy's parameters, a later one patches them.
                "create" | "patch" => cluster
                    .apply_policy(INSTALLATION, &boundary, &probe)
                    .await
                    .map_err(text),
                "list" => cluster
                    .installed_boundaries(INSTALLATION)
                    .await
                    .map(|_| ())
                    .map_err(text),
                "delete" => cluster
                    .delete_policy(INSTALLATION, &boundary, probe.name())
                    .await
                    .map_err(text),
                other => panic!("no operation for verb {other}"),
            }
        }
        // Restarts are noticed by the API servers' identity Leases and the start time on
        // the API server's metrics.
        ("leases", "list") => cluster
            .apiserver_identities()
            .await
            .map(|_| ())
            .map_err(text),
        ("/metrics", "get") => cluster
            .apiserver_started_at()
            .await
            .map(|_| ())
            .map_err(text),
        ("selfsubjectreviews", "create") => cluster.whoami().await.map(|_| ()).map_err(text),
        ("deployments" | "replicasets" | "jobs" | "events", "watch") | ("events", "list") => {
            // The status watch of platform workloads: every kind read once, or a failure.
            let dir = tempfile::tempdir().unwrap();
            let url = format!("sqlite://{}", dir.path().join("p.db").display());
            let store = palisade_store::connect(&url).await.unwrap();
            let watch = StatusWatch::start(
                cluster.client().clone(),
                INSTALLATION,
                palisade_app::App::new(
                    store,
                    palisade_policy::Catalog::builtin(),
                    palisade_app::SealingKey::random(),
                )
                .records(),
                Vec::new(),
                std::sync::Arc::new(tokio::sync::Notify::new()),
            );
            // Ready means every kind was listed; its watch starts right after, so a missing
            // `watch` shows as a failure within moments of that.
            ready_or_refused("the status watch", || watch.is_ready(), || watch.error()).await
        }
        ("deployments" | "deployments/scale" | "jobs", verb) => {
            let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
            let namespaces = BTreeMap::from([(
                boundary.to_string(),
                vec![NamespaceRecord {
                    cluster: "c".into(),
                    name: namespace.clone(),
                    boundary: boundary.to_string(),
                    created_at: String::new(),
                    uid: None,
                    gone_at: None,
                }],
            )]);
            let catalog = palisade_policy::Catalog::builtin();
            let settings = Workloads::default();
            let built = resource == "jobs";
            let app = |replicas: u32| {
                let mut body = json!({"type": "app", "name": "web", "plan": "small",
                    "namespace": namespace, "cluster": "c", "replicas": replicas});
                if built {
                    body["source"] = json!("https://git.acme.internal/web.git");
                } else {
                    body["image"] = json!("ghcr.io/acme/web:1");
                }
                ResourceRecord {
                    boundary: boundary.to_string(),
                    resource_type: "app".into(),
                    name: "web".into(),
                    body_json: body.to_string(),
                    etag: String::new(),
                    created_at: String::new(),
                    updated_at: String::new(),
                    cluster: Some("c".into()),
                    status: None,
                }
            };
            let sync = |who: &ClusterClient, records: Vec<ResourceRecord>| {
                let who = who.clone();
                let namespaces = namespaces.clone();
                let catalog = catalog.clone();
                let settings = settings.clone();
                async move {
                    workloads::sync(
                        &who,
                        INSTALLATION,
                        &records,
                        &namespaces,
                        &catalog,
                        &settings,
                    )
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
                }
            };
            // The admin's apply must leave the object in the namespace: refused by admission
            // (e.g. while the shared policy's parameter kind is re-created) it would leave
            // nothing for `cluster` to patch or delete, and that would pass for nothing.
            let placed = || async {
                eventually(
                    &format!("the admin's {resource} in {namespace}"),
                    std::time::Duration::from_secs(30),
                    || async {
                        sync(admin, vec![app(1)]).await.ok()?;
                        let count = if built {
                            listed::<Job>(&client, &namespace).await?
                        } else {
                            listed::<Deployment>(&client, &namespace).await?
                        };
                        (count > 0).then_some(())
                    },
                )
                .await;
            };
            match verb {
                // A first apply reads the object, then creates it (a Job with `create`, a
                // Deployment by server-side apply, which is `patch`).
                "get" | "create" | "patch" if resource != "deployments/scale" => {
                    sync(cluster, vec![app(1)]).await
                }
                // A change of replicas alone is a patch of `scale`.
                "patch" => {
                    placed().await;
                    sync(cluster, vec![app(2)]).await
                }
                // The objects of a resource that is gone are deleted.
                "delete" => {
                    placed().await;
                    sync(cluster, Vec::new()).await
                }
                other => panic!("no operation for verb {other} on {resource}"),
            }
        }
        (resource, verb) => panic!("no operation for {verb} on {resource}"),
    }
}

/// `client` writing the shared layout.
fn shared(client: &InLayout) -> InLayout {
    client.to(Layout::Shared)
}

/// Waits until a watch has read everything once and then 2 s more without a 403 (its watch
/// requests start right after the lists, so a missing `watch` shows within moments): `Ok`, or
/// the 403 as the error.
async fn ready_or_refused(
    what: &str,
    is_ready: impl Fn() -> bool,
    error: impl Fn() -> Option<String>,
) -> Result<(), String> {
    let started = std::time::Instant::now();
    let mut ready_at = None;
    loop {
        if let Some(error) = error().filter(|e| e.contains("403")) {
            return Err(error);
        }
        if is_ready() {
            let since = *ready_at.get_or_insert_with(std::time::Instant::now);
            if since.elapsed() > std::time::Duration::from_secs(2) {
                return Ok(());
            }
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{what} neither read everything nor failed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Deletes the parameters' definition and waits until it is gone.
async fn remove_definition(client: &kube::Client) {
    let definitions = Api::<CustomResourceDefinition>::all(client.clone());
    let _ = definitions.delete(PARAMS_CRD, &Default::default()).await;
    wait_gone(
        "the parameters' definition gone",
        std::time::Duration::from_secs(60),
        &definitions,
        PARAMS_CRD,
    )
    .await;
}

/// A user bound to `role`, and palisade's client acting as that user.
async fn identity(plane: &ControlPlane, role: ClusterRole) -> InLayout {
    let admin = plane.client().await;
    let name = role.metadata.name.clone().unwrap();
    Api::<ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let grantee = Grantee::User(name.clone());
    Api::<ClusterRoleBinding>::all(admin)
        .create(
            &PostParams::default(),
            &cluster_role_binding(&name, &grantee),
        )
        .await
        .unwrap();
    ClusterClient::from_client(plane.impersonating_client(&name, &[]).await)
        .with_layout(Layout::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_of_the_role_is_needed() {
    let plane =
        tokio::task::spawn_blocking(|| ControlPlane::start_with("1.37", &Options::default()))
            .await
            .unwrap();
    let admin = serve_reports(&plane).await;
    // Kubernetes' bootstrap policy lets every authenticated user create SelfSubjectReviews
    // (`system:basic-user`); a hardened cluster may not. Without that binding the role's own
    // rule is what lets palisade learn its identity.
    Api::<ClusterRoleBinding>::all(plane.client().await)
        .delete("system:basic-user", &Default::default())
        .await
        .unwrap();
    let full = identity(&plane, cluster_role("palisade-full")).await;
    let mut checked = 0;
    for (index, rule) in rules().iter().enumerate() {
        for verb in &rule.verbs {
            let mut without = cluster_role(&format!("palisade-without-{index}-{verb}"));
            let role_rules = without.rules.as_mut().unwrap();
            role_rules[index].verbs.retain(|v| v != verb);
            // A rule without verbs is invalid: it goes.
            role_rules.retain(|r| !r.verbs.is_empty());
            let lacking = identity(&plane, without).await;
            let targets = rule
                .resources
                .clone()
                .or_else(|| rule.non_resource_urls.clone())
                .unwrap_or_default();
            for resource in targets {
                exercise(&plane, &admin, &full, &resource, verb)
                    .await
                    .unwrap_or_else(|e| panic!("{verb} {resource} with the whole role: {e}"));
                // RBAC takes a moment to see a new binding: wait until the identity can do
                // something else its role allows.
                eventually(
                    &format!("the role without {verb} {resource} active"),
                    std::time::Duration::from_secs(30),
                    || async {
                        let allowed = if resource == "namespaces" && verb == "list" {
                            lacking.installed_boundaries(INSTALLATION).await.map(|_| ())
                        } else {
                            lacking
                                .boundary_namespaces(&Name::parse("none").unwrap())
                                .await
                                .map(|_| ())
                        };
                        allowed.ok()
                    },
                )
                .await;
                let error = exercise(&plane, &admin, &lacking, &resource, verb)
                    .await
                    .err()
                    .unwrap_or_else(|| panic!("{verb} {resource} succeeded without the verb"));
                assert!(
                    error.contains("403"),
                    "{verb} {resource} without the verb: {error}"
                );
                checked += 1;
            }
        }
    }
    eprintln!("rbac: {checked} (resource, verb) pairs of the role, each needed");
}

/// How many objects of kind `K` are in `namespace`; `None` when the list fails.
async fn listed<K>(client: &kube::Client, namespace: &str) -> Option<usize>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let api = Api::<K>::namespaced(client.clone(), namespace);
    Some(api.list(&ListParams::default()).await.ok()?.items.len())
}
