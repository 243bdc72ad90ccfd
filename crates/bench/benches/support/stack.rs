//! The API and the reconcile loop on one SQLite store, in this process, started as `palisade
//! serve` starts them (`palisade_runtime`): shared by the benchmarks that measure what a user
//! sees through the API.

use std::sync::Arc;
use std::time::{Duration, Instant};

use palisade_reconciler::Controller;
use palisade_runtime::{Runtime, RuntimeConfig};
use reqwest::StatusCode;
use serde_json::Value;

/// The API and the reconcile loop on one SQLite store, as `palisade serve` runs them.
pub struct Stack {
    pub url: String,
    /// The controller whose loop the runtime runs, for benches that call it directly.
    #[allow(dead_code, reason = "some benches sharing this file do not read it")]
    pub controller: Arc<Controller>,
    pub token: String,
    http: reqwest::Client,
    /// Dropped with the stack: its tasks are aborted.
    _runtime: Runtime,
    _dir: tempfile::TempDir,
}

impl Stack {
    /// A stack with `palisade serve`'s defaults, without write rate limits, in a temporary
    /// directory; `LAYOUT` (`auto`, the default, or a layout's name) is its
    /// `--admission-layout`.
    pub async fn start() -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RuntimeConfig {
            data_dir: dir.path().to_owned(),
            token_writes: None,
            boundary_writes: None,
            ..RuntimeConfig::default()
        };
        if let (Ok(layout), Some(reconciler)) = (std::env::var("LAYOUT"), &mut config.reconciler) {
            reconciler.layout = layout
                .parse()
                .expect("LAYOUT: auto, per-policy, per-boundary or shared");
        }
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let runtime = Runtime::start_on(listener, config).await.unwrap();
        let token = std::fs::read_to_string(dir.path().join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        Stack {
            url: format!("http://{}", runtime.address()),
            controller: Arc::clone(runtime.controller().unwrap()),
            token,
            http: reqwest::Client::new(),
            _runtime: runtime,
            _dir: dir,
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

    /// Waits until the API reports `policy` of `boundary` `enforced` in `clusters` clusters,
    /// asking every `poll`, for at most `timeout`.
    #[allow(dead_code, reason = "some benches sharing this file do not call it")]
    pub async fn wait_enforced(
        &self,
        boundary: &str,
        policy: &str,
        clusters: usize,
        poll: Duration,
        timeout: Duration,
    ) {
        let started = Instant::now();
        loop {
            let path = format!("/v1/boundaries/{boundary}/policies/{policy}");
            let body = self.ok("GET", &path, None).await;
            let enforced = body["status"]["clusters"].as_array().map_or(0, |c| {
                c.iter().filter(|c| c["status"] == "enforced").count()
            });
            if enforced == clusters {
                return;
            }
            assert!(started.elapsed() < timeout, "not enforced: {body}");
            tokio::time::sleep(poll).await;
        }
    }

    /// Registers a cluster as `name`, attaches it to `boundary` and creates the boundary's
    /// `namespace` there, through the API.
    #[allow(dead_code, reason = "some benches sharing this file do not call it")]
    pub async fn add_cluster(&self, name: &str, kubeconfig: &str, boundary: &str, namespace: &str) {
        self.ok(
            "PUT",
            &format!("/v1/clusters/{name}"),
            Some(serde_json::json!({"kubeconfig": kubeconfig})),
        )
        .await;
        self.ok(
            "PUT",
            &format!("/v1/boundaries/{boundary}/clusters/{name}"),
            None,
        )
        .await;
        self.ok(
            "PUT",
            &format!("/v1/boundaries/{boundary}/clusters/{name}/namespaces/{namespace}"),
            None,
        )
        .await;
    }
}
