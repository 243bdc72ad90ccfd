//! The routes of SPEC 4.1 and what they share: query strings, lists' `limit` and `continue`,
//! etags. Each handler reads the request, calls one use case of `palisade-app`, and writes
//! its answer.

pub mod boundaries;
pub mod clusters;
pub mod documents;
pub mod exceptions;
pub mod meta;
pub mod namespaces;
pub mod policies;
pub mod resources;
pub mod tokens;
pub mod uploads;

use axum::http::{header, HeaderMap, HeaderValue};
use axum::routing::{any, get, put};
use axum::Router;
use palisade_app::caller::Access;
use palisade_app::exceptions::Exceptions;
use palisade_app::policies::Policies;
use palisade_app::{Caller, PageRequest};
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};
use crate::AppState;

pub fn router() -> Router<AppState> {
    let router = documents::routes::<Policies>(Router::new());
    documents::routes::<Exceptions>(router)
        .route(
            "/v1/boundaries",
            get(boundaries::list).post(boundaries::create),
        )
        .route(
            "/v1/boundaries/{boundary}",
            get(boundaries::get_one).delete(boundaries::delete),
        )
        .route(
            "/v1/boundaries/{boundary}/policies/{policy}/preview",
            axum::routing::post(policies::preview),
        )
        .route(
            "/v1/boundaries/{boundary}/policies/{policy}/report",
            get(policies::report),
        )
        .route(
            "/v1/boundaries/{boundary}/policies/{policy}/rollback",
            axum::routing::post(policies::rollback),
        )
        .route(
            "/v1/boundaries/{boundary}/policies/{policy}/rollout/promote",
            axum::routing::post(policies::promote),
        )
        .route(
            "/v1/boundaries/{boundary}/policies/{policy}/rollout/abort",
            axum::routing::post(policies::abort),
        )
        .route(
            "/v1/boundaries/{boundary}/exceptions/{exception}/approve",
            axum::routing::post(exceptions::approve),
        )
        .route("/v1/apply", axum::routing::post(policies::apply))
        .route(
            "/v1/boundaries/{boundary}/resources",
            get(resources::list).post(resources::create),
        )
        .route(
            "/v1/boundaries/{boundary}/resources/{resource_type}/{name}",
            get(resources::get_one)
                .patch(resources::patch)
                .delete(resources::delete),
        )
        .route(
            "/v1/boundaries/{boundary}/resources/{resource_type}/{name}/workload",
            get(resources::workload),
        )
        .route("/v1/boundaries/{boundary}/plans", get(resources::plans))
        // The body streams into the store; the application bounds it (8 MiB).
        .route(
            "/v1/boundaries/{boundary}/uploads",
            axum::routing::post(uploads::create),
        )
        .route(
            "/v1/boundaries/{boundary}/uploads/{id}/content",
            get(uploads::content),
        )
        .route("/v1/tokens", get(tokens::list).post(tokens::create))
        .route("/v1/tokens/{id}", axum::routing::delete(tokens::delete))
        .route("/v1/clusters", get(clusters::list))
        .route(
            "/v1/clusters/{cluster}",
            put(clusters::put)
                .get(clusters::get_one)
                .delete(clusters::delete),
        )
        .route(
            "/v1/boundaries/{boundary}/clusters",
            get(clusters::list_attached),
        )
        .route(
            "/v1/boundaries/{boundary}/clusters/{cluster}",
            put(clusters::attach).delete(clusters::detach),
        )
        .route(
            "/v1/boundaries/{boundary}/clusters/{cluster}/namespaces/{namespace}",
            put(namespaces::put)
                .get(namespaces::get_one)
                .delete(namespaces::delete),
        )
        .route(
            "/v1/boundaries/{boundary}/namespaces",
            get(namespaces::list),
        )
        .route("/openapi.json", get(meta::openapi))
        .route("/healthz", get(meta::healthz))
        .route("/readyz", get(meta::readyz))
        .route("/metrics", get(meta::metrics))
        // Every other path under /v1 is the API's too: its JSON 404, whatever is merged in
        // (`app_with`). Paths outside the API are left to the merged router's fallback.
        .route("/v1", any(meta::not_found))
        .route("/v1/{*rest}", any(meta::not_found))
        .method_not_allowed_fallback(meta::method_not_allowed)
}

/// A query string parsed into `T`; a bad parameter is our 400 naming `/<parameter>`, never
/// axum's plain-text rejection.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<T: serde::de::DeserializeOwned, S: Send + Sync> axum::extract::FromRequestParts<S>
    for Query<T>
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or("");
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(Query)
            .map_err(|e| {
                let pointer = palisade_api_types::pointer::from_path("", e.path());
                let inner = e.into_inner();
                let message = inner.to_string();
                // serde_urlencoded names the field itself when the path cannot.
                match message.split_once(": ") {
                    Some((field, why)) if pointer.is_empty() && !field.contains(' ') => {
                        ApiError::invalid(&format!("/{field}"), why)
                    }
                    _ if pointer.is_empty() => {
                        ApiError::App(palisade_app::AppError::InvalidRequest(format!(
                            "the query string is invalid: {message}"
                        )))
                    }
                    _ => ApiError::invalid(&pointer, message),
                }
            })
    }
}

/// `?limit=N&continue=TOKEN` of every list.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// At most this many items (1-1000, default 100).
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    /// The `continue` value of the previous page.
    #[serde(rename = "continue")]
    #[param(rename = "continue")]
    pub continue_token: Option<String>,
}

impl ListParams {
    /// The application's page request.
    pub fn page(&self) -> PageRequest {
        PageRequest {
            limit: self.limit,
            continue_token: self.continue_token.clone(),
        }
    }
}

/// Opens the boundary for the caller (404 unless it sees it and it exists).
pub async fn open(state: &AppState, caller: &Caller, boundary: &str) -> ApiResult<Access> {
    Ok(state.open(caller, boundary).await?)
}

/// The `If-Match` header, if any.
pub fn if_match(headers: &HeaderMap) -> Option<String> {
    headers
        .get(header::IF_MATCH)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// `ETag: "<etag>"`.
pub fn etag_header(etag: &str) -> [(header::HeaderName, HeaderValue); 1] {
    let value = HeaderValue::from_str(&format!("\"{etag}\""))
        .unwrap_or_else(|_| HeaderValue::from_static("\"\""));
    [(header::ETAG, value)]
}
