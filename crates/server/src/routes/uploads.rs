//! Code uploaded for builds (SPEC 5): a developer uploads an archive or a file, a resource
//! names it in `upload`, and the build Job fetches it with a short-lived token that opens that
//! upload and nothing else. Both ways the content streams: an upload is read and stored a
//! chunk at a time, and a fetch sends it a chunk at a time.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use futures::StreamExt;
use palisade_api_types::view::UploadView;
use palisade_app::Caller;

use super::open;
use crate::error::{ApiError, ApiResult};
use crate::AppState;

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/uploads", tag = "resources",
    params(("boundary" = String, Path)),
    request_body(content = Vec<u8>, content_type = "application/octet-stream",
        description = "the code to build: a .tar.gz of a directory, or one file; at most 8 MiB. \
            A boundary stores at most `serve --max-upload-bytes` (default 1 GiB) of uploads; an \
            upload no resource names is deleted 24 hours after it was made or last named"),
    responses((status = 201, body = UploadView), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 413, body = crate::openapi::Error,
            description = "over 8 MiB, or over the boundary's limit of stored uploads"),
        (status = 429, body = crate::openapi::Error,
            description = "the boundary has as many uploads under way as it may; see Retry-After"),
        (status = 503, body = crate::openapi::Error,
            description = "palisade receives as many uploads as it takes at once; see Retry-After")),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let access = open(&state, &caller, &boundary).await?;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let view = state
        .create_upload(&access, declared, body.into_data_stream())
        .await?;
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
    let chunks = upload.chunks.map(|chunk| {
        chunk.map(axum::body::Bytes::from).map_err(|error| {
            tracing::warn!(%error, "an upload's content could not be read whole");
            error
        })
    });
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (header::CONTENT_LENGTH, upload.size.to_string()),
            (header::ETAG, format!("\"{}\"", upload.sha256)),
        ],
        Body::from_stream(chunks),
    )
        .into_response())
}
