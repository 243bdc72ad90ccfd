//! Which namespaces a boundary may hold (SPEC 3.4 v3.2), through the API: reserved names are
//! a 409 with the SPEC's message before the cluster is touched, adopting an existing namespace
//! needs an admin, a cluster's reserved names are set and shown on `/v1/clusters/{c}`, and a
//! namespace records the uid palisade labelled. The cluster side (the label restored on that
//! uid only, `gone`) is proven on a real control plane (reconciler e2e, `namespaces`).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use crate::common::{fake, FakeClusters, TestApp, KUBECONFIG};
use axum::http::{Method, StatusCode};
use palisade_app::ports::{ClusterError, LabelOutcome, Labelled};
use serde_json::json;

/// A cluster whose namespaces are names in a set; every label the application asks for is
/// recorded, so a refusal can be shown to have touched nothing.
#[derive(Debug, Default)]
struct FakeCluster {
    existing: Mutex<BTreeSet<String>>,
    labelled: Mutex<Vec<String>>,
}

impl FakeClusters for FakeCluster {
    fn label_namespace(&self, namespace: &str, adopt: bool) -> Result<Labelled, ClusterError> {
        self.labelled.lock().unwrap().push(namespace.to_owned());
        let mut existing = self.existing.lock().unwrap();
        let outcome = match (existing.contains(namespace), adopt) {
            (true, false) => return Err(ClusterError::NamespaceExists(namespace.to_owned())),
            (true, true) => LabelOutcome::Adopted,
            (false, _) => LabelOutcome::Created,
        };
        existing.insert(namespace.to_owned());
        Ok(Labelled {
            outcome,
            uid: Some(format!("uid-of-{namespace}")),
        })
    }
}

async fn with_cluster(reserved: Option<&[&str]>) -> (TestApp, Arc<FakeCluster>) {
    let cluster = Arc::new(FakeCluster::default());
    cluster
        .existing
        .lock()
        .unwrap()
        .extend(["kube-system", "default", "team-b", "monitoring"].map(String::from));
    let app = TestApp::sqlite_with_clusters(fake(cluster.clone())).await;
    app.boundary("payments").await;
    let mut body = json!({ "kubeconfig": KUBECONFIG });
    if let Some(reserved) = reserved {
        body["reserved_namespaces"] = json!(reserved);
    }
    let answer = app.admin(Method::PUT, "/v1/clusters/c1", Some(body)).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let answer = app.attach("payments", "c1").await;
    assert!(answer.status.is_success(), "{answer:?}");
    (app, cluster)
}

async fn put_namespace(
    app: &TestApp,
    token: &str,
    namespace: &str,
    adopt: bool,
) -> crate::common::Answer {
    app.put(
        &format!("/v1/boundaries/payments/clusters/c1/namespaces/{namespace}"),
        token,
        json!({ "adopt": adopt }),
    )
    .await
}

/// The scenario: a boundary-admin of `payments` took `kube-system` with `{"adopt":
/// true}` (200 `adopted`). Now neither a boundary-admin nor an admin can: the cluster's own
/// namespaces are reserved, and nothing is asked of the cluster.
#[tokio::test]
async fn reserved_namespaces_are_refused_with_409_before_the_cluster_is_touched() {
    let (app, cluster) = with_cluster(Some(&["monitoring"])).await;
    let boundary_admin = app.token("boundary-admin", Some("payments")).await;
    for (namespace, adopt) in [
        ("kube-system", false),
        ("kube-public", false),
        ("kube-anything", false),
        ("default", false),
        ("monitoring", false),
        ("kube-system", true),
        ("default", true),
        ("monitoring", true),
    ] {
        let answer = put_namespace(&app, &app.admin, namespace, adopt).await;
        answer.assert_refusal(StatusCode::CONFLICT, "conflict", format!("namespace '{namespace}' is reserved in cluster 'c1': it cannot belong to a boundary"));
        if !adopt {
            let answer = put_namespace(&app, &boundary_admin, namespace, false).await;
            assert_eq!(
                answer.status,
                StatusCode::CONFLICT,
                "{namespace}: {answer:?}"
            );
        }
    }
    assert!(cluster.labelled.lock().unwrap().is_empty());
    // A name like them is not reserved.
    let answer = put_namespace(&app, &boundary_admin, "kubernetes-tools", false).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
}

/// Adopting hands palisade something someone else made: an admin may, a boundary-admin gets
/// 403 (the issue: any unlabelled namespace of another team could be adopted). A
/// boundary-admin still creates new namespaces.
#[tokio::test]
async fn adopting_an_existing_namespace_needs_an_admin() {
    let (app, cluster) = with_cluster(None).await;
    let boundary_admin = app.token("boundary-admin", Some("payments")).await;
    let answer = put_namespace(&app, &boundary_admin, "team-b", true).await;
    answer.assert_refusal(
        StatusCode::FORBIDDEN,
        "forbidden",
        "adopting an existing namespace needs an admin",
    );
    assert!(cluster.labelled.lock().unwrap().is_empty());
    // Without adopt, the existing namespace is a 409 that says how it can be taken.
    let answer = put_namespace(&app, &boundary_admin, "team-b", false).await;
    assert_eq!(answer.status, StatusCode::CONFLICT, "{answer:?}");
    // A new namespace: the boundary-admin creates it, and its uid is recorded.
    let answer = put_namespace(&app, &boundary_admin, "payments-web", false).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["action"], "created");
    assert_eq!(answer.body["uid"], "uid-of-payments-web");
    assert_eq!(answer.body["status"], "active");
    // The admin adopts.
    let answer = put_namespace(&app, &app.admin, "team-b", true).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["action"], "adopted");
    assert_eq!(answer.body["uid"], "uid-of-team-b");
    let answer = app
        .get(
            "/v1/boundaries/payments/clusters/c1/namespaces/team-b",
            &boundary_admin,
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["status"], "active");
    assert_eq!(answer.body["uid"], "uid-of-team-b");
}

/// `reserved_namespaces` on `PUT /v1/clusters/{c}`: shown on `GET`, kept when a later `PUT`
/// leaves it out (new credentials do not drop it), cleared by `[]`, and each entry checked.
#[tokio::test]
async fn a_cluster_s_reserved_namespaces_are_set_shown_and_checked() {
    let (app, _) = with_cluster(Some(&["monitoring", "ingress"])).await;
    let get = app.admin_get("/v1/clusters/c1").await;
    assert_eq!(
        get.body["reserved_namespaces"],
        json!(["monitoring", "ingress"])
    );
    let answer = app.put_cluster("c1", KUBECONFIG).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body["reserved_namespaces"],
        json!(["monitoring", "ingress"])
    );
    for (body, pointer) in [
        (json!(["ok", "Not_A_Name"]), "/reserved_namespaces/1: "),
        (
            json!(["a", "a"]),
            "/reserved_namespaces/1: 'a' is listed twice",
        ),
    ] {
        let answer = app
            .admin(
                Method::PUT,
                "/v1/clusters/c1",
                Some(json!({ "kubeconfig": KUBECONFIG, "reserved_namespaces": body })),
            )
            .await;
        answer.assert_error_starts(StatusCode::BAD_REQUEST, pointer);
    }
    let answer = app
        .admin(
            Method::PUT,
            "/v1/clusters/c1",
            Some(json!({ "kubeconfig": KUBECONFIG, "reserved_namespaces": [] })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["reserved_namespaces"], json!([]));
    // Nothing but an admin sees or sets a cluster.
    let boundary_admin = app.token("boundary-admin", Some("payments")).await;
    let answer = app
        .put(
            "/v1/clusters/c1",
            &boundary_admin,
            json!({ "kubeconfig": KUBECONFIG, "reserved_namespaces": [] }),
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
}

/// A namespace recorded before its name was reserved (an upgraded store) is reported, not
/// silently dropped: it reads `reserved: ...` until an admin releases it.
#[tokio::test]
async fn a_namespace_held_before_its_name_was_reserved_is_reported() {
    let (app, _) = with_cluster(None).await;
    let answer = put_namespace(&app, &app.admin, "monitoring", true).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let answer = app
        .admin(
            Method::PUT,
            "/v1/clusters/c1",
            Some(json!({ "kubeconfig": KUBECONFIG, "reserved_namespaces": ["monitoring"] })),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let list = app.admin_get("/v1/boundaries/payments/namespaces").await;
    assert_eq!(
        list.body["items"][0]["status"],
        "reserved: namespace 'monitoring' is reserved in cluster 'c1': it cannot belong to a boundary; release it from the boundary"
    );
}
