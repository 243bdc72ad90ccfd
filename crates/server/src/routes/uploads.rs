//! Code uploaded for builds (SPEC 5): a developer uploads an archive or a file, a resource
//! names it in `upload`, and the build Job fetches it with a short-lived token that opens that
//! upload and nothing else.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use palisade_api_types::view::UploadView;
use palisade_app::Caller;

use super::open;
use crate::error::{ApiError, ApiResult};
use crate::{AppState, ReadError, UnreadBody};

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/uploads", tag = "resources",
    params(("boundary" = String, Path)),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "the code to build: a .tar.gz of a directory, or one file; at most 8 MiB"),
    responses((status = 201, body = UploadView), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 413, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    body: UnreadBody,
) -> ApiResult<Response> {
    let access = open(&state, &caller, &boundary).await?;
    let (_, bytes) = body.read_bytes().await.map_err(|error| match error {
        ReadError::TooLarge => ApiError::App(palisade_app::workloads::upload_too_large()),
        other => ApiError::from(other),
    })?;
    let view = state.create_upload(&access, bytes.to_vec()).await?;
    Ok((StatusCode::CREATED, Json(view)).into_response())
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/uploads/{id}/content", tag = "resources",
    params(("boundary" = String, Path), ("id" = String, Path)),
    responses((status = 200, content_type = "application/octet-stream", body = Vec<u8>,
        description = "the upload's bytes; only with the fetch token its build Job carries"),
        (status = 401, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn content(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path((boundary, id)): Path<(String, String)>,
) -> ApiResult<Response> {
    let token = crate::auth::bearer(&headers).ok();
    let upload = state
        .fetch_upload(&boundary, &id, token)
        .await
        .map_err(ApiError::App)?;
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::ETAG, format!("\"{}\"", upload.sha256)),
        ],
        upload.content,
    )
        .into_response())
}
