//! Public endpoints (`/healthz`, `/readyz`, `/metrics`, `/openapi.json`) and the JSON
//! answers for unknown paths and methods.

use axum::extract::State;
use axum::http::{header, Uri};
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::ApiError;
use crate::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
}

#[utoipa::path(get, path = "/healthz", tag = "meta", responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
    })
}

#[utoipa::path(get, path = "/readyz", tag = "meta",
    responses((status = 200, body = Health), (status = 503, body = crate::openapi::Error)))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    match tokio::time::timeout(state.policy_timeout, state.store.ping()).await {
        Ok(Ok(())) => Ok(Json(Health {
            status: "ok".into(),
        })),
        Ok(Err(e)) => Err(ApiError::Unavailable(e.to_string())),
        Err(_) => Err(ApiError::Unavailable("store ping timed out".into())),
    }
}

#[utoipa::path(get, path = "/metrics", tag = "meta",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String)))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}

#[utoipa::path(get, path = "/openapi.json", tag = "meta",
    responses((status = 200, description = "this document", content_type = "application/json", body = Object)))]
pub async fn openapi() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        crate::openapi::document_json(),
    )
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::NotFound(format!("no such path: {}", uri.path()))
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed("this method is not allowed on this path".into())
}
