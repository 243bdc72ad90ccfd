//! Public endpoints (`/healthz`, `/readyz`, `/metrics`, `/openapi.json`) and the JSON
//! answers for unknown paths and methods.

use axum::extract::State;
use axum::http::{header, Uri};
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::Health;

use crate::error::ApiError;
use crate::AppState;

#[utoipa::path(get, path = "/healthz", tag = "meta", responses((status = 200, body = Health)))]
pub async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok".into(),
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
    })
}

#[utoipa::path(get, path = "/readyz", tag = "meta",
    responses((status = 200, body = Health), (status = 503, body = crate::openapi::Error)))]
pub async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    state.ready().await?;
    Ok(Json(Health {
        status: "ok".into(),
        version: Some(env!("CARGO_PKG_VERSION").to_owned()),
    }))
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
    palisade_app::AppError::NotFound(format!("no such path: {}", uri.path())).into()
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed("this method is not allowed on this path".into())
}
