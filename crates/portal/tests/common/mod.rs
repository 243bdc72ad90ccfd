//! Test harness: the API with the portal merged in (`app_with`), on a fresh SQLite store in a
//! temp dir, called in-process with `oneshot`; a small cookie jar signs in like a browser.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]
#![allow(dead_code, reason = "each test binary uses part of the harness")]

pub mod clusters;
pub mod reconciled;

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use palisade_policy::Catalog;
use palisade_server::SealingKey;
use palisade_server::{app_with, AppState};
use serde_json::{json, Value};
use tower::ServiceExt;

pub struct Portal {
    pub state: AppState,
    /// The store under the portal, for tests that set up or look at records directly.
    pub store: palisade_app::SharedStore,
    pub router: Router,
    pub admin: String,
    pub url: String,
    pub dir: tempfile::TempDir,
}

#[derive(Debug)]
pub struct Page {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Page {
    pub fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    pub fn set_cookie(&self, name: &str) -> String {
        self.set_cookies()
            .into_iter()
            .find(|c| c.starts_with(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no Set-Cookie {name} in {:?}", self.headers))
    }

    pub fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .unwrap()
            .to_str()
            .unwrap()
    }

    /// The body with maud's HTML escapes undone, to compare with API texts.
    pub fn text(&self) -> String {
        unescape(&self.body)
    }

    /// The value of the first hidden `csrf` field.
    pub fn csrf(&self) -> String {
        let marker = "name=\"csrf\" value=\"";
        let start = self.body.find(marker).expect("a csrf field") + marker.len();
        let end = self.body[start..].find('"').unwrap();
        self.body[start..start + end].to_owned()
    }
}

/// The fields of the exception request form (`/boundaries/shop/exceptions/new`) asking that
/// the app `web` may keep the plan `large`: the exception `name` of `policy`, until `expires`,
/// for `reason`, sent with the browser's CSRF field `csrf`. `reason` is the last field.
pub fn exception_request<'a>(
    csrf: &'a str,
    name: &'a str,
    policy: &'a str,
    expires: &'a str,
    reason: &'a str,
) -> [(&'static str, &'a str); 7] {
    [
        ("csrf", csrf),
        ("name", name),
        ("policy", policy),
        ("resources", "app/web"),
        ("plans", "large"),
        ("expiresAt", expires),
        ("reason", reason),
    ]
}

pub fn unescape(html: &str) -> String {
    html.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

/// A signed-in browser: its cookies and the session's CSRF token.
#[derive(Clone, Debug)]
pub struct Browser {
    pub cookies: Vec<(String, String)>,
    pub csrf: String,
}

impl Browser {
    pub fn anonymous() -> Browser {
        Browser {
            cookies: Vec::new(),
            csrf: String::new(),
        }
    }

    pub fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    pub fn with_cookie(mut self, name: &str, value: &str) -> Browser {
        self.cookies.retain(|(k, _)| k != name);
        self.cookies.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Keeps what a response's `Set-Cookie` headers say.
    pub fn absorb(&mut self, page: &Page) {
        for cookie in page.set_cookies() {
            let pair = cookie.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            self.cookies.retain(|(k, _)| k != name);
            if !cookie.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
    }
}

impl Portal {
    pub async fn new() -> Portal {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
        let store = palisade_store::connect(&url).await.unwrap();
        let path = palisade_app::caller::bootstrap_admin(store.as_ref(), dir.path())
            .await
            .unwrap()
            .expect("fresh store makes an admin token");
        let admin = std::fs::read_to_string(path).unwrap().trim().to_owned();
        let state = AppState::new(store.clone(), Catalog::builtin(), SealingKey::random());
        let router = app_with(state.clone(), palisade_portal::router());
        Portal {
            state,
            store,
            router,
            admin,
            url,
            dir,
        }
    }

    /// A portal whose application reaches clusters through `clusters` (a test double).
    pub async fn with_clusters(
        clusters: std::sync::Arc<dyn palisade_app::ports::Clusters>,
    ) -> Portal {
        let mut portal = Portal::new().await;
        portal.state.app = portal.state.app.clone().with_clusters(clusters);
        portal.router = app_with(portal.state.clone(), palisade_portal::router());
        portal
    }

    /// Cluster `name` with a kubeconfig the sealing key opens, attached to `boundary`, with
    /// namespace `namespace` of the boundary.
    pub async fn attached_cluster(&self, boundary: &str, name: &str, namespace: &str) {
        let store = self.store.clone();
        let sealed = self
            .state
            .sealing
            .seal(b"kubeconfig of a test double")
            .unwrap();
        store.put_cluster(name, &sealed, None).await.unwrap();
        store.attach_cluster(boundary, name).await.unwrap();
        store
            .put_namespace(boundary, name, namespace, None)
            .await
            .unwrap();
    }

    /// A portal on the demo data (boundary `shop`) with a second boundary `other`.
    pub async fn demo() -> Portal {
        let portal = Portal::new().await;
        palisade_app::demo::load(portal.store.as_ref(), &portal.state.catalog)
            .await
            .unwrap();
        let answer = portal
            .api(
                Method::POST,
                "/v1/boundaries",
                Some(json!({"name": "other"})),
            )
            .await;
        assert_eq!(answer.0, StatusCode::CREATED);
        portal
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        browser: &Browser,
        form: Option<&[(&str, &str)]>,
        headers: &[(&str, &str)],
    ) -> Page {
        let mut request = Request::builder().method(method).uri(path);
        if !browser.cookies.is_empty() {
            request = request.header(header::COOKIE, browser.cookie_header());
        }
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        let body = match form {
            None => Body::empty(),
            Some(pairs) => {
                request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
                let mut encoder = form_urlencoded::Serializer::new(String::new());
                for (k, v) in pairs {
                    encoder.append_pair(k, v);
                }
                Body::from(encoder.finish())
            }
        };
        self.send(request.body(body).unwrap()).await
    }

    /// Sends `request` through the portal's router and reads the whole answer into a `Page`.
    async fn send(&self, request: Request<Body>) -> Page {
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        Page {
            status,
            headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    pub async fn get(&self, path: &str, browser: &Browser) -> Page {
        self.request(Method::GET, path, browser, None, &[]).await
    }

    pub async fn post(&self, path: &str, browser: &Browser, form: &[(&str, &str)]) -> Page {
        self.request(Method::POST, path, browser, Some(form), &[])
            .await
    }

    /// The new-policy editor's YAML view saving `yaml`, as `browser`.
    pub async fn save_policy_yaml(&self, browser: &Browser, yaml: &str) -> Page {
        let form = [
            ("csrf", browser.csrf.as_str()),
            ("view", "yaml"),
            ("yaml", yaml),
        ];
        self.post("/boundaries/shop/policies/new", browser, &form)
            .await
    }

    /// A `multipart/form-data` POST as a browser sends one: text fields, and file fields as
    /// `(name, Some(file name), bytes)`.
    pub async fn post_multipart(
        &self,
        path: &str,
        browser: &Browser,
        parts: &[(&str, Option<&str>, &[u8])],
    ) -> Page {
        let boundary = "----palisadeTestBoundary7MA4YWxkTrZu0gW";
        let mut body: Vec<u8> = Vec::new();
        for (name, file, content) in parts {
            body.extend_from_slice(format!("--{boundary}\r\n").as_bytes());
            match file {
                Some(file) => body.extend_from_slice(
                    format!(
                        "Content-Disposition: form-data; name=\"{name}\"; filename=\"{file}\"\r\nContent-Type: application/octet-stream\r\n\r\n"
                    )
                    .as_bytes(),
                ),
                None => body.extend_from_slice(
                    format!("Content-Disposition: form-data; name=\"{name}\"\r\n\r\n").as_bytes(),
                ),
            }
            body.extend_from_slice(content);
            body.extend_from_slice(b"\r\n");
        }
        body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
        self.post_body(
            path,
            browser,
            &format!("multipart/form-data; boundary={boundary}"),
            body,
        )
        .await
    }

    /// A POST of `body` as `content_type`, sent in 64 KiB pieces.
    pub async fn post_body(
        &self,
        path: &str,
        browser: &Browser,
        content_type: &str,
        body: Vec<u8>,
    ) -> Page {
        let mut request = Request::builder()
            .method(Method::POST)
            .uri(path)
            .header(header::CONTENT_TYPE, content_type);
        if !browser.cookies.is_empty() {
            request = request.header(header::COOKIE, browser.cookie_header());
        }
        // In pieces, as a network delivers it.
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            body.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
        let body = Body::from_stream(futures::stream::iter(chunks));
        self.send(request.body(body).unwrap()).await
    }

    /// Signs in with `token` as a browser would: the sign-in page's cookie and CSRF field,
    /// then the form.
    pub async fn sign_in(&self, token: &str) -> Browser {
        let mut browser = Browser::anonymous();
        let form = self.get("/sign-in", &browser).await;
        assert_eq!(form.status, StatusCode::OK);
        browser.absorb(&form);
        let csrf = form.csrf();
        let done = self
            .post(
                "/sign-in",
                &browser,
                &[("csrf", &csrf), ("token", token), ("next", "/")],
            )
            .await;
        assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
        browser.absorb(&done);
        let home = self.get("/", &browser).await;
        assert_eq!(home.status, StatusCode::OK, "{}", home.body);
        browser.csrf = home.csrf();
        browser
    }

    /// Follows a POST's 303 as a browser does: keeps the answer's cookies, GETs its location
    /// and keeps that page's cookies too.
    pub async fn follow(&self, answer: &Page, browser: &mut Browser) -> Page {
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
        browser.absorb(answer);
        let page = self.get(answer.location(), browser).await;
        browser.absorb(&page);
        page
    }

    /// An API call as admin: status and JSON body.
    pub async fn api(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        self.api_as(&self.admin.clone(), method, path, body).await
    }

    pub async fn api_as(
        &self,
        token: &str,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {token}"));
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Body::from(body.map(|b| b.to_string()).unwrap_or_default()))
            .unwrap();
        let response = self.router.clone().oneshot(request).await.unwrap();
        let status = response.status();
        let bytes = response.into_body().collect().await.unwrap().to_bytes();
        let value = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        (status, value)
    }

    pub async fn token(&self, role: &str, boundary: Option<&str>) -> String {
        let mut body = json!({"role": role});
        if let Some(b) = boundary {
            body["boundary"] = json!(b);
        }
        let (status, answer) = self.api(Method::POST, "/v1/tokens", Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        answer["secret"].as_str().unwrap().to_owned()
    }
}
