//! The whole path, as `palisade serve` runs it: the HTTP API and the reconcile loop on one
//! store, against real API servers. A policy `PUT` reaches the cluster through the store's
//! change feed, the API server denies a real create with the policy's message, statuses and
//! versions show up in the API, namespaces are labelled through it, and deleting a cluster
//! removes palisade's objects.

use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::api::PostParams;
use kube::Api;
use palisade_app::{SealingKey, SharedStore};
use palisade_policy::Catalog;
use palisade_reconciler::{Controller, Layout, LayoutChoice, Settings};
use palisade_runtime::{ReconcilerConfig, RuntimeConfig};
use palisade_testkit::control_plane::{unique_name, ControlPlane};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::support::{boundary_label, no_latest, on_both_versions, plane, requires_label, retry};

/// The API and the reconcile loop on one store, started as `palisade serve` starts them
/// (`palisade_runtime`).
pub struct Stack {
    pub url: String,
    #[allow(dead_code, reason = "kept for tests that inspect the store directly")]
    pub store: SharedStore,
    pub installation: String,
    pub key: SealingKey,
    pub token: String,
    /// Its reconciler's replica name (`reconciled_by`).
    pub replica: String,
    http: reqwest::Client,
    /// Dropped with the stack: its tasks are aborted.
    _runtime: palisade_runtime::Runtime,
    /// Its data directory (admin token, encryption key).
    dir: tempfile::TempDir,
}

impl Stack {
    /// A stack on a SQLite store in a temporary directory, or on `database` (PostgreSQL).
    pub async fn start(database: Option<String>) -> Stack {
        Stack::start_with(database, None).await
    }

    /// With `replica_of`, a second replica of that stack: same store, key and admin token.
    pub async fn start_with(database: Option<String>, replica_of: Option<&Stack>) -> Stack {
        Stack::start_full(database, replica_of, Layout::default()).await
    }

    /// A stack on SQLite whose reconciler writes policies in `layout`.
    pub async fn start_in(layout: Layout) -> Stack {
        Stack::start_full(None, None, layout).await
    }

    /// [`Stack::start_in`] whose reconciler repairs `free_repairs` changes of one object a
    /// minute at once (a benchmark that deletes one object 50 times).
    pub async fn start_repairing(layout: Layout, free_repairs: usize) -> Stack {
        Stack::start_tuned(None, None, layout, free_repairs).await
    }

    async fn start_full(
        database: Option<String>,
        replica_of: Option<&Stack>,
        layout: Layout,
    ) -> Stack {
        Stack::start_tuned(
            database,
            replica_of,
            layout,
            ReconcilerConfig::default().free_repairs,
        )
        .await
    }

    async fn start_tuned(
        database: Option<String>,
        replica_of: Option<&Stack>,
        layout: Layout,
        free_repairs: usize,
    ) -> Stack {
        // The loop's logs in the test's output when RUST_LOG asks for them (none otherwise).
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = tempfile::tempdir().unwrap();
        if let Some(first) = replica_of {
            // Replicas share the encryption key, as they would a mounted secret.
            std::fs::copy(
                first.dir.path().join("encryption.key"),
                dir.path().join("encryption.key"),
            )
            .unwrap();
        }
        let replica = unique_name("replica");
        let config = RuntimeConfig {
            database,
            data_dir: dir.path().to_owned(),
            // No write limits, so that tests may write as fast as they like.
            token_writes: None,
            boundary_writes: None,
            reconciler: Some(ReconcilerConfig {
                replica: replica.clone(),
                layout: LayoutChoice::Fixed(layout),
                free_repairs,
                ..ReconcilerConfig::default()
            }),
            ..RuntimeConfig::default()
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let runtime = palisade_runtime::Runtime::start_on(listener, config)
            .await
            .unwrap();
        let token = match replica_of {
            Some(first) => first.token.clone(),
            None => std::fs::read_to_string(dir.path().join("admin.token"))
                .unwrap()
                .trim()
                .to_owned(),
        };
        let controller = runtime.controller().unwrap();
        Stack {
            url: format!("http://{}", runtime.address()),
            store: runtime.store().clone(),
            installation: controller.installation().to_owned(),
            key: runtime.app().sealing.clone(),
            token,
            replica,
            http: reqwest::Client::new(),
            _runtime: runtime,
            dir,
        }
    }

    /// Sends a request; the status and the JSON body (`Null` when empty).
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let bytes = response.bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        (status, body)
    }

    pub async fn ok(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let (status, body) = self.call(method, path, body).await;
        assert!(status.is_success(), "{method} {path}: {status} {body}");
        body
    }

    /// Registers a control plane as cluster `name` and attaches it to `boundary`.
    pub async fn add_cluster(&self, name: &str, kubeconfig: &str, boundary: &str) {
        self.ok(
            "PUT",
            &format!("/v1/clusters/{name}"),
            Some(json!({"kubeconfig": kubeconfig})),
        )
        .await;
        self.ok(
            "PUT",
            &format!("/v1/boundaries/{boundary}/clusters/{name}"),
            None,
        )
        .await;
    }

    /// Makes boundary `boundary` through the API.
    pub async fn create_boundary(&self, boundary: &str) {
        self.ok("POST", "/v1/boundaries", Some(json!({"name": boundary})))
            .await;
    }

    /// A new boundary, named from `prefix`, with a control plane attached as cluster
    /// `cluster`: its name.
    pub async fn new_boundary(&self, prefix: &str, cluster: &str, kubeconfig: &str) -> String {
        let boundary = unique_name(prefix);
        self.create_boundary(&boundary).await;
        self.add_cluster(cluster, kubeconfig, &boundary).await;
        boundary
    }

    /// A new namespace of `boundary` in `cluster`, named from `prefix` and made through the
    /// API: its name.
    pub async fn new_namespace(&self, boundary: &str, cluster: &str, prefix: &str) -> String {
        let namespace = unique_name(prefix);
        self.add_namespace(boundary, cluster, &namespace).await;
        namespace
    }

    /// Hands `namespace` of `cluster` to `boundary` through the API (made when missing); the
    /// answer.
    pub async fn add_namespace(&self, boundary: &str, cluster: &str, namespace: &str) -> Value {
        self.ok("PUT", &namespace_path(boundary, cluster, namespace), None)
            .await
    }

    /// Saves a policy's spec through the API; the answer (with `status`).
    pub async fn put_policy(&self, boundary: &str, policy: &str, spec: Value) -> Value {
        self.ok("PUT", &policy_path(boundary, policy), Some(spec))
            .await
    }

    /// Saves a policy's spec through the API and waits until it is enforced in `cluster`.
    pub async fn enforce_policy(&self, boundary: &str, cluster: &str, policy: &str, spec: Value) {
        self.put_policy(boundary, policy, spec).await;
        self.wait_enforced(boundary, policy, cluster).await;
    }

    /// Deletes a policy through the API.
    pub async fn delete_policy(&self, boundary: &str, policy: &str) {
        self.ok("DELETE", &policy_path(boundary, policy), None)
            .await;
    }

    /// The API's preview of the saved version of a policy.
    pub async fn preview(&self, boundary: &str, policy: &str) -> Value {
        let path = format!("{}/preview", policy_path(boundary, policy));
        self.ok("POST", &path, None).await
    }

    /// Waits until the policy's status in `cluster` is `enforced`.
    pub async fn wait_enforced(&self, boundary: &str, policy: &str, cluster: &str) {
        self.wait_status(boundary, policy, cluster, |s| s == "enforced")
            .await;
    }

    /// The policy's first status in `cluster` that is not `pending`.
    pub async fn settled_status(&self, boundary: &str, policy: &str, cluster: &str) -> String {
        self.wait_status(boundary, policy, cluster, |s| s != "pending")
            .await
    }

    /// Waits (at most 30 s) until `cluster`, as the API shows it, satisfies `done`: that answer.
    pub async fn wait_cluster(
        &self,
        cluster: &str,
        what: &str,
        done: impl Fn(&Value) -> bool,
    ) -> Value {
        let path = format!("/v1/clusters/{cluster}");
        let every = Duration::from_millis(50);
        retry(what, Duration::from_secs(30), every, || async {
            let body = self.ok("GET", &path, None).await;
            if done(&body) {
                Ok(body)
            } else {
                Err(body.to_string())
            }
        })
        .await
        .0
    }

    /// The status of `policy` in `cluster`, as the API shows it.
    pub async fn policy_status(
        &self,
        boundary: &str,
        policy: &str,
        cluster: &str,
    ) -> Option<String> {
        let (status, body) = self.call("GET", &policy_path(boundary, policy), None).await;
        if status != StatusCode::OK {
            return None;
        }
        body["status"]["clusters"]
            .as_array()?
            .iter()
            .find(|c| c["cluster"] == cluster)
            .and_then(|c| c["status"].as_str())
            .map(str::to_owned)
    }

    /// Waits until the policy's status in `cluster` satisfies `done` (at most 60 s).
    pub async fn wait_status(
        &self,
        boundary: &str,
        policy: &str,
        cluster: &str,
        done: impl Fn(&str) -> bool,
    ) -> String {
        let started = Instant::now();
        loop {
            let status = self.policy_status(boundary, policy, cluster).await;
            if let Some(status) = status.as_deref().filter(|s| done(s)) {
                return status.to_owned();
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{boundary}/{policy} in {cluster}: status still {status:?} after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The API path of `policy` of `boundary`.
pub fn policy_path(boundary: &str, policy: &str) -> String {
    format!("/v1/boundaries/{boundary}/policies/{policy}")
}

/// The API path of `namespace` of `cluster` in `boundary`.
pub fn namespace_path(boundary: &str, cluster: &str, namespace: &str) -> String {
    format!("/v1/boundaries/{boundary}/clusters/{cluster}/namespaces/{namespace}")
}

/// A reconcile loop on `store` with the default settings, with no API in front of it.
pub fn controller(store: &SharedStore, key: &SealingKey, installation: &str) -> Arc<Controller> {
    Controller::new(
        palisade_app::App::new(store.clone(), Catalog::builtin(), key.clone()),
        installation.to_owned(),
        Settings {
            layout: LayoutChoice::Fixed(Layout::default()),
            replica: unique_name("replica"),
            ..Settings::default()
        },
    )
}

/// A pod that violates the `team` label rule, with `image`.
fn unlabelled_pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1.0"}]},
    }))
    .unwrap()
}

const TEAM_LABEL_MESSAGE: &str = "Policy 'team-label' (RequiredLabels) requires the label team.";

async fn vap_exists(plane: &ControlPlane, name: &str) -> bool {
    let api: Api<ValidatingAdmissionPolicy> = Api::all(plane.client().await);
    api.get_opt(name).await.unwrap().is_some()
}

on_both_versions!(serve_installs_enforces_and_reports);

async fn serve_installs_enforces_and_reports(version: &str) {
    let plane = plane(version).await;
    let stack = Stack::start(None).await;
    let namespace = unique_name("ns");
    let boundary = stack
        .new_boundary("shop", "c1", plane.kubeconfig_yaml())
        .await;

    // The cluster's version and admission, read by the reconciler.
    let started = Instant::now();
    let cluster = loop {
        let body = stack
            .ok("GET", &format!("/v1/boundaries/{boundary}/clusters"), None)
            .await;
        let cluster = body["items"][0].clone();
        if cluster.get("kubernetes_version").is_some() {
            break cluster;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "never probed: {body}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        cluster["kubernetes_version"],
        format!("v{}", plane.version())
    );
    assert_eq!(cluster["admission"], json!({"enforced": true}));

    // A namespace labelled through the API.
    let (status, body) = stack
        .call("PUT", &namespace_path(&boundary, "c1", &namespace), None)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["action"], "created");
    let namespaces: Api<Namespace> = Api::all(plane.client().await);
    let labelled = namespaces.get(&namespace).await.unwrap();
    assert_eq!(
        labelled.metadata.labels.unwrap()["palisade.dev/boundary"],
        boundary
    );
    // Another boundary cannot take it.
    let other = unique_name("other");
    stack.create_boundary(&other).await;
    stack
        .ok("PUT", &format!("/v1/boundaries/{other}/clusters/c1"), None)
        .await;
    let (status, body) = stack
        .call(
            "PUT",
            &namespace_path(&other, "c1", &namespace),
            Some(json!({"adopt": true})),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(
        body["error"]["message"],
        format!("namespace '{namespace}' in cluster 'c1' belongs to boundary '{boundary}'")
    );

    // A policy saved through the API: pending, then enforced, then a real create is denied.
    let put_at = Instant::now();
    let saved = stack
        .put_policy(&boundary, "team-label", requires_label("team"))
        .await;
    assert!(
        saved["status"]["clusters"][0]["status"] == "pending"
            || saved["status"]["clusters"][0]["status"] == "enforced",
        "{saved}"
    );
    let status = stack
        .wait_status(&boundary, "team-label", "c1", |s| {
            s != "pending" && s != "installed"
        })
        .await;
    assert_eq!(status, "enforced");
    let pods: Api<Pod> = Api::namespaced(plane.client().await, &namespace);
    let denied = pods
        .create(&PostParams::default(), &unlabelled_pod("p1"))
        .await
        .expect_err("the API server denies the unlabelled pod");
    let kube::Error::Api(answer) = denied else {
        panic!("expected the API server's refusal, got {denied:?}");
    };
    assert_eq!(answer.code, 422);
    assert!(
        answer.message.ends_with(TEAM_LABEL_MESSAGE),
        "{}",
        answer.message
    );
    eprintln!(
        "{version}: PUT to enforced status and a denied create: {:?}",
        put_at.elapsed()
    );

    // A policy scoped to another cluster is not installed here, and its object is admitted.
    stack
        .put_policy(
            &boundary,
            "elsewhere",
            json!({"scope": {"clusters": ["c2"]}, "rules": [{"disallowLatestTag": {}}]}),
        )
        .await;
    stack
        .put_policy(
            &boundary,
            "sync",
            json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io", "docker.io"]}}]}),
        )
        .await;
    // Its probe complies with team-label, so team-label's denial does not hide its own.
    assert_eq!(
        stack.settled_status(&boundary, "sync", "c1").await,
        "enforced"
    );
    let elsewhere = stack
        .ok("GET", &policy_path(&boundary, "elsewhere"), None)
        .await;
    assert_eq!(elsewhere["status"], json!({"clusters": []}));
    assert!(!vap_exists(plane, &format!("elsewhere.{boundary}.palisade.dev")).await);
    let mut latest = unlabelled_pod("latest");
    latest.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
    latest.spec.as_mut().unwrap().containers[0].image =
        Some("docker.io/library/nginx:latest".into());
    pods.create(&PostParams::default(), &latest)
        .await
        .expect("admitted: the latest-tag policy is scoped to another cluster");
    stack.delete_policy(&boundary, "sync").await;

    // A plan-only policy is never installed: no cluster entries.
    let plans = stack
        .put_policy(
            &boundary,
            "sizes",
            json!({"rules": [{"allowedComputePlans": {"plans": ["small"]}}]}),
        )
        .await;
    assert_eq!(plans["status"], json!({"clusters": []}));

    // Deleting the policy removes its objects.
    let object = format!("team-label.{boundary}.palisade.dev");
    assert!(vap_exists(plane, &object).await);
    stack.delete_policy(&boundary, "team-label").await;
    let started = Instant::now();
    while vap_exists(plane, &object).await {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{object} still there"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The API server drops a deleted policy from its cache within about a second.
    let started = Instant::now();
    while let Err(error) = pods
        .create(&PostParams::default(), &unlabelled_pod("p1"))
        .await
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still refused 30 s after the policy was deleted: {error}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // A boundary with namespaces cannot go; releasing the namespace removes the label.
    let (status, _) = stack
        .call("DELETE", &namespace_path(&other, "c1", &namespace), None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    stack
        .ok("DELETE", &namespace_path(&boundary, "c1", &namespace), None)
        .await;
    assert_eq!(boundary_label(&namespaces, &namespace).await, None);

    // Deleting the cluster removes the guard and every object of this installation.
    stack.put_policy(&boundary, "no-latest", no_latest()).await;
    stack.settled_status(&boundary, "no-latest", "c1").await;
    let guard = palisade_vap::guard_name(&stack.installation);
    assert!(vap_exists(plane, &guard).await);
    let (status, body) = stack.call("DELETE", "/v1/clusters/c1", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert!(!vap_exists(plane, &guard).await);
    assert!(!vap_exists(plane, &format!("no-latest.{boundary}.palisade.dev")).await);
}

/// An unreachable cluster: its policies say why, the reachable cluster is unaffected, and
/// deleting it needs `?force=true`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_cluster_is_reported_and_others_are_unaffected() {
    let plane = plane("1.37").await;
    let stack = Stack::start(None).await;
    let boundary = stack
        .new_boundary("shop", "good", plane.kubeconfig_yaml())
        .await;
    // The same credentials, but nothing listens on the port.
    let dead = plane
        .kubeconfig_yaml()
        .lines()
        .map(|line| {
            if line.trim_start().starts_with("server:") {
                "    server: https://127.0.0.1:9".to_owned()
            } else {
                line.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    stack.add_cluster("dead", &dead, &boundary).await;
    stack.put_policy(&boundary, "no-latest", no_latest()).await;
    let good = stack.settled_status(&boundary, "no-latest", "good").await;
    assert_eq!(good, "installed", "no namespace to probe in: installed");
    let dead_status = stack.settled_status(&boundary, "no-latest", "dead").await;
    // The cause in words, not the client library's wrapper text.
    assert_eq!(
        dead_status, "error: cannot reach the API server: connection refused",
        "{dead_status}"
    );
    let cluster = stack.ok("GET", "/v1/clusters/dead", None).await;
    assert_eq!(
        cluster["last_error"], "cannot reach the API server: connection refused",
        "{cluster}"
    );
    assert!(stack
        .ok("GET", "/v1/clusters/good", None)
        .await
        .get("last_error")
        .is_none());

    let (status, body) = stack.call("DELETE", "/v1/clusters/dead", None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(body["error"]["message"].as_str().unwrap().starts_with(
        "cluster 'dead': palisade's objects cannot be removed \
             (cannot reach the API server: connection refused); "
    ));
    let (status, _) = stack
        .call("DELETE", "/v1/clusters/dead?force=true", None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    stack.call("DELETE", "/v1/clusters/good", None).await;
}

/// The replica that reconciles `c1`, as `stack`'s API shows it.
async fn holder(stack: &Stack) -> Option<String> {
    stack.ok("GET", "/v1/clusters/c1", None).await["reconciled_by"]
        .as_str()
        .map(str::to_owned)
}

/// Two replicas on one PostgreSQL database: one of them reconciles the cluster (its
/// advisory lock), shown as `reconciled_by`; a policy saved through the other replica's API
/// reaches the cluster (NOTIFY); when the holder goes, the other takes the cluster over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_on_postgres_hand_a_cluster_over() {
    let url = palisade_testkit::postgres::test_database_url();
    let plane = plane("1.37").await;
    let first = Stack::start(Some(url.clone())).await;
    let boundary = first
        .new_boundary("shop", "c1", plane.kubeconfig_yaml())
        .await;
    let namespace = first.new_namespace(&boundary, "c1", "ns").await;
    first.put_policy(&boundary, "no-latest", no_latest()).await;
    // The first replica's reconciler is active.
    assert_eq!(
        first.settled_status(&boundary, "no-latest", "c1").await,
        "enforced"
    );
    assert!(holder(&first).await.is_some(), "the first replica holds c1");
    let second = Stack::start_with(Some(url.clone()), Some(&first)).await;
    assert_eq!(second.installation, first.installation);
    // One cluster, two replicas: the placement gives it to one of them (which one is the
    // placement's hash), seen alike through either API.
    let started = Instant::now();
    let holding = loop {
        let (a, b) = (holder(&first).await, holder(&second).await);
        if a.is_some() && a == b {
            // Still the same a moment later: settled.
            tokio::time::sleep(Duration::from_millis(1500)).await;
            if holder(&first).await == a {
                break a.unwrap_or_default();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "no single holder of c1 within 20 s: {a:?} / {b:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // Saved through either replica's API, installed by the holder.
    second
        .put_policy(&boundary, "team-label", requires_label("team"))
        .await;
    assert_eq!(
        first.settled_status(&boundary, "team-label", "c1").await,
        "enforced"
    );

    // The holder goes; the other takes over and installs the next change.
    let (gone_stack, survivor) = if first.replica == holding {
        (first, second)
    } else {
        (second, first)
    };
    let gone = Instant::now();
    drop(gone_stack);
    survivor
        .put_policy(&boundary, "team-label", requires_label("owner"))
        .await;
    assert_eq!(
        survivor.settled_status(&boundary, "team-label", "c1").await,
        "enforced"
    );
    eprintln!(
        "takeover: the holder gone to the other replica's change enforced in {:?}",
        gone.elapsed()
    );
    let now_holding = holder(&survivor).await.expect("the survivor holds c1");
    assert_ne!(now_holding, holding);
    let pods: Api<Pod> = Api::namespaced(plane.client().await, &namespace);
    let mut pod = unlabelled_pod("p2");
    pod.metadata.labels = Some([("team".to_owned(), "a".to_owned())].into());
    let denied = pods
        .create(&PostParams::default(), &pod)
        .await
        .expect_err("the new version (label owner) is enforced");
    assert!(
        denied.to_string().contains("requires the label owner"),
        "{denied}"
    );
    survivor
        .call("DELETE", "/v1/clusters/c1?force=true", None)
        .await;
}
