//! Shared helpers of the end-to-end tests: the shared control planes, policies from documents,
//! bounded waits that probe instead of sleeping, and the both-versions test macro.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::PostParams;
use kube::Api;
use palisade_policy::{Name, Policy};
use palisade_reconciler::{ClusterClient, EnforcementProbe, InLayout, Layout};
use palisade_server::SealingKey;
use palisade_store::{PolicyWrite, SharedStore};
use palisade_testkit::control_plane::{self, ControlPlane};
use serde_json::json;

/// The installation id of everything these tests install.
pub const INSTALLATION: &str = "e2e-tests";

/// How long a policy may take to become active (the API server reloads policies every second).
pub const ACTIVATION_TIMEOUT: Duration = Duration::from_secs(60);

/// Generates `<name>::on_1_30` and `<name>::on_1_37` calling `async fn <name>(version: &str)`.
/// (`@in module, function, args...`: the two tests in `module`, calling `function(version,
/// args...)`.)
macro_rules! on_both_versions {
    ($($name:ident),* $(,)?) => {$(
        $crate::support::on_both_versions!(@in $name, super::$name);
    )*};
    (@in $module:ident, $test:path $(, $arg:expr)*) => {
        mod $module {
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_1_30() {
                $test("1.30" $(, $arg)*).await;
            }
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn on_1_37() {
                $test("1.37" $(, $arg)*).await;
            }
        }
    };
}
pub(crate) use on_both_versions;

/// Generates `per_policy`, `per_boundary` and `shared`, each with `on_1_30` and `on_1_37`,
/// calling `async fn <test>(version: &str, layout: Layout)` in that layout.
macro_rules! in_every_layout {
    ($test:ident) => {
        $crate::support::on_both_versions!(
            @in per_policy, super::$test, palisade_reconciler::Layout::PerPolicy
        );
        $crate::support::on_both_versions!(
            @in per_boundary, super::$test, palisade_reconciler::Layout::PerBoundary
        );
        $crate::support::on_both_versions!(
            @in shared, super::$test, palisade_reconciler::Layout::Shared
        );
    };
}
pub(crate) use in_every_layout;

/// The control plane of `version` shared by this test binary (started on first use).
pub async fn plane(version: &str) -> &'static ControlPlane {
    let version = version.to_owned();
    tokio::task::spawn_blocking(move || control_plane::shared(&version))
        .await
        .expect("the control plane thread panicked")
}

/// The shared control plane of `version` and a client on its admin kubeconfig, writing in the
/// default layout.
pub async fn connect(version: &str) -> (&'static ControlPlane, InLayout) {
    let plane = plane(version).await;
    (plane, admin_of(plane).await)
}

/// A client on `plane`'s admin kubeconfig, writing in the default layout.
pub async fn admin_of(plane: &ControlPlane) -> InLayout {
    ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
        .await
        .expect("the testenv kubeconfig is accepted")
        .with_layout(Layout::default())
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

/// The API server's `apiserver_request_total` (its `/metrics`, read as `admin`): the count per
/// verb and resource, of the verbs `counted` keeps.
pub async fn apiserver_requests(
    admin: &kube::Client,
    counted: impl Fn(&str) -> bool,
) -> BTreeMap<(String, String), f64> {
    apiserver_counter(admin, "apiserver_request_total", ["verb", "resource"])
        .await
        .into_iter()
        .filter(|((verb, _), _)| counted(verb))
        .collect()
}

/// The API server's counter `metric` (its `/metrics`, read as `admin`), summed by the values of
/// the two labels `by`.
pub async fn apiserver_counter(
    admin: &kube::Client,
    metric: &str,
    by: [&str; 2],
) -> BTreeMap<(String, String), f64> {
    let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
    let text = admin.request_text(request).await.unwrap();
    let mut counts = BTreeMap::<(String, String), f64>::new();
    for line in text
        .lines()
        .filter(|l| l.starts_with(&format!("{metric}{{")))
    {
        let field = |name: &str| {
            line.split(&format!("{name}=\""))
                .nth(1)
                .and_then(|rest| rest.split('"').next())
                .unwrap_or("")
                .to_owned()
        };
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *counts.entry((field(by[0]), field(by[1]))).or_default() += value;
    }
    counts
}

/// The URL of a SQLite store in `dir`.
pub fn sqlite_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}", dir.path().join("p.db").display())
}

/// Stores cluster `name` (its kubeconfig sealed with `key`) and attaches it to `boundary`.
pub async fn store_cluster(
    store: &SharedStore,
    key: &SealingKey,
    name: &str,
    kubeconfig: &str,
    boundary: &str,
) {
    store
        .put_cluster(name, &key.seal(kubeconfig.as_bytes()).unwrap(), None)
        .await
        .unwrap();
    store.attach_cluster(boundary, name).await.unwrap();
}

/// Stores policy `name` of `boundary` with `spec` (JSON) straight into the store.
pub async fn put_policy(store: &SharedStore, boundary: &str, name: &str, spec: &str) {
    store
        .put_policy(
            PolicyWrite {
                boundary: boundary.into(),
                name: name.into(),
                spec_json: spec.into(),
                metadata_json: r#"{"labels":{},"annotations":{}}"#.into(),
                if_match: None,
                create_only: false,
                restores: None,
                rollout: None,
                rewrite_identical: false,
            },
            "test",
        )
        .await
        .unwrap();
}

/// The label selector of what `installation` installed for `boundary`.
pub fn selector_of(installation: &str, boundary: &str) -> String {
    format!("palisade.dev/installation={installation},palisade.dev/boundary={boundary}")
}

/// The objects of `api` that `installation` installed for `boundary`.
pub async fn installed<K>(api: &Api<K>, installation: &str, boundary: &str) -> Vec<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = kube::api::ListParams::default().labels(&selector_of(installation, boundary));
    api.list(&params).await.unwrap().items
}

/// The spec of a policy that requires the label `key`.
pub fn requires_label(key: &str) -> serde_json::Value {
    json!({"rules": [{"requiredLabels": {"labels": [{"key": key}]}}]})
}

/// The spec of a policy that refuses images tagged `latest` or untagged.
pub fn no_latest() -> serde_json::Value {
    json!({"rules": [{"disallowLatestTag": {}}]})
}

/// Waits (at most `timeout`) until `api` has no object `name`.
pub async fn wait_gone<K>(what: &str, timeout: Duration, api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    eventually(what, timeout, || async {
        api.get_opt(name).await.unwrap().is_none().then_some(())
    })
    .await;
}

/// Retries `attempt` every 100 ms until it yields `Some`, for at most `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut attempt: F) -> (T, Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    retry(what, timeout, Duration::from_millis(100), || {
        let attempt = attempt();
        async move { attempt.await.ok_or_else(|| "not yet".to_owned()) }
    })
    .await
}

/// Retries `attempt` every `every` until it yields `Ok`, for at most `timeout`, and fails with
/// the last `Err` (what was seen instead). The value and how long it took.
pub async fn retry<T, F, Fut>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut attempt: F,
) -> (T, Duration)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    loop {
        match attempt().await {
            Ok(value) => return (value, started.elapsed()),
            Err(seen) => assert!(
                started.elapsed() < timeout,
                "{what}: not within {timeout:?}: {seen}"
            ),
        }
        tokio::time::sleep(every).await;
    }
}

/// The boundary label of `namespace` (read through `namespaces`), if it has one.
pub async fn boundary_label(namespaces: &Api<Namespace>, namespace: &str) -> Option<String> {
    namespaces
        .get(namespace)
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap_or_default()
        .remove("palisade.dev/boundary")
}

/// Waits (at most 30 s, looking every `every`) until `namespace` carries the boundary label
/// of `boundary` (again).
pub async fn wait_boundary_label(
    namespaces: &Api<Namespace>,
    namespace: &str,
    boundary: &str,
    every: Duration,
) {
    let what = format!("the label of {namespace} back");
    retry(&what, Duration::from_secs(30), every, || async {
        match boundary_label(namespaces, namespace).await {
            Some(label) if label == boundary => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Waits until `policy` (applied already) is enforced in `namespace`, probing with
/// `probe_enforcement`; returns how long it took.
pub async fn wait_enforced(
    cluster: &InLayout,
    boundary: &Name,
    policy: &Policy,
    namespace: &str,
) -> Duration {
    wait_enforced_in(cluster, INSTALLATION, boundary, policy, namespace).await
}

/// Applies `policy` of `boundary` (installation [`INSTALLATION`]) and waits until it is
/// enforced in `namespace`; how long that took.
pub async fn apply_enforced(
    cluster: &InLayout,
    boundary: &Name,
    policy: &Policy,
    namespace: &str,
) -> Duration {
    cluster
        .apply_policy(INSTALLATION, boundary, policy)
        .await
        .unwrap();
    wait_enforced(cluster, boundary, policy, namespace).await
}

/// [`wait_enforced`] for the objects of `installation`.
pub async fn wait_enforced_in(
    cluster: &InLayout,
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
pub async fn barrier(cluster: &InLayout, plane: &ControlPlane) -> Duration {
    barrier_in(cluster, plane, INSTALLATION).await
}

/// [`barrier`] for the objects of `installation` (in the client's layout).
pub async fn barrier_in(cluster: &InLayout, plane: &ControlPlane, installation: &str) -> Duration {
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

/// The API server's verdict on a dry-run create of a Pod: `None` admitted, else the policy's
/// message (what follows the API server's `denied request: `).
pub async fn verdict(
    admin: &kube::Client,
    namespace: &str,
    labels: serde_json::Value,
    images: &[&str],
) -> Option<String> {
    let containers: Vec<_> = images
        .iter()
        .enumerate()
        .map(|(i, image)| json!({"name": format!("c{i}"), "image": image}))
        .collect();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "legacy", "labels": labels},
        "spec": {"containers": containers},
    }))
    .unwrap();
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match Api::<Pod>::namespaced(admin.clone(), namespace)
        .create(&params, &pod)
        .await
    {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(denial(&status.message)),
        Err(other) => panic!("{other}"),
    }
}

/// What a denial's message says past the API server's `... denied request: ` prefix (the
/// whole message when it has none).
pub fn denial(message: &str) -> String {
    message
        .split_once("denied request: ")
        .map_or(message, |(_, m)| m)
        .to_owned()
}
