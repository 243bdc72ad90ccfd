//! Exceptions of a boundary (SPEC 7): `PUT` with the document's `spec` as body (a developer's
//! is a request), `GET`, `DELETE`, history (the routes of every versioned document,
//! `documents`, described here for OpenAPI), and the exception's own `POST .../approve`.

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::{ExceptionList, ExceptionView, History};
use palisade_app::Caller;

use super::{etag_header, if_match, open, ListParams};
use crate::error::ApiResult;
use crate::AppState;

super::documents::document_paths!(
    "exceptions",
    "/v1/boundaries/{boundary}/exceptions",
    "/v1/boundaries/{boundary}/exceptions/{exception}",
    "/v1/boundaries/{boundary}/exceptions/{exception}/history",
    "exception",
    ExceptionView,
    ExceptionList
);

#[utoipa::path(put, path = "/v1/boundaries/{boundary}/exceptions/{exception}", tag = "exceptions",
    params(("boundary" = String, Path), ("exception" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read")),
    request_body(content = Object, description = "the exception document's spec"),
    responses((status = 200, body = ExceptionView), (status = 201, body = ExceptionView),
        (status = 400, body = crate::openapi::Error), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error), (status = 409, body = crate::openapi::Error),
        (status = 412, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error),
        (status = 415, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
// Served by `documents::put::<Exceptions>`, as are the routes of `document_paths`.
pub fn put() {}

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/exceptions/{exception}/approve", tag = "exceptions",
    params(("boundary" = String, Path), ("exception" = String, Path),
        ("If-Match" = String, Header, description = "required: the etag of the exception you read \
            and approve (400 without it, 412 when it changed since)")),
    responses((status = 200, body = ExceptionView), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 412, body = crate::openapi::Error),
        (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn approve(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    let view = state
        .approve_exception(&access, &name, if_match(&headers))
        .await?;
    Ok((etag_header(&view.etag), Json(view)))
}
