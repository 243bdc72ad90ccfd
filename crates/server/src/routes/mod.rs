//! The routes of SPEC 4.1 and what they share: boundary visibility, lists with `limit` and
//! `continue`, etags, and the JSON answers for unknown paths and methods.

pub mod boundaries;
pub mod clusters;
pub mod meta;
pub mod namespaces;
pub mod policies;
pub mod resources;
pub mod tokens;

use axum::http::{header, HeaderMap, HeaderValue};
use axum::routing::{get, put};
use axum::Router;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{boundary_not_found, Caller};
use crate::error::{ApiError, ApiResult};
use crate::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/boundaries",
            get(boundaries::list).post(boundaries::create),
        )
        .route(
            "/v1/boundaries/{boundary}",
            get(boundaries::get_one).delete(boundaries::delete),
        )
        .route("/v1/boundaries/{boundary}/policies", get(policies::list))
        .route(
            "/v1/boundaries/{boundary}/policies/{policy}",
            get(policies::get_one)
                .put(policies::put)
                .delete(policies::delete),
        )
        .route(
            "/v1/boundaries/{boundary}/policies/{policy}/history",
            get(policies::history),
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
        .route("/v1/boundaries/{boundary}/plans", get(resources::plans))
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
        .fallback(meta::not_found)
        .method_not_allowed_fallback(meta::method_not_allowed)
}

/// 404 unless the caller sees the boundary and it exists.
pub async fn visible_boundary(state: &AppState, caller: &Caller, boundary: &str) -> ApiResult<()> {
    caller.require_visible(boundary)?;
    match state.store.get_boundary(boundary).await {
        Ok(_) => Ok(()),
        Err(palisade_store::StoreError::NotFound) => Err(boundary_not_found(boundary)),
        Err(other) => Err(ApiError::from_store(other, "boundary")),
    }
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
                        ApiError::InvalidRequest(format!("the query string is invalid: {message}"))
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
    pub fn limit(&self) -> ApiResult<usize> {
        match self.limit {
            None => Ok(100),
            Some(n) if (1..=1000).contains(&n) => Ok(n as usize),
            Some(n) => Err(ApiError::invalid(
                "/limit",
                format!("must be from 1 to 1000, got {n}"),
            )),
        }
    }
}

/// `{"items": [...], "continue": "..."?}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct List<T> {
    pub items: Vec<T>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// Pages a list already in key order: items after `continue`, at most `limit`.
pub fn page<T>(
    items: Vec<T>,
    key: impl Fn(&T) -> String,
    params: &ListParams,
) -> ApiResult<List<T>> {
    let limit = params.limit()?;
    let mut rest: Vec<T> = match &params.continue_token {
        None => items,
        Some(after) => items
            .into_iter()
            .filter(|item| key(item) > *after)
            .collect(),
    };
    let continue_token = if rest.len() > limit {
        rest.truncate(limit);
        rest.last().map(&key)
    } else {
        None
    };
    Ok(List {
        items: rest,
        continue_token,
    })
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

/// Parses a path segment that must be a DNS label; 400 naming the path parameter otherwise.
pub fn path_name(parameter: &str, text: &str) -> ApiResult<()> {
    palisade_policy::Name::parse(text)
        .map(|_| ())
        .map_err(|e| ApiError::invalid(&format!("/path/{parameter}"), e))
}
