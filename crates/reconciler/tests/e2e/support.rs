//! Shared helpers of the end-to-end tests: the shared control planes, policies from documents,
//! bounded waits that probe instead of sleeping, and the both-versions test macro.

use std::future::Future;
use std::time::{Duration, Instant};

use palisade_policy::{Name, Policy};
use palisade_reconciler::{ClusterClient, EnforcementProbe};
use palisade_testkit::control_plane::{self, ControlPlane};
use serde_json::json;

/// The installation id of everything these tests install.
pub const INSTALLATION: &str = "e2e-tests";

/// How long a policy may take to become active (the API server reloads policies every second).
pub const ACTIVATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Generates `<name>::on_1_30` and `<name>::on_1_37` calling `async fn <name>(version: &str)`.
macro_rules! on_both_versions {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_1_30() {
                super::$name("1.30").await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_1_37() {
                super::$name("1.37").await;
            }
        }
    )*};
}
pub(crate) use on_both_versions;

/// The control plane of `version` shared by this test binary (started on first use).
pub async fn plane(version: &str) -> &'static ControlPlane {
    let version = version.to_owned();
    tokio::task::spawn_blocking(move || control_plane::shared(&version))
        .await
        .expect("the control plane thread panicked")
}

/// The shared control plane of `version` and a `ClusterClient` on its admin kubeconfig.
pub async fn connect(version: &str) -> (&'static ControlPlane, ClusterClient) {
    let plane = plane(version).await;
    let cluster = ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
        .await
        .expect("the testenv kubeconfig is accepted");
    (plane, cluster)
}

pub fn name(text: &str) -> Name {
    Name::parse(text).unwrap()
}

/// A fresh boundary name, unique in this test binary.
pub fn unique_boundary(prefix: &str) -> Name {
    name(&control_plane::unique_name(prefix))
}

/// A validated policy from a `spec` (JSON), named `policy_name`.
pub fn policy(policy_name: &str, spec: serde_json::Value) -> Policy {
    palisade_testkit::corpus::policy(policy_name, "shop", spec)
}

/// Retries `attempt` every 100 ms until it yields `Some`, for at most `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut attempt: F) -> (T, Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = attempt().await {
            return (value, started.elapsed());
        }
        assert!(
            started.elapsed() < timeout,
            "{what}: not within {timeout:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until `policy` (applied already) is enforced in `namespace`, probing with
/// `probe_enforcement`; returns how long it took.
pub async fn wait_enforced(
    cluster: &ClusterClient,
    boundary: &Name,
    policy: &Policy,
    namespace: &str,
) -> Duration {
    wait_enforced_in(cluster, INSTALLATION, boundary, policy, namespace).await
}

/// [`wait_enforced`] for the objects of `installation`.
pub async fn wait_enforced_in(
    cluster: &ClusterClient,
    installation: &str,
    boundary: &Name,
    policy: &Policy,
    namespace: &str,
) -> Duration {
    let what = format!("policy {} enforced in {namespace}", policy.name());
    eventually(&what, ACTIVATION_TIMEOUT, || async {
        let probe = cluster
            .probe_enforcement(installation, boundary, policy, namespace)
            .await
            .unwrap();
        (probe == EnforcementProbe::Enforced).then_some(())
    })
    .await
    .1
}

/// Waits until every policy applied before this call is active. The API server loads policies
/// and bindings from one watch each, in order, and compiles them into one list: once a probe
/// policy applied last (in a boundary of its own) denies, all earlier ones act too. This is
/// needed where several policies share a boundary, so no single probe can name one of them.
pub async fn barrier(cluster: &ClusterClient, plane: &ControlPlane) -> Duration {
    barrier_in(cluster, plane, INSTALLATION).await
}

/// [`barrier`] for the objects of `installation` (in the client's layout).
pub async fn barrier_in(
    cluster: &ClusterClient,
    plane: &ControlPlane,
    installation: &str,
) -> Duration {
    let boundary = unique_boundary("barrier");
    let client = plane.client().await;
    let namespace = control_plane::temp_namespace(&client, Some(boundary.as_str())).await;
    let probe = policy("barrier", json!({"rules": [{"disallowLatestTag": {}}]}));
    cluster
        .apply_boundary(installation, &boundary, std::slice::from_ref(&probe))
        .await
        .unwrap();
    let took = wait_enforced_in(cluster, installation, &boundary, &probe, &namespace).await;
    cluster
        .garbage_collect(installation, &boundary, &[])
        .await
        .unwrap();
    took
}
