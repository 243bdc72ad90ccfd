//! The reconcile loop itself, against a real API server: what it counts on `/metrics`, what
//! it does when the store refuses a status, and how it stops.
//!
//! Metrics are read from the process-wide Prometheus recorder that `palisade serve` renders
//! on `/metrics` (other tests of this binary record into it too: every series asserted here
//! is of a cluster name no other test uses).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use palisade_policy::Catalog;
use palisade_reconciler::{ClusterClient, Controller, Layout, LayoutChoice, Settings};
use palisade_server::metrics::Metrics;
use palisade_server::SealingKey;
use palisade_store::SharedStore;
use palisade_testkit::control_plane::unique_name;
use sqlx::Connection;
use tokio::task::JoinHandle;

use crate::support::{
    admin_of, apiserver_requests, eventually, on_both_versions, plane, put_policy, sqlite_url,
    store_cluster, ACTIVATION_TIMEOUT,
};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::Api;

/// The value of the series `name{labels}` on `/metrics` (0 when absent).
fn metric(name: &str, labels: &[(&str, &str)]) -> f64 {
    let text = Metrics::global().render();
    let wanted: BTreeMap<&str, &str> = labels.iter().copied().collect();
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, series_labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            if series_name != name {
                return None;
            }
            let found: BTreeMap<&str, &str> = series_labels
                .split(',')
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (key, value) = pair.split_once('=')?;
                    Some((key, value.trim_matches('"')))
                })
                .collect();
            wanted
                .iter()
                .all(|(k, v)| found.get(k) == Some(v))
                .then(|| value.parse::<f64>().ok())
                .flatten()
        })
        .sum()
}

/// A series of `/metrics` (name and labels) and the value it should have.
type Expected<'a> = (&'a str, &'a [(&'a str, &'a str)], f64);

/// Asserts each series `name{labels}` on `/metrics` has the value given.
fn expect_metrics(series: &[Expected]) {
    for (name, labels, want) in series {
        assert_eq!(metric(name, labels), *want, "{name} {labels:?}");
    }
}

fn controller(
    store: &SharedStore,
    key: &SealingKey,
    installation: &str,
    settings: Settings,
) -> Arc<Controller> {
    Controller::new(
        palisade_app::App::new(store.clone(), Catalog::builtin(), key.clone()),
        installation.to_owned(),
        settings,
    )
}

/// The default settings, with the layout fixed to `layout`.
fn in_layout(layout: Layout) -> Settings {
    Settings {
        layout: LayoutChoice::Fixed(layout),
        ..Settings::default()
    }
}

/// Removes what `installation` left in `plane`.
async fn remove_installation(
    plane: &palisade_testkit::control_plane::ControlPlane,
    installation: &str,
) {
    admin_of(plane)
        .await
        .remove_installation(installation)
        .await
        .unwrap();
}

fn installation() -> String {
    format!("e2e{}", unique_name("r").replace('-', ""))
}

/// `kubeconfig` with its server replaced by `server`.
fn pointed_at(kubeconfig: &str, server: &str) -> String {
    kubeconfig
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("server:") {
                format!("    server: {server}")
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A store on `url` with boundary `boundary` holding policy `no-latest`.
/// A store on a SQLite file in a temporary directory (kept while the directory is), with a
/// boundary named `shop-...` holding the policy `no-latest`.
async fn sqlite_store_with_policy() -> (tempfile::TempDir, String, SharedStore) {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    let boundary = unique_name("shop");
    let store = store_with_policy(&url, &boundary).await;
    (dir, boundary, store)
}

async fn store_with_policy(url: &str, boundary: &str) -> SharedStore {
    let store = palisade_store::connect(url).await.unwrap();
    store.create_boundary(boundary, None).await.unwrap();
    put_policy(
        &store,
        boundary,
        "no-latest",
        r#"{"rules":[{"disallowLatestTag":{}}]}"#,
    )
    .await;
    store
}

/// A boundary holding `no-latest` in a SQLite store, attached to a new cluster record of
/// `plane`, with a namespace of it registered, a fresh installation id, and a controller of
/// that installation with `settings`.
struct Attached {
    _dir: tempfile::TempDir,
    boundary: String,
    store: SharedStore,
    cluster_name: String,
    namespace: String,
    installation: String,
    controller: Arc<Controller>,
}

async fn attached(
    plane: &palisade_testkit::control_plane::ControlPlane,
    settings: Settings,
) -> Attached {
    let (dir, boundary, store) = sqlite_store_with_policy().await;
    let key = SealingKey::random();
    let cluster_name = unique_name("c");
    store_cluster(
        &store,
        &key,
        &cluster_name,
        plane.kubeconfig_yaml(),
        &boundary,
    )
    .await;
    let client = plane.client().await;
    let namespace = palisade_testkit::control_plane::temp_namespace(&client, Some(&boundary)).await;
    store
        .put_namespace(&boundary, &cluster_name, &namespace, None)
        .await
        .unwrap();
    let installation = installation();
    Attached {
        _dir: dir,
        controller: controller(&store, &key, &installation, settings),
        boundary,
        store,
        cluster_name,
        namespace,
        installation,
    }
}

impl Attached {
    /// Runs passes until the boundary's policies have exactly the statuses `expected` in the
    /// cluster.
    async fn reconcile_until(&self, what: &str, expected: &[(&str, &str)]) {
        let expected: BTreeMap<String, String> = expected
            .iter()
            .map(|(policy, status)| ((*policy).to_owned(), (*status).to_owned()))
            .collect();
        eventually(what, ACTIVATION_TIMEOUT, || async {
            self.controller.reconcile_all().await;
            let found = statuses(&self.store, &self.boundary, &self.cluster_name).await;
            (found == expected).then_some(())
        })
        .await;
    }
}

/// A private control plane (its API server is restarted or stopped by the test), a SQLite
/// store whose boundary holds `no-latest` and is attached to it as cluster `<prefix>-…`, and a
/// controller of a fresh installation with `settings`.
struct PrivateCluster {
    plane: palisade_testkit::control_plane::ControlPlane,
    _dir: tempfile::TempDir,
    boundary: String,
    store: SharedStore,
    name: String,
    controller: Arc<Controller>,
}

async fn private_cluster(version: &str, prefix: &str, settings: Settings) -> PrivateCluster {
    let version = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || {
        palisade_testkit::control_plane::ControlPlane::start(&version)
    })
    .await
    .unwrap();
    let (dir, boundary, store) = sqlite_store_with_policy().await;
    let key = SealingKey::random();
    let name = unique_name(prefix);
    store_cluster(&store, &key, &name, plane.kubeconfig_yaml(), &boundary).await;
    PrivateCluster {
        plane,
        _dir: dir,
        controller: controller(&store, &key, &installation(), settings),
        boundary,
        store,
        name,
    }
}

impl PrivateCluster {
    /// Runs the first pass, which reconciles the cluster.
    async fn first_pass(&self) {
        let report = self.controller.reconcile_all().await;
        assert!(report.reconciled.contains(&self.name), "{report:?}");
    }
}

async fn status_of(store: &SharedStore, boundary: &str, cluster: &str) -> Option<String> {
    store
        .policy_statuses(boundary)
        .await
        .unwrap()
        .into_iter()
        .find(|s| s.cluster == cluster && s.policy == "no-latest")
        .map(|s| s.status)
}

/// Passes, durations, applied and removed policies per cluster, as `/metrics` shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pass_is_counted_per_cluster_on_metrics() {
    let plane = plane("1.37").await;
    let (_dir, boundary, store) = sqlite_store_with_policy().await;
    let key = SealingKey::random();
    let good = unique_name("good");
    let dead = unique_name("dead");
    store_cluster(&store, &key, &good, plane.kubeconfig_yaml(), &boundary).await;
    let refused = pointed_at(plane.kubeconfig_yaml(), "https://127.0.0.1:9");
    store_cluster(&store, &key, &dead, &refused, &boundary).await;
    let installation = installation();
    // Per policy: one policy is one object pair, so the counts below are objects too.
    let settings = in_layout(Layout::PerPolicy);
    let controller = controller(&store, &key, &installation, settings);
    // The recorder `/metrics` renders, installed before the pass as `palisade serve` does.
    Metrics::global();

    let report = controller.reconcile_all().await;
    assert!(report.reconciled.contains(&good), "{report:?}");
    assert_eq!(
        report.failed.get(&dead).map(String::as_str),
        Some("cannot reach the API server: connection refused"),
        "{report:?}"
    );
    assert!(report.unrecorded.is_empty(), "{report:?}");
    let passes = "palisade_reconcile_passes_total";
    let count = "palisade_reconcile_pass_duration_seconds_count";
    let applied = "palisade_reconcile_policies_applied_total";
    let removed = "palisade_reconcile_policies_removed_total";
    let failures = "palisade_reconcile_status_write_failures_total";
    let (good, dead) = (good.as_str(), dead.as_str());
    let (good_ok, good_error) = (
        [("cluster", good), ("outcome", "ok")],
        [("cluster", good), ("outcome", "error")],
    );
    let dead_error = [("cluster", dead), ("outcome", "error")];
    expect_metrics(&[
        (passes, &good_ok, 1.0),
        (passes, &good_error, 0.0),
        (passes, &dead_error, 1.0),
        (count, &[("cluster", good)], 1.0),
        (applied, &[("cluster", good)], 1.0),
        (removed, &[("cluster", good)], 0.0),
        (applied, &[("cluster", dead)], 0.0),
        (failures, &[("cluster", good)], 0.0),
    ]);
    assert!(
        metric(
            "palisade_reconcile_pass_duration_seconds_sum",
            &[("cluster", good)]
        ) > 0.0
    );

    // The policy goes: its objects are removed, and counted.
    store
        .delete_policy(&boundary, "no-latest", None, "test")
        .await
        .unwrap();
    let report = controller.reconcile_all().await;
    assert!(report.reconciled.contains(good), "{report:?}");
    expect_metrics(&[
        (passes, &good_ok, 2.0),
        (passes, &dead_error, 2.0),
        (applied, &[("cluster", good)], 1.0),
        (removed, &[("cluster", good)], 1.0),
        (count, &[("cluster", good)], 2.0),
    ]);

    remove_installation(plane, &installation).await;
}

/// A status the store refuses is logged, counted, and marks the pass for a retry; the next
/// pass records it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_the_store_refuses_is_counted_and_retried() {
    let plane = plane("1.37").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.db");
    let url = format!("sqlite://{}", path.display());
    let boundary = unique_name("shop");
    let store = store_with_policy(&url, &boundary).await;
    let key = SealingKey::random();
    let dead = unique_name("dead");
    let refused = pointed_at(plane.kubeconfig_yaml(), "https://127.0.0.1:9");
    store_cluster(&store, &key, &dead, &refused, &boundary).await;
    let controller = controller(&store, &key, &installation(), Settings::default());
    Metrics::global();

    // Another writer holds SQLite's write lock: reads go on (WAL), every write of the store
    // waits out its busy timeout (5 s) and fails.
    let mut blocker = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut blocker)
        .await
        .unwrap();
    let report = controller.reconcile_all().await;
    assert!(report.failed.contains_key(&dead), "{report:?}");
    assert!(report.unrecorded.contains(&dead), "{report:?}");
    assert!(report.incomplete());
    let failures = "palisade_reconcile_status_write_failures_total";
    // The cluster's last error and the boundary's policy statuses.
    assert_eq!(metric(failures, &[("cluster", &dead)]), 2.0);
    sqlx::query("ROLLBACK").execute(&mut blocker).await.unwrap();
    drop(blocker);
    assert_eq!(status_of(&store, &boundary, &dead).await, None);

    let report = controller.reconcile_all().await;
    assert!(report.unrecorded.is_empty(), "{report:?}");
    assert_eq!(metric(failures, &[("cluster", &dead)]), 2.0);
    assert_eq!(
        status_of(&store, &boundary, &dead).await.as_deref(),
        Some("error: cannot reach the API server: connection refused")
    );
    assert_eq!(
        store
            .get_cluster(&dead)
            .await
            .unwrap()
            .last_error
            .as_deref(),
        Some("cannot reach the API server: connection refused")
    );
}

/// Runs `controller` until the returned sender fires (or is dropped).
fn start(controller: Arc<Controller>) -> (tokio::sync::oneshot::Sender<()>, JoinHandle<()>) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(controller.run(async move {
        let _ = stopped.await;
    }));
    (stop, running)
}

/// Signals shutdown; how long `running` then took to return (at most `limit`).
async fn stop_within(
    stop: tokio::sync::oneshot::Sender<()>,
    running: JoinHandle<()>,
    limit: Duration,
) -> Duration {
    let stopping = Instant::now();
    stop.send(()).unwrap();
    tokio::time::timeout(limit, running)
        .await
        .expect("the loop returns within its bound")
        .unwrap();
    stopping.elapsed()
}

/// Shutdown in the middle of a pass. A cluster that never answers holds the pass up for the
/// client's 5 s connect timeout. With a shorter grace the loop gives up on it when the grace
/// ends; with the default one the pass finishes, recording the failure that came after the
/// shutdown. Either way the lease is free afterwards. Between passes, shutdown is immediate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_lets_the_pass_finish_its_writes_then_frees_the_lease() {
    let plane = plane("1.37").await;
    let url = palisade_testkit::postgres::test_database_url();
    let boundary = unique_name("shop");
    let store = store_with_policy(&url, &boundary).await;
    let key = SealingKey::random();
    let good = unique_name("good");
    store_cluster(&store, &key, &good, plane.kubeconfig_yaml(), &boundary).await;
    // The kernel accepts the connections; nothing ever answers the TLS handshake.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_server = format!("https://{}", silent.local_addr().unwrap());
    let hung = unique_name("hung");
    let hung_kubeconfig = pointed_at(plane.kubeconfig_yaml(), &silent_server);
    store_cluster(&store, &key, &hung, &hung_kubeconfig, &boundary).await;
    let installation = installation();
    let other = palisade_store::connect(&url).await.unwrap();
    Metrics::global();
    let passes_ok = |cluster: &str| {
        metric(
            "palisade_reconcile_passes_total",
            &[("cluster", cluster), ("outcome", "ok")],
        )
    };
    let lease_free = || async {
        eventually("the clusters are free", Duration::from_secs(10), || async {
            let lease = other.join_fleet(&installation, "other").await.unwrap()?;
            (lease.try_hold(&good).await.unwrap() && lease.try_hold(&hung).await.unwrap())
                .then_some(())
        })
        .await;
    };

    // 1. A grace shorter than the silent cluster's part: given up when the grace ends.
    let grace = Duration::from_secs(2);
    let settings = Settings {
        shutdown_grace: grace,
        ..Settings::default()
    };
    let (stop, running) = start(controller(&store, &key, &installation, settings));
    // The pass has begun: the reachable cluster's version is its first write.
    eventually("the first pass", Duration::from_secs(30), || async {
        let cluster = store.get_cluster(&good).await.unwrap();
        cluster.kubernetes_version.is_some().then_some(())
    })
    .await;
    let took = stop_within(stop, running, grace + Duration::from_secs(2)).await;
    assert!(took >= grace - Duration::from_millis(100), "{took:?}");
    // Abandoned: nothing was recorded for the silent cluster.
    assert_eq!(status_of(&store, &boundary, &hung).await, None);
    assert_eq!(store.get_cluster(&hung).await.unwrap().last_error, None);
    assert_eq!(
        metric("palisade_reconcile_passes_total", &[("cluster", &hung)]),
        0.0
    );
    lease_free().await;

    // 2. The default grace (10 s): the pass goes on after the shutdown until the silent
    // cluster's part fails, and records that failure.
    let settings = Settings::default();
    let limit = settings.shutdown_grace + Duration::from_secs(2);
    let before = passes_ok(&good);
    let (stop, running) = start(controller(&store, &key, &installation, settings));
    // The reachable cluster is done; the silent one is still connecting.
    eventually(
        "the reachable cluster's part",
        Duration::from_secs(30),
        || async { (passes_ok(&good) > before).then_some(()) },
    )
    .await;
    let unrecorded_at_shutdown = status_of(&store, &boundary, &hung).await.is_none();
    let took = stop_within(stop, running, limit).await;
    eprintln!("stopped after the pass finished: {took:?}");
    assert_eq!(
        status_of(&store, &boundary, &good).await.as_deref(),
        Some("installed")
    );
    let timed_out = "cannot reach the API server: timed out";
    assert_eq!(
        status_of(&store, &boundary, &hung).await,
        Some(format!("error: {timed_out}"))
    );
    assert_eq!(
        store
            .get_cluster(&hung)
            .await
            .unwrap()
            .last_error
            .as_deref(),
        Some(timed_out)
    );
    if !unrecorded_at_shutdown {
        eprintln!("note: the silent cluster's failure was recorded before the shutdown");
    }
    assert_eq!(
        metric(
            "palisade_reconcile_passes_total",
            &[("cluster", &hung), ("outcome", "error")]
        ),
        1.0
    );
    lease_free().await;

    // 3. Between passes: no grace needed.
    store.delete_cluster(&hung).await.unwrap();
    drop(silent);
    let before = passes_ok(&good);
    let (stop, running) = start(controller(&store, &key, &installation, Settings::default()));
    eventually("an idle loop", Duration::from_secs(30), || async {
        (passes_ok(&good) > before).then_some(())
    })
    .await;
    let took = stop_within(stop, running, Duration::from_secs(2)).await;
    eprintln!("idle stop: {took:?}");
    lease_free().await;
    drop(other);

    remove_installation(plane, &installation).await;
}

/// `--admission-layout shared`: the controller installs the shared objects and the policy's
/// parameters, confirms enforcement (status `enforced`), and removes the parameters when the
/// policy goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_shared_layout_is_installed_confirmed_and_removed_by_the_controller() {
    let plane = plane("1.37").await;
    let a = attached(plane, in_layout(Layout::Shared)).await;
    let installation = &a.installation;
    a.reconcile_until(
        "the policy enforced in the shared layout",
        &[("no-latest", "enforced")],
    )
    .await;
    let cluster = admin_of(plane).await;
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "nginx:latest"}]}});
    let answer = cluster.dry_run_create(&a.namespace, &pod).await.unwrap();
    assert_eq!(
        answer.denying_policy(),
        Some(format!("{installation}.policies.palisade.dev").as_str())
    );
    let boundary_name = palisade_policy::Name::parse(&a.boundary).unwrap();
    assert!(cluster
        .installed_boundaries(installation)
        .await
        .unwrap()
        .contains(&a.boundary));

    a.store
        .delete_policy(&a.boundary, "no-latest", None, "test")
        .await
        .unwrap();
    a.controller.reconcile_all().await;
    let shared = cluster.to(Layout::Shared);
    assert!(!shared
        .installed_boundaries(installation)
        .await
        .unwrap()
        .contains(boundary_name.as_str()));
    shared.remove_installation(installation).await.unwrap();
}

/// A restarted API server is noticed by its identity Lease's new holder (1.37), with no
/// failure in between to make palisade read its start time: the cluster counts it once
/// (`api_server_restarts`, when) and so does `/metrics`; passes without a restart count
/// nothing. A private control plane, since its API server is restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_api_server_is_counted_on_the_cluster_and_metrics() {
    let settings = Settings {
        apiserver_check_interval: Duration::ZERO,
        ..Settings::default()
    };
    let cluster = private_cluster("1.37", "restarts", settings).await;
    let (store, name, controller) = (&cluster.store, &cluster.name, &cluster.controller);
    Metrics::global();
    let restarts = "palisade_cluster_apiserver_restarts_total";

    cluster.first_pass().await;
    controller.reconcile_all().await;
    let record = store.get_cluster(name).await.unwrap();
    assert_eq!(record.apiserver_restarts, 0);
    assert_eq!(record.apiserver_restarted_at, None);

    let plane = cluster.plane;
    let plane = tokio::task::spawn_blocking(move || {
        plane.restart_apiserver();
        plane
    })
    .await
    .unwrap();
    eventually("the restart counted", ACTIVATION_TIMEOUT, || async {
        controller.reconcile_all().await;
        let record = store.get_cluster(name).await.unwrap();
        (record.apiserver_restarts == 1).then_some(record)
    })
    .await;
    controller.reconcile_all().await;
    let record = store.get_cluster(name).await.unwrap();
    assert_eq!(record.apiserver_restarts, 1);
    assert!(record.apiserver_restarted_at.is_some());
    assert_eq!(metric(restarts, &[("cluster", name)]), 1.0);
    drop(plane);
}

/// With the default interval between looks (a minute), two restarts within it are both
/// counted, once each: a pass the restart made fail has the start time read on the next pass
/// (on 1.30, where a restarted API server keeps its identity Lease's holder, that is what
/// tells; on 1.37 the Lease tells too, and the restart still counts once). (A pass runs on
/// every change and at least every 5 minutes; the probe that found the counter at 1 after two
/// restarts ran none between them that failed.)
async fn two_restarts_within_a_minute_are_both_counted(version: &str) {
    let cluster = private_cluster(version, "restarts2", Settings::default()).await;
    let (store, name, controller) = (&cluster.store, &cluster.name, &cluster.controller);
    cluster.first_pass().await;
    let plane = std::sync::Arc::new(cluster.plane);
    for expected in 1..=2 {
        let restarting = {
            let plane = plane.clone();
            tokio::task::spawn_blocking(move || plane.restart_apiserver())
        };
        // Passes run while the API server is down: one of them fails.
        let mut failed = false;
        while !restarting.is_finished() {
            failed |= !controller.reconcile_all().await.failed.is_empty();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        restarting.await.unwrap();
        assert!(failed, "no pass failed while the API server restarted");
        // Well within the minute between regular readings.
        eventually("the restart counted", Duration::from_secs(20), || async {
            controller.reconcile_all().await;
            let record = store.get_cluster(name).await.unwrap();
            (record.apiserver_restarts >= expected).then_some(())
        })
        .await;
        // Once, whichever signals showed it.
        controller.reconcile_all().await;
        let record = store.get_cluster(name).await.unwrap();
        assert_eq!(record.apiserver_restarts, expected);
    }
}

on_both_versions!(two_restarts_within_a_minute_are_both_counted);

/// name → status of the boundary's policies in `cluster`.
async fn statuses(store: &SharedStore, boundary: &str, cluster: &str) -> BTreeMap<String, String> {
    store
        .policy_statuses(boundary)
        .await
        .unwrap()
        .into_iter()
        .filter(|s| s.cluster == cluster)
        .map(|s| (s.policy, s.status))
        .collect()
}

/// `--admission-layout per-boundary`: the controller writes a boundary's policies of one mode
/// into one object, confirms each policy (status `enforced`), leaves the objects as they were
/// while one of the boundary's policies cannot be decoded (its rules would be dropped), and
/// removes the objects when the policies go; the shared layout's policy left from before a
/// switch goes too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_boundary_layout_is_installed_confirmed_and_removed_by_the_controller() {
    let plane = plane("1.37").await;
    let a = attached(plane, in_layout(Layout::PerBoundary)).await;
    let (store, boundary, installation) = (&a.store, &a.boundary, &a.installation);
    put_policy(
        store,
        boundary,
        "team-label",
        r#"{"rules":[{"requiredLabels":{"labels":[{"key":"team"}]}}]}"#,
    )
    .await;
    put_policy(
        store,
        boundary,
        "watch",
        r#"{"mode":"audit","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}}]}"#,
    )
    .await;
    let client = plane.client().await;
    // Left by the shared layout before a switch: removed after the boundaries are written.
    let shared = admin_of(plane).await.to(Layout::Shared);
    shared.install_shared(installation).await.unwrap();
    // `watch` is the audit-mode policy: confirmed, but it denies nothing.
    let all_enforced = [
        ("no-latest", "enforced"),
        ("team-label", "enforced"),
        ("watch", "active (audit)"),
    ];
    let every_policy = "every policy enforced in the per-boundary layout";
    a.reconcile_until(every_policy, &all_enforced).await;
    let boundary_name = palisade_policy::Name::parse(boundary).unwrap();
    let enforce =
        palisade_vap::boundary_object_name(&boundary_name, palisade_policy::Mode::Enforce, 1);
    let cluster = admin_of(plane).await.to(Layout::PerBoundary);
    let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web", "labels": {"team": "a"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:latest"}]}});
    let answer = cluster.dry_run_create(&a.namespace, &pod).await.unwrap();
    assert_eq!(answer.denying_policy(), Some(enforce.as_str()));
    let vaps =
        kube::Api::<k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy>::all(
            client.clone(),
        );
    let version = |vap: Option<
        k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy,
    >| { vap.and_then(|v| v.metadata.resource_version) };
    let before = version(vaps.get_opt(&enforce).await.unwrap());
    assert!(vaps
        .get_opt(&format!("{installation}.policies.palisade.dev"))
        .await
        .unwrap()
        .is_none());

    // A policy that cannot be decoded: the boundary's objects stay as they were (team-label's
    // change waits), and every policy's status says why.
    put_policy(store, boundary, "broken", r#"{"rules":[{"bogus":{}}]}"#).await;
    put_policy(
        store,
        boundary,
        "team-label",
        r#"{"rules":[{"requiredLabels":{"labels":[{"key":"owner"}]}}]}"#,
    )
    .await;
    a.controller.reconcile_all().await;
    let found = statuses(store, boundary, &a.cluster_name).await;
    assert!(found["broken"].starts_with("error: "), "{found:?}");
    for policy in ["no-latest", "team-label", "watch"] {
        assert!(
            found[policy].starts_with(
                "error: not applied: policy 'broken' of the boundary cannot be decoded"
            ),
            "{policy}: {found:?}"
        );
    }
    assert_eq!(version(vaps.get_opt(&enforce).await.unwrap()), before);
    let answer = cluster
        .dry_run_create(
            &a.namespace,
            &serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "c", "image": "nginx:1"}]}}),
        )
        .await
        .unwrap();
    assert_eq!(
        answer.denial_message(),
        Some("Policy 'team-label' (RequiredLabels) requires the label team.")
    );

    // Mended: the objects follow the policies again.
    store
        .delete_policy(boundary, "broken", None, "test")
        .await
        .unwrap();
    a.reconcile_until(every_policy, &all_enforced).await;
    assert_ne!(version(vaps.get_opt(&enforce).await.unwrap()), before);

    for policy in ["no-latest", "team-label", "watch"] {
        store
            .delete_policy(boundary, policy, None, "test")
            .await
            .unwrap();
    }
    a.controller.reconcile_all().await;
    assert!(!cluster
        .installed_boundaries(installation)
        .await
        .unwrap()
        .contains(boundary_name.as_str()));
    cluster.remove_installation(installation).await.unwrap();
}

on_both_versions!(auto_changes_layout_across_the_crossing_and_admits_no_violating_create);

/// `--admission-layout auto` (SPEC 3.4) with the crossing moved to 2 boundaries: 1 boundary is
/// per-boundary, a second attached makes the cluster shared, detaching it makes it
/// per-boundary again. Violating dry-run creates go on in the first boundary's namespace the
/// whole time: none is admitted, each is denied with the same message, and each switch leaves
/// no object of the earlier layout and no switch binding behind.
async fn auto_changes_layout_across_the_crossing_and_admits_no_violating_create(version: &str) {
    use palisade_reconciler::Thresholds;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    let plane = plane(version).await;
    let thresholds = Thresholds {
        shared_from: 2,
        per_boundary_below: 2,
        shared_from_before_fix: 2,
        per_boundary_below_before_fix: 2,
        ..Thresholds::default()
    };
    let settings = Settings {
        layout: LayoutChoice::Auto,
        thresholds,
        ..Settings::default()
    };
    let Attached {
        _dir,
        boundary,
        store,
        cluster_name,
        namespace,
        installation,
        controller,
    } = attached(plane, settings).await;
    let layout_of = || async {
        let record = store.get_cluster(&cluster_name).await.unwrap();
        (record.admission_layout, record.admission_layout_reason)
    };
    let name = palisade_policy::Name::parse(&boundary).unwrap();
    let per_boundary_object =
        palisade_vap::boundary_object_name(&name, palisade_policy::Mode::Enforce, 1);
    let shared_policy = palisade_vap::shared::shared_policy_name(&installation);
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(plane.client().await);
    let switch_bindings = || async {
        bindings
            .list(&kube::api::ListParams::default().labels(&format!(
                "{}={installation},{}",
                palisade_vap::render::INSTALLATION_LABEL,
                palisade_vap::render::SWITCH_LABEL
            )))
            .await
            .unwrap()
            .items
            .len()
    };

    // Passes until the cluster's layout is `(name, reason)`, `present` is installed and
    // `absent` is not, and no switch binding is left; then the policy still reads `enforced`.
    let settle =
        |what: &'static str, (name, reason): (&str, &str), present: &String, absent: &String| {
            let layout = (Some(name.to_owned()), Some(reason.to_owned()));
            let (present, absent) = (present.clone(), absent.clone());
            let (controller, layout_of, switch_bindings) =
                (&controller, &layout_of, &switch_bindings);
            let (store, boundary, cluster_name) = (&store, &boundary, &cluster_name);
            async move {
                eventually(what, ACTIVATION_TIMEOUT, || async {
                    controller.reconcile_all().await;
                    let done = layout_of().await == layout
                        && vap_exists(plane, &present).await
                        && !vap_exists(plane, &absent).await
                        && switch_bindings().await == 0;
                    done.then_some(())
                })
                .await;
                assert_eq!(
                    status_of(store, boundary, cluster_name).await.as_deref(),
                    Some("enforced")
                );
            }
        };

    eventually(
        "enforced in the per-boundary layout",
        ACTIVATION_TIMEOUT,
        || async {
            controller.reconcile_all().await;
            let enforced =
                status_of(&store, &boundary, &cluster_name).await.as_deref() == Some("enforced");
            let layout = layout_of().await;
            (enforced
                && layout
                    == (
                        Some("per-boundary".to_owned()),
                        Some("1 boundary".to_owned()),
                    ))
                .then_some(())
        },
    )
    .await;
    assert!(vap_exists(plane, &per_boundary_object).await);

    // Violating creates, one after the other, for the rest of the test.
    let stop = Arc::new(AtomicBool::new(false));
    let admitted = Arc::new(AtomicUsize::new(0));
    let prober = ClusterClient::from_client(plane.client().await);
    let stream = {
        let (stop, admitted, namespace) = (stop.clone(), admitted.clone(), namespace.clone());
        tokio::spawn(async move {
            let pod = serde_json::json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
                "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]},
            });
            let mut denials = BTreeMap::<String, usize>::new();
            while !stop.load(Ordering::Relaxed) {
                let answer = prober.dry_run_create(&namespace, &pod).await.unwrap();
                if answer.admitted() {
                    admitted.fetch_add(1, Ordering::Relaxed);
                } else {
                    let text = answer.denial_message().unwrap_or("(no denial)").to_owned();
                    *denials.entry(text).or_default() += 1;
                }
            }
            denials
        })
    };

    let second = unique_name("shop");
    store.create_boundary(&second, None).await.unwrap();
    put_policy(
        &store,
        &second,
        "no-latest",
        r#"{"rules":[{"disallowLatestTag":{}}]}"#,
    )
    .await;
    store.attach_cluster(&second, &cluster_name).await.unwrap();
    let shared_now = ("shared", "2 boundaries");
    let switched = "switched to the shared layout";
    settle(switched, shared_now, &shared_policy, &per_boundary_object).await;
    assert!(vap_exists(plane, &shared_policy).await);

    store.detach_cluster(&second, &cluster_name).await.unwrap();
    let per_boundary_now = ("per-boundary", "1 boundary");
    let back = "back in the per-boundary layout";
    settle(back, per_boundary_now, &per_boundary_object, &shared_policy).await;

    stop.store(true, Ordering::Relaxed);
    let denials = stream.await.unwrap();
    assert_eq!(
        admitted.load(Ordering::Relaxed),
        0,
        "violating creates admitted; denials: {denials:?}"
    );
    assert_eq!(
        denials.len(),
        1,
        "one denial text in every layout: {denials:?}"
    );
    let (text, count) = denials.into_iter().next().unwrap();
    assert!(
        text.starts_with("Policy 'no-latest' (DisallowLatestTag)"),
        "{text}"
    );
    eprintln!("{version}: {count} violating creates across two switches, 0 admitted");
}

async fn vap_exists(plane: &palisade_testkit::control_plane::ControlPlane, name: &str) -> bool {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(plane.client().await);
    api.get_opt(name).await.unwrap().is_some()
}

/// SPEC 3.4 (v3.1): when an unreachable API server answers again, the next pass starts within
/// seconds, not after the backoff. The API server is down for 10 s while a policy changes (the
/// pass it wakes fails); the backoff is a minute, so without the reconnect the change could
/// not be enforced within the 30 s allowed after the API server is ready again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_an_outage_the_next_pass_starts_when_the_api_server_answers() {
    let settings = Settings {
        min_backoff: Duration::from_secs(60),
        max_backoff: Duration::from_secs(60),
        ..Settings::default()
    };
    let PrivateCluster {
        plane,
        _dir,
        boundary,
        store,
        name,
        controller,
    } = private_cluster("1.37", "outage", settings).await;
    let client = plane.client().await;
    let namespace = palisade_testkit::control_plane::temp_namespace(&client, Some(&boundary)).await;
    store
        .put_namespace(&boundary, &name, &namespace, None)
        .await
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(controller.clone().run(async {
        let _ = stopped.await;
    }));
    // Whether the policy's current version is enforced in the cluster.
    let enforced_now = || async {
        let etag = store
            .list_policies(&boundary)
            .await
            .unwrap()
            .into_iter()
            .find(|p| p.name == "no-latest")
            .map(|p| p.etag);
        store
            .policy_statuses(&boundary)
            .await
            .unwrap()
            .into_iter()
            .any(|s| {
                s.cluster == name && Some(&s.policy_etag) == etag.as_ref() && s.status == "enforced"
            })
    };
    eventually("enforced before the outage", ACTIVATION_TIMEOUT, || async {
        enforced_now().await.then_some(())
    })
    .await;

    let plane = std::sync::Arc::new(plane);
    let restarting = {
        let plane = plane.clone();
        tokio::task::spawn_blocking(move || plane.restart_apiserver_after(Duration::from_secs(10)))
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    put_policy(
        &store,
        &boundary,
        "no-latest",
        r#"{"rules":[{"disallowLatestTag":{}},{"requiredLabels":{"labels":[{"key":"team"}]}}]}"#,
    )
    .await;
    // While the API server is down, the cluster does not read `enforced`.
    let (record, _) = eventually(
        "the cluster unconfirmed during the outage",
        Duration::from_secs(8),
        || async {
            let record = store.get_cluster(&name).await.unwrap();
            (record.admission_enforced == Some(false)).then_some(record)
        },
    )
    .await;
    let reason = record.admission_reason.unwrap_or_default();
    assert!(
        reason.starts_with("palisade cannot confirm it: "),
        "{reason}"
    );
    assert!(record.last_error.is_some());
    restarting.await.unwrap();
    let ready = Instant::now();
    let (_, took) = eventually(
        "the changed policy enforced after the outage",
        Duration::from_secs(30),
        || async { enforced_now().await.then_some(()) },
    )
    .await;
    eprintln!(
        "enforced {:.1} s after the API server was ready again",
        ready.elapsed().as_secs_f64().min(took.as_secs_f64())
    );
    let record = store.get_cluster(&name).await.unwrap();
    assert_eq!(
        record.admission_enforced,
        Some(true),
        "{:?}",
        record.admission_reason
    );
    let _ = stop.send(());
    running.await.unwrap();
}

/// The API server requests of one steady pass (nothing to change) with `PASS_COST_BOUNDARIES`
/// boundaries (default 100), each with one namespace and one policy, in each layout; printed
/// per verb and resource (LIST and GET grow with what a pass reads). Ignored by default:
/// `cargo test -p palisade-reconciler --test e2e -- --ignored pass_cost --nocapture`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand"]
async fn pass_cost() {
    let boundaries: usize = std::env::var("PASS_COST_BOUNDARIES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let plane = tokio::task::spawn_blocking(|| {
        palisade_testkit::control_plane::ControlPlane::start("1.37")
    })
    .await
    .unwrap();
    let admin = plane.client().await;
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir);
    let store = palisade_store::connect(&url).await.unwrap();
    let key = SealingKey::random();
    store
        .put_cluster(
            "k1",
            &key.seal(plane.kubeconfig_yaml().as_bytes()).unwrap(),
            None,
        )
        .await
        .unwrap();
    for i in 0..boundaries {
        let boundary = format!("cost-{i}");
        store.create_boundary(&boundary, None).await.unwrap();
        store.attach_cluster(&boundary, "k1").await.unwrap();
        put_policy(
            &store,
            &boundary,
            "no-latest",
            r#"{"rules":[{"disallowLatestTag":{}}]}"#,
        )
        .await;
        let namespace = format!("cost-ns-{i}");
        let object: k8s_openapi::api::core::v1::Namespace = serde_json::from_value(
            serde_json::json!({"metadata": {"name": namespace, "labels": {"palisade.dev/boundary": boundary}}}),
        )
        .unwrap();
        Api::<k8s_openapi::api::core::v1::Namespace>::all(admin.clone())
            .create(&Default::default(), &object)
            .await
            .unwrap();
        store
            .put_namespace(&boundary, "k1", &namespace, None)
            .await
            .unwrap();
    }
    let counts = || apiserver_requests(&admin, |verb| verb != "WATCH");
    for layout in [Layout::PerPolicy, Layout::PerBoundary, Layout::Shared] {
        let settings = in_layout(layout);
        let installation = installation();
        let controller = controller(&store, &key, &installation, settings);
        let first = controller.reconcile_all().await;
        assert!(first.failed.is_empty(), "{first:?}");
        // A second pass confirms what the first could not yet; the third is the steady one.
        controller.reconcile_all().await;
        let before = counts().await;
        let started = Instant::now();
        let report = controller.reconcile_all().await;
        let took = started.elapsed();
        assert!(report.failed.is_empty(), "{report:?}");
        let after = counts().await;
        let mut total = 0.0;
        for (key, value) in &after {
            let delta = value - before.get(key).copied().unwrap_or(0.0);
            if delta > 0.0 {
                total += delta;
                eprintln!(
                    "pass cost: {layout} {boundaries} boundaries: {} {} {delta}",
                    key.0, key.1
                );
            }
        }
        eprintln!(
            "pass cost: {layout} {boundaries} boundaries: {total} requests, {:.1} per boundary, {} ms",
            total / boundaries as f64,
            took.as_millis()
        );
        // This installation's objects go before the next layout's.
        for i in 0..boundaries {
            let boundary = palisade_policy::Name::parse(&format!("cost-{i}")).unwrap();
            let client = admin_of(&plane).await.to(layout);
            client
                .garbage_collect(&installation, &boundary, &[])
                .await
                .unwrap();
        }
    }
}
