//! Exceptions of a boundary (SPEC 7): `PUT` with the document's `spec` as body (a developer's
//! is a request), `GET`, `DELETE`, history, and `POST .../approve`.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::{ExceptionList, ExceptionView, History};
use palisade_app::policies::{SaveCondition, WriteAction};
use palisade_app::Caller;

use super::{etag_header, if_match, open, ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/exceptions", tag = "exceptions",
    params(("boundary" = String, Path), ListParams),
    responses((status = 200, body = ExceptionList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<ExceptionList>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(state.list_exceptions(&access, &params.page()).await?))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/exceptions/{exception}", tag = "exceptions",
    params(("boundary" = String, Path), ("exception" = String, Path)),
    responses((status = 200, body = ExceptionView), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    let view = state.get_exception(&access, &name).await?;
    Ok((etag_header(&view.etag), Json(view)))
}

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
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: UnreadBody,
) -> ApiResult<impl IntoResponse> {
    // Every role of the boundary may write: a developer's write is a request.
    let access = open(&state, &caller, &boundary).await?;
    palisade_app::path_name("exception", &name)?;
    let body = body.read().await?;
    body.require_json(&[])?;
    let saved = state
        .save_exception(
            &access,
            &name,
            &body.bytes,
            SaveCondition {
                if_match: if_match(&headers),
                create_only: false,
            },
        )
        .await?;
    let status = if saved.action == WriteAction::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, etag_header(&saved.view.etag), Json(saved.view)))
}

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

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/exceptions/{exception}", tag = "exceptions",
    params(("boundary" = String, Path), ("exception" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read")),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 412, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let access = open(&state, &caller, &boundary).await?;
    state
        .delete_exception(&access, &name, if_match(&headers).as_deref())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/exceptions/{exception}/history", tag = "exceptions",
    params(("boundary" = String, Path), ("exception" = String, Path), ListParams),
    responses((status = 200, body = History), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn history(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<History>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(
        state
            .exception_history(&access, &name, &params.page())
            .await?,
    ))
}
