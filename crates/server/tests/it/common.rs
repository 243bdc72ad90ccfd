//! Test harness: an app on a fresh store (SQLite in a temp dir, or a fresh PostgreSQL
//! database), called in-process with `oneshot`, plus tokens of every role.

#![allow(dead_code, reason = "each test binary uses part of the harness")]

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use palisade_api_types::view::WorkloadDetail;
use palisade_app::ports::{
    ClusterError, Clusters, LabelOutcome, Labelled, ScanInfo, Visit, WorkloadTarget,
};
use palisade_policy::{Catalog, Name};
use palisade_server::SealingKey;
use palisade_server::{app, AppState};
use palisade_store::SharedStore;
use serde_json::{json, Value};
use std::sync::Arc;
use tower::ServiceExt;

/// A kubeconfig SPEC 4.1 accepts: one cluster by https, one user by token, one context.
pub const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\nusers: [{name: u, user: {token: abc}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n";

pub struct TestApp {
    pub state: AppState,
    /// The store under the app, for tests that look at what it recorded.
    pub store: SharedStore,
    pub router: Router,
    pub admin: String,
    pub dir: tempfile::TempDir,
    pub url: String,
}

#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }
    pub fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }
    /// Asserts the status `status` and the error message `message`.
    pub fn assert_error(&self, status: StatusCode, message: impl AsRef<str>) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.message(), message.as_ref(), "{self:?}");
    }

    /// Asserts the status `status`, the error code `code` and the message `message`.
    pub fn assert_refusal(&self, status: StatusCode, code: &str, message: impl AsRef<str>) {
        assert_eq!(self.status, status, "{self:?}");
        assert_eq!(self.code(), code, "{self:?}");
        assert_eq!(self.message(), message.as_ref(), "{self:?}");
    }

    /// Asserts the status `status` and an error message that starts with `prefix`.
    pub fn assert_error_starts(&self, status: StatusCode, prefix: &str) {
        assert_eq!(self.status, status, "{self:?}");
        assert!(self.message().starts_with(prefix), "{self:?}");
    }

    /// Asserts a 400 `invalid_request` whose message is `message`; `context` names the case.
    pub fn assert_invalid_request(&self, message: &str, context: &str) {
        assert_eq!(self.status, StatusCode::BAD_REQUEST, "{context}");
        assert_eq!(self.code(), "invalid_request");
        assert_eq!(self.message(), message, "{context}");
    }
    /// The text `field` of each of the body's `items`.
    pub fn items(&self, field: &str) -> Vec<&str> {
        let items = self.body["items"].as_array().unwrap();
        items.iter().map(|i| i[field].as_str().unwrap()).collect()
    }
    /// Asserts a 201 whose `Warning` headers are exactly `warnings`, in order.
    pub fn assert_created_warnings(&self, warnings: &[&str]) {
        assert_eq!(self.status, StatusCode::CREATED, "{self:?}");
        assert_eq!(self.warnings(), warnings, "{self:?}");
    }

    pub fn warnings(&self) -> Vec<String> {
        self.headers
            .get_all("warning")
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }
}

pub enum Backend {
    Sqlite,
    Postgres,
}

impl TestApp {
    pub async fn sqlite() -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
        TestApp::on(url, dir).await
    }

    /// A fresh database on the test PostgreSQL (see `palisade_testkit::postgres`).
    pub async fn postgres() -> TestApp {
        let url = palisade_testkit::postgres::test_database_url();
        TestApp::on(url, tempfile::tempdir().unwrap()).await
    }

    pub async fn on(url: String, dir: tempfile::TempDir) -> TestApp {
        TestApp::configured(url, dir, |app| app).await
    }

    /// An app on SQLite whose clusters are reached through `clusters`.
    pub async fn sqlite_with_clusters(
        clusters: std::sync::Arc<dyn palisade_app::ports::Clusters>,
    ) -> TestApp {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
        TestApp::configured(url, dir, |app| app.with_clusters(clusters)).await
    }

    /// An app on the store at `url`, as `configure` makes it.
    pub async fn configured(
        url: String,
        dir: tempfile::TempDir,
        configure: impl FnOnce(palisade_app::App) -> palisade_app::App,
    ) -> TestApp {
        let store: SharedStore = palisade_store::connect(&url).await.unwrap();
        let path = palisade_app::caller::bootstrap_admin(store.as_ref(), dir.path())
            .await
            .unwrap()
            .expect("fresh store makes an admin token");
        let admin = std::fs::read_to_string(path).unwrap().trim().to_owned();
        let state = AppState::of(configure(palisade_app::App::new(
            store.clone(),
            Catalog::builtin(),
            SealingKey::random(),
        )));
        let router = app(state.clone());
        TestApp {
            state,
            store,
            router,
            admin,
            dir,
            url,
        }
    }

    pub async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let content = body.map(|b| b.to_string());
        self.raw(
            method,
            path,
            token,
            content.as_deref(),
            Some("application/json"),
            &[],
        )
        .await
    }

    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<&str>,
        content_type: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Answer {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        if body.is_some() {
            if let Some(ct) = content_type {
                request = request.header("content-type", ct);
            }
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let request = request
            .body(Body::from(body.unwrap_or("").to_owned()))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Answer {
            status,
            headers,
            body,
        }
    }

    /// GET `path` as the caller of `token`.
    pub async fn get(&self, path: &str, token: &str) -> Answer {
        self.call(Method::GET, path, Some(token), None).await
    }

    /// DELETE `path` as the caller of `token`.
    pub async fn delete(&self, path: &str, token: &str) -> Answer {
        self.call(Method::DELETE, path, Some(token), None).await
    }

    /// POST `body` as JSON to `path` as the caller of `token`.
    pub async fn post(&self, path: &str, token: &str, body: Value) -> Answer {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    /// PUT `body` as JSON to `path` as the caller of `token`.
    pub async fn put(&self, path: &str, token: &str, body: Value) -> Answer {
        self.call(Method::PUT, path, Some(token), Some(body)).await
    }

    /// PATCH `body` as JSON to `path` as the caller of `token`.
    pub async fn patch(&self, path: &str, token: &str, body: Value) -> Answer {
        self.call(Method::PATCH, path, Some(token), Some(body))
            .await
    }

    /// POSTs the text `body` as a resource of `boundary` to create, as the caller of `token`.
    pub async fn create_text(&self, boundary: &str, token: &str, body: &str) -> Answer {
        let path = format!("/v1/boundaries/{boundary}/resources");
        self.post_body(&path, token, body, "application/json").await
    }

    /// POSTs the text `body` as YAML (what `/v1/apply` reads) as the caller of `token`.
    pub async fn post_yaml(&self, path: &str, token: &str, body: &str) -> Answer {
        self.post_body(path, token, body, "application/yaml").await
    }

    /// POSTs the text `body` with the media type `content_type` as the caller of `token`.
    pub async fn post_body(
        &self,
        path: &str,
        token: &str,
        body: &str,
        content_type: &str,
    ) -> Answer {
        self.send_body(Method::POST, path, token, body, content_type)
            .await
    }

    /// Sends the text `body` with the media type `content_type` as the caller of `token`.
    pub async fn send_body(
        &self,
        method: Method,
        path: &str,
        token: &str,
        body: &str,
        content_type: &str,
    ) -> Answer {
        let (body, content_type) = (Some(body), Some(content_type));
        self.raw(method, path, Some(token), body, content_type, &[])
            .await
    }

    pub async fn admin(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        self.call(method, path, Some(&self.admin.clone()), body)
            .await
    }

    /// PUTs the cluster `name` with the kubeconfig `kubeconfig` as admin.
    pub async fn put_cluster(&self, name: &str, kubeconfig: &str) -> Answer {
        let path = format!("/v1/clusters/{name}");
        let body = json!({ "kubeconfig": kubeconfig });
        self.admin(Method::PUT, &path, Some(body)).await
    }

    /// GET `path` as admin.
    pub async fn admin_get(&self, path: &str) -> Answer {
        self.admin(Method::GET, path, None).await
    }

    /// Attaches the cluster `cluster` to `boundary` as admin.
    pub async fn attach(&self, boundary: &str, cluster: &str) -> Answer {
        let path = format!("/v1/boundaries/{boundary}/clusters/{cluster}");
        self.admin(Method::PUT, &path, None).await
    }

    pub async fn boundary(&self, name: &str) {
        let answer = self
            .admin(Method::POST, "/v1/boundaries", Some(json!({"name": name})))
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }

    /// PUTs a policy spec as admin and returns the answer (asserting 2xx).
    pub async fn policy(&self, boundary: &str, name: &str, spec: Value) -> Answer {
        let answer = self
            .admin(
                Method::PUT,
                &format!("/v1/boundaries/{boundary}/policies/{name}"),
                Some(spec),
            )
            .await;
        assert!(answer.status.is_success(), "{answer:?}");
        answer
    }

    /// The admin's create of the resource `body` in the boundary `shop` (the one `shop()` makes).
    pub async fn admin_create(&self, body: Value) -> Answer {
        self.create("shop", &self.admin, body).await
    }

    pub async fn create(&self, boundary: &str, token: &str, body: Value) -> Answer {
        self.call(
            Method::POST,
            &format!("/v1/boundaries/{boundary}/resources"),
            Some(token),
            Some(body),
        )
        .await
    }

    /// Asks as admin for a token of `role` in `boundary`; the answer holds its id and secret.
    pub async fn new_token(&self, role: &str, boundary: Option<&str>) -> Answer {
        let mut body = json!({"role": role});
        if let Some(b) = boundary {
            body["boundary"] = json!(b);
        }
        self.admin(Method::POST, "/v1/tokens", Some(body)).await
    }

    /// The secret of a new token of `role` in `boundary`.
    pub async fn token(&self, role: &str, boundary: Option<&str>) -> String {
        let answer = self.new_token(role, boundary).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
        answer.body["secret"].as_str().unwrap().to_owned()
    }
}

/// An app on SQLite with the boundary `shop`.
pub async fn shop() -> TestApp {
    let app = TestApp::sqlite().await;
    app.boundary("shop").await;
    app
}

pub fn plans(list: &[&str]) -> Value {
    json!({"rules": [{"allowedComputePlans": {"plans": list}}]})
}

/// An audit policy of the one rule `plans` makes: it warns of the plans not in `list`, and
/// denies nothing.
pub fn audit_plans(list: &[&str]) -> Value {
    let mut spec = plans(list);
    spec["mode"] = json!("audit");
    spec
}

/// The path of one page of the list at `list`: `limit` items, after the continue token `next`
/// when there is one (the first page has none).
pub fn page_path(list: &str, limit: usize, next: Option<&str>) -> String {
    match next {
        None => format!("{list}?limit={limit}"),
        Some(token) => format!("{list}?limit={limit}&continue={token}"),
    }
}

/// The body that creates the app `name` on `plan` (its image is `i`).
pub fn app_resource(name: &str, plan: &str) -> Value {
    json!({"type": "app", "name": name, "plan": plan, "image": "i"})
}

/// The body that creates the PostgreSQL database `name` on `plan`.
pub fn postgresql(name: &str, plan: &str) -> Value {
    json!({"type": "postgresql", "name": name, "plan": plan})
}

/// A test double of the clusters port that answers only what a test gives it: the answers it
/// leaves out accept (a namespace is created, a release and a removal do nothing), or fail as
/// "not used" (a scan, a workload read). `fake` makes it the port.
pub trait FakeClusters: Send + Sync + std::fmt::Debug + 'static {
    fn label_namespace(&self, _namespace: &str, _adopt: bool) -> Result<Labelled, ClusterError> {
        Ok(Labelled {
            outcome: LabelOutcome::Created,
            uid: None,
        })
    }
    fn scan(&self, _page_size: u32, _visit: Visit<'_>) -> Result<ScanInfo, ClusterError> {
        Err(ClusterError::Failed("not used".into()))
    }
    fn workload_detail(&self, _target: &WorkloadTarget) -> Result<WorkloadDetail, ClusterError> {
        Err(ClusterError::Failed("not used".into()))
    }
}

/// The clusters port over the double `double`, which the test keeps to look into.
pub fn fake<T: FakeClusters>(double: Arc<T>) -> Arc<dyn Clusters> {
    Arc::new(Fake(double))
}

#[derive(Debug)]
struct Fake<T>(Arc<T>);

#[async_trait::async_trait]
impl<T: FakeClusters> Clusters for Fake<T> {
    fn check_kubeconfig(&self, _: &str) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn label_namespace(
        &self,
        _: &str,
        _: &Name,
        namespace: &str,
        adopt: bool,
    ) -> Result<Labelled, ClusterError> {
        self.0.label_namespace(namespace, adopt)
    }
    async fn release_namespace(&self, _: &str, _: &Name, _: &str) -> Result<(), ClusterError> {
        Ok(())
    }
    async fn remove_installation(&self, _: &str, _: &str) -> Result<Vec<String>, ClusterError> {
        Ok(Vec::new())
    }
    async fn scan(
        &self,
        _: &str,
        _: &Name,
        page_size: u32,
        visit: Visit<'_>,
    ) -> Result<ScanInfo, ClusterError> {
        self.0.scan(page_size, visit)
    }
    async fn workload_detail(
        &self,
        _: &str,
        target: &WorkloadTarget,
    ) -> Result<WorkloadDetail, ClusterError> {
        self.0.workload_detail(target)
    }
}
