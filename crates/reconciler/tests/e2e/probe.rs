//! `probe()`: what a cluster can enforce, read from `/version` and discovery.

use palisade_reconciler::probe::NOT_SERVED;
use palisade_reconciler::{Admission, ClusterClient};
use palisade_testkit::control_plane::{ControlPlane, Options};

use crate::support::{connect, on_both_versions};

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
        apiserver_args: vec![
            "--runtime-config=admissionregistration.k8s.io/v1/validatingadmissionpolicies=false,admissionregistration.k8s.io/v1/validatingadmissionpolicybindings=false".to_owned(),
            "--disable-admission-plugins=ValidatingAdmissionPolicy".to_owned(),
        ],
    };
    let plane = tokio::task::spawn_blocking(move || ControlPlane::start_with("1.37", &options))
        .await
        .unwrap();
    let cluster = ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
        .await
        .unwrap();
    let probe = cluster.probe().await.unwrap();
    assert_eq!(probe.kubernetes_version, "v1.37.2");
    assert_eq!(
        probe.admission,
        Admission::NotEnforced(NOT_SERVED.to_owned())
    );
    drop(cluster);
    tokio::task::spawn_blocking(move || drop(plane))
        .await
        .unwrap();
}
