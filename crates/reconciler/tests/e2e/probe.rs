//! `probe()`: what a cluster can enforce, read from `/version` and discovery.

use palisade_reconciler::probe::NOT_SERVED;
use palisade_reconciler::Admission;
use palisade_testkit::control_plane::{ControlPlane, Options};
use serde_json::json;

use crate::support::{admin_of, connect, on_both_versions, put_policy, sqlite_url, store_cluster};

on_both_versions!(probe_reports_enforced);

async fn probe_reports_enforced(version: &str) {
    let (plane, cluster) = connect(version).await;
    let probe = cluster.probe().await.unwrap();
    assert_eq!(probe.kubernetes_version, format!("v{}", plane.version()));
    assert_eq!(probe.admission, Admission::Enforced);
}

/// A 1.37 API server that does not serve the ValidatingAdmissionPolicy API. Disabling the
/// resources alone is not enough: the ValidatingAdmissionPolicy admission plugin then waits
/// forever for their informers and the server refuses every request ("not yet ready to handle
/// request"), so the plugin is disabled too, as a cluster without the API would have it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_reports_a_server_without_the_api_on_1_37() {
    let options = Options {
        controller_manager: false,
        workloads: false,
        apiserver_args: vec![
            "--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false".to_owned(),
            "--disable-admission-plugins=ValidatingAdmissionPolicy".to_owned(),
        ],
    };
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start_with("1.37", &options))
        .await
        .unwrap();
    let cluster = admin_of(&plane).await;
    let probe = cluster.probe().await.unwrap();
    assert_eq!(probe.kubernetes_version, "v1.37.2");
    assert_eq!(
        probe.admission,
        Admission::NotEnforced(NOT_SERVED.to_owned())
    );

    // The reconciler writes nothing there and every policy says why.
    let dir = tempfile::tempdir().unwrap();
    let store = palisade_store::connect(&sqlite_url(&dir)).await.unwrap();
    let key = palisade_server::SealingKey::random();
    store.create_boundary("shop", None).await.unwrap();
    store_cluster(&store, &key, "old", plane.kubeconfig_yaml(), "shop").await;
    let spec = r#"{"rules":[{"disallowLatestTag":{}}]}"#;
    put_policy(&store, "shop", "no-latest", spec).await;
    let controller = crate::serve::controller(&store, &key, "e2e-no-api");
    // Counted as `not_enforced` on `/metrics` (no other test has a cluster named "old").
    let metrics = palisade_server::metrics::Metrics::global();
    let report = controller.reconcile_all().await;
    assert!(report.failed.is_empty(), "{report:?}");
    let rendered = metrics.render();
    assert!(
        rendered
            .lines()
            .any(|line| line.starts_with("palisade_reconcile_passes_total{")
                && line.contains(r#"cluster="old""#)
                && line.contains(r#"outcome="not_enforced""#)),
        "{rendered}"
    );
    let statuses = store.policy_statuses("shop").await.unwrap();
    assert_eq!(statuses.len(), 1);
    assert_eq!(statuses[0].status, format!("not enforced: {NOT_SERVED}"));
    let recorded = store.get_cluster("old").await.unwrap();
    assert_eq!(recorded.kubernetes_version.as_deref(), Some("v1.37.2"));
    assert_eq!(recorded.admission_enforced, Some(false));
    assert_eq!(recorded.admission_reason.as_deref(), Some(NOT_SERVED));

    // palisade wrote nothing there, so there is nothing to remove, and the API forgets the
    // reachable cluster with 204 (not a 409 for the API it does not serve).
    assert_eq!(
        cluster.remove_installation("e2e-no-api").await.unwrap(),
        Vec::<String>::new()
    );
    let stack = crate::serve::Stack::start(None).await;
    stack
        .ok("POST", "/v1/boundaries", Some(json!({"name": "shop"})))
        .await;
    stack
        .add_cluster("old", plane.kubeconfig_yaml(), "shop")
        .await;
    let (status, body) = stack.call("DELETE", "/v1/clusters/old", None).await;
    assert_eq!(status, reqwest::StatusCode::NO_CONTENT, "{body}");
    let (status, _) = stack.call("GET", "/v1/clusters/old", None).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND);
    drop(stack);

    drop(cluster);
    tokio::task::spawn_blocking(move || drop(plane))
        .await
        .unwrap();
}
