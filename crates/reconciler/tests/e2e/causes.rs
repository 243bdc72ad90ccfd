//! Why a request failed, in words, from real failures: nothing listening, a name that does
//! not resolve, a certificate the kubeconfig's authority did not sign, and the API server's
//! own HTTP answers.

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kube::Api;
use palisade_reconciler::ClusterClient;

use crate::support::{admin_of, plane};

/// The shared 1.37 kubeconfig with one line changed.
fn edited(kubeconfig: &str, key: &str, value: &str) -> String {
    kubeconfig
        .lines()
        .map(|line| match line.split_once(':') {
            Some((indent, _)) if indent.trim() == key => {
                format!("{}{key}: {value}", &indent[..indent.len() - key.len()])
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn value_of<'k>(kubeconfig: &'k str, key: &str) -> &'k str {
    kubeconfig
        .lines()
        .find_map(|line| {
            line.trim()
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(':'))
        })
        .unwrap()
        .trim()
}

async fn probe_error(kubeconfig: &str) -> String {
    let client = ClusterClient::from_kubeconfig(kubeconfig).await.unwrap();
    client.probe().await.unwrap_err().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_failures_are_named() {
    let plane = plane("1.37").await;
    let kubeconfig = plane.kubeconfig_yaml();
    // An unused loopback port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let refused = edited(kubeconfig, "server", &format!("https://127.0.0.1:{port}"));
    assert_eq!(
        probe_error(&refused).await,
        "cannot reach the API server: connection refused"
    );
    let unresolved = edited(kubeconfig, "server", "https://no-such-host.invalid:6443");
    assert_eq!(
        probe_error(&unresolved).await,
        "cannot reach the API server: name not resolved"
    );
    // The client certificate is not the authority that signed the server's.
    let wrong_ca = edited(
        kubeconfig,
        "certificate-authority-data",
        value_of(kubeconfig, "client-certificate-data"),
    );
    assert_eq!(
        probe_error(&wrong_ca).await,
        "cannot reach the API server: TLS verification failed: the server's certificate is not signed by a trusted certificate authority"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_answers_are_named_with_their_status_and_message() {
    let plane = plane("1.37").await;
    let admin = admin_of(plane).await;
    let api: Api<ValidatingAdmissionPolicy> = Api::all(admin.client().clone());
    let error = api.get("no-such-policy.palisade.dev").await.unwrap_err();
    assert_eq!(
        palisade_reconciler::cause::describe(&error),
        "the API server answered 404 Not Found: validatingadmissionpolicies.admissionregistration.k8s.io \"no-such-policy.palisade.dev\" not found"
    );
    // A user without RBAC: listing palisade's objects is forbidden.
    let nobody = ClusterClient::from_client(plane.impersonating_client("nobody", &[]).await);
    let error = nobody
        .remove_installation("e2e-tests")
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("the API server answered 403 Forbidden: ")
            && error.contains("User \"nobody\" cannot list resource"),
        "{error}"
    );
}
