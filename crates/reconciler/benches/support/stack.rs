//! The API and the reconcile loop on one SQLite store, in this process, as `palisade serve`
//! runs them: shared by the benchmarks that measure what a user sees through the API.

use std::sync::Arc;

use palisade_policy::Catalog;
use palisade_reconciler::{Controller, Settings};
use palisade_server::SealingKey;
use reqwest::StatusCode;
use serde_json::Value;

/// The API and the reconcile loop on one SQLite store, as `palisade serve` runs them.
pub struct Stack {
    pub url: String,
    /// The controller whose loop runs in `tasks`, for benches that call it directly.
    #[allow(dead_code, reason = "some benches sharing this file do not read it")]
    pub controller: Arc<Controller>,
    pub token: String,
    http: reqwest::Client,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Drop for Stack {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Stack {
    pub async fn start(settings: Settings) -> Stack {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
        let store = palisade_store::connect(&url).await.unwrap();
        palisade_app::caller::bootstrap_admin(store.as_ref(), dir.path())
            .await
            .unwrap();
        let token = std::fs::read_to_string(dir.path().join("admin.token"))
            .unwrap()
            .trim()
            .to_owned();
        let key = SealingKey::random();
        let installation = store.installation_id("bench").await.unwrap();
        let controller = Controller::new(
            palisade_app::App::new(store.clone(), Catalog::builtin(), key.clone()),
            installation,
            settings,
        );
        let mut tasks = vec![tokio::spawn(
            Arc::clone(&controller).run(std::future::pending()),
        )];
        let application = palisade_app::App::new(store, Catalog::builtin(), key)
            .with_clusters(Arc::new(palisade_reconciler::KubeClusters));
        let state = palisade_server::AppState::of(application);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let app = palisade_server::app(state);
        tasks.push(tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        }));
        Stack {
            url: format!("http://{address}"),
            controller,
            token,
            http: reqwest::Client::new(),
            tasks,
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

    /// Registers a cluster as `name`, attaches it to `boundary` and creates the boundary's
    /// `namespace` there, through the API.
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
