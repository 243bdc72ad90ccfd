//! Three `palisade serve` processes on one PostgreSQL database share three clusters out, one
//! each, and show which replica reconciles each (`reconciled_by`, `/metrics`). While a
//! policy changes every 300 ms, one replica is killed with SIGKILL: the clusters it held are
//! taken over by the others, and afterwards every cluster enforces the last version, as the
//! store says (statuses `enforced`), with nothing of an earlier version left enforcing. A
//! fourth replica then joins and takes a cluster, one each again.
//!
//! Real processes, real control planes (etcd + kube-apiserver 1.37, one per cluster), a real
//! PostgreSQL server. Prints the takeover time; asserts only what a user sees.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{free_port, serve_command};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use palisade_testkit::control_plane::ControlPlane;
use serde_json::{json, Value};

const BOUNDARY: &str = "fleet";
const POLICY: &str = "label";
const NAMESPACE: &str = "fleet-probe";
const CLUSTERS: usize = 3;

struct Replica {
    name: String,
    url: String,
    child: Child,
    log: PathBuf,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Replica {
    fn start(name: &str, database: &str, data: &Path, logs: &Path) -> Replica {
        let port = free_port();
        let log = logs.join(format!("{name}.log"));
        let child = serve_command(port, data)
            .args(["--database", database, "--replica", name])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Replica {
            name: name.to_owned(),
            url: format!("http://127.0.0.1:{port}"),
            child,
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

struct Palisade {
    http: reqwest::Client,
    token: String,
}

impl Palisade {
    async fn call(&self, base: &str, method: &str, path: &str, body: Option<Value>) -> Value {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method.clone(), format!("{base}{path}"))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(20));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        assert!(status.is_success(), "{method} {path}: {status} {text}");
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }

    /// Each cluster's status of the policy.
    async fn statuses(&self, base: &str) -> BTreeMap<String, String> {
        let body = self.call(base, "GET", &policy_path(), None).await;
        body["status"]["clusters"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["cluster"].as_str().unwrap_or_default().to_owned(),
                    c["status"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect()
    }

    /// Which replica reconciles each cluster (absent: none now).
    async fn holders(&self, base: &str) -> BTreeMap<String, Option<String>> {
        let body = self.call(base, "GET", "/v1/clusters", None).await;
        body["items"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["name"].as_str().unwrap_or_default().to_owned(),
                    c["reconciled_by"].as_str().map(str::to_owned),
                )
            })
            .collect()
    }

    async fn wait_enforced(&self, base: &str, what: &str) -> Duration {
        let started = Instant::now();
        loop {
            let statuses = self.statuses(base).await;
            if statuses.len() == CLUSTERS && statuses.values().all(|s| s == "enforced") {
                return started.elapsed();
            }
            assert!(
                started.elapsed() < Duration::from_secs(90),
                "{what}: not enforced everywhere within 90 s: {statuses:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn spec(key: &str) -> Value {
    json!({"rules": [{"requiredLabels": {"labels": [{"key": key}]}}]})
}

fn pod(labels: &[&str]) -> Pod {
    serde_json::from_value(json!({
        "metadata": {
            "name": "fleet-probe",
            "labels": labels.iter().map(|k| (k.to_string(), "x")).collect::<BTreeMap<_, _>>(),
        },
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1.0"}]},
    }))
    .unwrap()
}

/// A dry-run create of a Pod with `labels` in `plane`: the denial's text, or `None`.
async fn denial(plane: &ControlPlane, labels: &[&str]) -> Option<String> {
    let pods: Api<Pod> = Api::namespaced(plane.client().await, NAMESPACE);
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    pods.create(&params, &pod(labels))
        .await
        .err()
        .map(|e| e.to_string())
}

fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// The path of the fleet's policy.
fn policy_path() -> String {
    format!("/v1/boundaries/{BOUNDARY}/policies/{POLICY}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_s_clusters_are_taken_over() {
    let planes: Vec<ControlPlane> = (0..CLUSTERS).map(|_| ControlPlane::start("1.37")).collect();
    let database = palisade_testkit::postgres::test_database_url();
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let names = ["fleet-a", "fleet-b", "fleet-c"];
    let http = reqwest::Client::new();
    let ready = |url: String| {
        let http = http.clone();
        async move {
            let started = Instant::now();
            while !http
                .get(format!("{url}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                assert!(
                    started.elapsed() < Duration::from_secs(60),
                    "{url} not ready"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    // The first makes the key and the admin token; the others share its data directory.
    let mut replicas = vec![Replica::start(names[0], &database, &data, dir.path())];
    ready(replicas[0].url.clone()).await;
    for name in &names[1..] {
        replicas.push(Replica::start(name, &database, &data, dir.path()));
    }
    for replica in &replicas {
        ready(replica.url.clone()).await;
    }
    let token = std::fs::read_to_string(data.join("admin.token"))
        .unwrap()
        .trim()
        .to_owned();
    let api = Palisade {
        http: http.clone(),
        token,
    };
    let first = replicas[0].url.clone();
    api.call(
        &first,
        "POST",
        "/v1/boundaries",
        Some(json!({"name": BOUNDARY})),
    )
    .await;
    for (i, plane) in planes.iter().enumerate() {
        let cluster = format!("c{i}");
        api.call(
            &first,
            "PUT",
            &format!("/v1/clusters/{cluster}"),
            Some(json!({"kubeconfig": plane.kubeconfig_yaml()})),
        )
        .await;
        api.call(
            &first,
            "PUT",
            &format!("/v1/boundaries/{BOUNDARY}/clusters/{cluster}"),
            None,
        )
        .await;
        api.call(
            &first,
            "PUT",
            &format!("/v1/boundaries/{BOUNDARY}/clusters/{cluster}/namespaces/{NAMESPACE}"),
            None,
        )
        .await;
    }
    api.call(&first, "PUT", &policy_path(), Some(spec("team-0")))
        .await;
    api.wait_enforced(&first, "the first version").await;

    // One cluster each, shown alike by every replica.
    let started = Instant::now();
    let holders = loop {
        let holders = api.holders(&first).await;
        let distinct: BTreeSet<_> = holders.values().flatten().collect();
        if holders.len() == CLUSTERS && distinct.len() == CLUSTERS {
            break holders;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "not one cluster each within 30 s: {holders:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!("holders: {holders:?}");
    for replica in &replicas[1..] {
        assert_eq!(api.holders(&replica.url).await, holders);
    }

    // Changes every 300 ms through a replica that stays.
    let victim_name = holders["c0"].clone().unwrap();
    let victim = replicas.iter().position(|r| r.name == victim_name).unwrap();
    let survivors: Vec<String> = replicas
        .iter()
        .filter(|r| r.name != victim_name)
        .map(|r| r.name.clone())
        .collect();
    let through = replicas
        .iter()
        .find(|r| r.name != victim_name)
        .unwrap()
        .url
        .clone();
    let api = Arc::new(api);
    let stop = Arc::new(AtomicBool::new(false));
    let last = Arc::new(AtomicUsize::new(0));
    let changes = {
        let (api, stop, last, through) = (api.clone(), stop.clone(), last.clone(), through.clone());
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                api.call(
                    &through,
                    "PUT",
                    &policy_path(),
                    Some(spec(&format!("team-{i}"))),
                )
                .await;
                last.store(i, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    replicas[victim].child.kill().unwrap();
    replicas[victim].child.wait().unwrap();
    let killed = Instant::now();
    let taken_over = loop {
        let holders = api.holders(&through).await;
        let all_held = holders
            .values()
            .all(|h| h.as_ref().is_some_and(|h| survivors.contains(h)));
        if all_held {
            break killed.elapsed();
        }
        assert!(
            killed.elapsed() < Duration::from_secs(30),
            "clusters of {victim_name} not taken over within 30 s: {holders:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    eprintln!("SIGKILL to {victim_name}: its clusters held by the others after {taken_over:?}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    stop.store(true, Ordering::SeqCst);
    changes.await.unwrap();
    let changed = last.load(Ordering::SeqCst);
    let took = api.wait_enforced(&through, "the last change").await;
    eprintln!(
        "{changed} changes; the last one enforced everywhere {took:?} after the changes stopped"
    );

    // What the store says is what each cluster does: the last version denies, the one
    // before does not.
    let previous = format!("team-{}", changed.saturating_sub(1));
    let latest = format!("team-{changed}");
    for plane in &planes {
        let denied = denial(plane, &[previous.as_str()]).await;
        assert!(
            denied
                .as_deref()
                .is_some_and(|d| d.contains(&format!("requires the label {latest}"))),
            "{denied:?}"
        );
        assert_eq!(denial(plane, &[latest.as_str()]).await, None);
    }
    // Every cluster held, each by one survivor; their counts add up.
    let mut held = 0.0;
    for replica in replicas.iter().filter(|r| r.name != victim_name) {
        let text = api
            .http
            .get(format!("{}/metrics", replica.url))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        held += metric(&text, "palisade_reconcile_clusters_held").unwrap_or(0.0);
        assert_eq!(
            metric(&text, "palisade_reconcile_fleet_members"),
            Some(2.0),
            "{}",
            replica.log()
        );
    }
    assert_eq!(held, CLUSTERS as f64);

    // A replica joins: it takes a cluster from whoever holds two, and the three hold one each
    // again.
    let joined = Instant::now();
    replicas.push(Replica::start("fleet-d", &database, &data, dir.path()));
    ready(replicas[replicas.len() - 1].url.clone()).await;
    let mut expected: BTreeSet<String> = survivors.iter().cloned().collect();
    expected.insert("fleet-d".to_owned());
    loop {
        let holders = api.holders(&through).await;
        let distinct: BTreeSet<String> = holders.values().flatten().cloned().collect();
        if holders.values().all(Option::is_some) && distinct == expected {
            break;
        }
        assert!(
            joined.elapsed() < Duration::from_secs(30),
            "fleet-d took no cluster within 30 s: {holders:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "fleet-d joined: one cluster each again {:?} after its start",
        joined.elapsed()
    );
    // Enforcement holds through the move: a change after it is enforced everywhere.
    api.call(&through, "PUT", &policy_path(), Some(spec("team-joined")))
        .await;
    api.wait_enforced(&through, "the change after the join")
        .await;
    for plane in &planes {
        let denied = denial(plane, &[latest.as_str()]).await;
        assert!(
            denied
                .as_deref()
                .is_some_and(|d| d.contains("requires the label team-joined")),
            "{denied:?}"
        );
    }
}
