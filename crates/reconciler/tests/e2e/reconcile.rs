//! The reconcile loop itself, against a real API server: what it counts on `/metrics`, what
//! it does when the store refuses a status.
//!
//! Metrics are read from the process-wide Prometheus recorder that `palisade serve` renders
//! on `/metrics` (other tests of this binary record into it too: every series asserted here
//! is of a cluster name no other test uses).

use std::collections::BTreeMap;
use std::sync::Arc;

use palisade_policy::Catalog;
use palisade_reconciler::{ClusterClient, Controller, Settings, Unseal};
use palisade_server::metrics::Metrics;
use palisade_server::sealing::SealingKey;
use palisade_store::{PolicyWrite, SharedStore};
use palisade_testkit::control_plane::unique_name;
use sqlx::Connection;

use crate::support::plane;

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

fn controller(
    store: &SharedStore,
    key: &SealingKey,
    installation: &str,
    settings: Settings,
) -> Arc<Controller> {
    let key = key.clone();
    let unseal: Unseal = Arc::new(move |sealed: &[u8]| {
        String::from_utf8(key.open(sealed).map_err(|e| e.to_string())?).map_err(|e| e.to_string())
    });
    Controller::new(
        store.clone(),
        Arc::new(Catalog::builtin()),
        unseal,
        installation.to_owned(),
        settings,
    )
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
async fn store_with_policy(url: &str, boundary: &str) -> SharedStore {
    let store = palisade_store::connect(url).await.unwrap();
    store.create_boundary(boundary, None).await.unwrap();
    store
        .put_policy(
            PolicyWrite {
                boundary: boundary.into(),
                name: "no-latest".into(),
                spec_json: r#"{"rules":[{"disallowLatestTag":{}}]}"#.into(),
                metadata_json: r#"{"labels":{},"annotations":{}}"#.into(),
                if_match: None,
                create_only: false,
            },
            "test",
        )
        .await
        .unwrap();
    store
}

async fn add_cluster(
    store: &SharedStore,
    key: &SealingKey,
    name: &str,
    kubeconfig: &str,
    boundary: &str,
) {
    store
        .put_cluster(name, &key.seal(kubeconfig.as_bytes()))
        .await
        .unwrap();
    store.attach_cluster(boundary, name).await.unwrap();
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
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("p.db").display());
    let boundary = unique_name("shop");
    let store = store_with_policy(&url, &boundary).await;
    let key = SealingKey::random();
    let good = unique_name("good");
    let dead = unique_name("dead");
    add_cluster(&store, &key, &good, plane.kubeconfig_yaml(), &boundary).await;
    let refused = pointed_at(plane.kubeconfig_yaml(), "https://127.0.0.1:9");
    add_cluster(&store, &key, &dead, &refused, &boundary).await;
    let installation = installation();
    let controller = controller(&store, &key, &installation, Settings::default());
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
    assert_eq!(
        metric(passes, &[("cluster", &good), ("outcome", "ok")]),
        1.0
    );
    assert_eq!(
        metric(passes, &[("cluster", &good), ("outcome", "error")]),
        0.0
    );
    assert_eq!(
        metric(passes, &[("cluster", &dead), ("outcome", "error")]),
        1.0
    );
    assert_eq!(
        metric(
            "palisade_reconcile_pass_duration_seconds_count",
            &[("cluster", &good)]
        ),
        1.0
    );
    assert!(
        metric(
            "palisade_reconcile_pass_duration_seconds_sum",
            &[("cluster", &good)]
        ) > 0.0
    );
    let applied = "palisade_reconcile_policies_applied_total";
    let removed = "palisade_reconcile_policies_removed_total";
    assert_eq!(metric(applied, &[("cluster", &good)]), 1.0);
    assert_eq!(metric(removed, &[("cluster", &good)]), 0.0);
    assert_eq!(metric(applied, &[("cluster", &dead)]), 0.0);
    assert_eq!(
        metric(
            "palisade_reconcile_status_write_failures_total",
            &[("cluster", &good)]
        ),
        0.0
    );

    // The policy goes: its objects are removed, and counted.
    store
        .delete_policy(&boundary, "no-latest", None, "test")
        .await
        .unwrap();
    let report = controller.reconcile_all().await;
    assert!(report.reconciled.contains(&good), "{report:?}");
    assert_eq!(
        metric(passes, &[("cluster", &good), ("outcome", "ok")]),
        2.0
    );
    assert_eq!(
        metric(passes, &[("cluster", &dead), ("outcome", "error")]),
        2.0
    );
    assert_eq!(metric(applied, &[("cluster", &good)]), 1.0);
    assert_eq!(metric(removed, &[("cluster", &good)]), 1.0);
    assert_eq!(
        metric(
            "palisade_reconcile_pass_duration_seconds_count",
            &[("cluster", &good)]
        ),
        2.0
    );

    let cluster = ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
        .await
        .unwrap();
    cluster.remove_installation(&installation).await.unwrap();
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
    add_cluster(&store, &key, &dead, &refused, &boundary).await;
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
