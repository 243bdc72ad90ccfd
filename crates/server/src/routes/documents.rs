//! The routes every kind of versioned boundary document has (`palisade_app::documents`),
//! written once: the boundary's list, one document's `GET`, `PUT` (the document's `spec` as
//! body) and `DELETE`, and its history. A kind's own routes (a policy's preview, an
//! exception's approval) stay in its module, which also documents these for OpenAPI.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use palisade_api_types::view::History;
use palisade_app::documents::DocumentKind;
use palisade_app::policies::{SaveCondition, WriteAction};
use palisade_app::{AppError, Caller};

use super::{etag_header, if_match, open, ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

/// Describes for OpenAPI, in the kind's module, the routes `routes` adds for every kind but
/// its `PUT` (whose answers each kind says itself): `list`, `get_one`, `delete` and `history`,
/// from the kind's tag, paths, path parameter, view and list.
macro_rules! document_paths {
    ($tag:tt, $list:tt, $one:tt, $history:tt, $param:tt, $view:ident, $page:ident) => {
        #[utoipa::path(get, path = $list, tag = $tag,
            params(("boundary" = String, Path), ListParams),
            responses((status = 200, body = $page), (status = 400, body = crate::openapi::Error),
                (status = 401, body = crate::openapi::Error),
                (status = 404, body = crate::openapi::Error)),
            security(("bearer" = [])))]
        pub fn list() {}

        #[utoipa::path(get, path = $one, tag = $tag,
            params(("boundary" = String, Path), ($param = String, Path)),
            responses((status = 200, body = $view), (status = 401, body = crate::openapi::Error),
                (status = 404, body = crate::openapi::Error)),
            security(("bearer" = [])))]
        pub fn get_one() {}

        #[utoipa::path(delete, path = $one, tag = $tag,
            params(("boundary" = String, Path), ($param = String, Path),
                ("If-Match" = Option<String>, Header, description = "the etag you read")),
            responses((status = 204), (status = 401, body = crate::openapi::Error),
                (status = 403, body = crate::openapi::Error),
                (status = 404, body = crate::openapi::Error),
                (status = 412, body = crate::openapi::Error),
                (status = 429, body = crate::openapi::Error)),
            security(("bearer" = [])))]
        pub fn delete() {}

        #[utoipa::path(get, path = $history, tag = $tag,
            params(("boundary" = String, Path), ($param = String, Path), ListParams),
            responses((status = 200, body = History), (status = 400, body = crate::openapi::Error),
                (status = 401, body = crate::openapi::Error),
                (status = 404, body = crate::openapi::Error)),
            security(("bearer" = [])))]
        pub fn history() {}
    };
}
pub(crate) use document_paths;

/// Adds the kind's routes below `/v1/boundaries/{boundary}/<plural>`, its documents named
/// by the path parameter `{<noun>}`.
pub fn routes<K: DocumentKind>(router: Router<AppState>) -> Router<AppState> {
    let list = format!("/v1/boundaries/{{boundary}}/{}", K::PLURAL);
    let one = format!("{list}/{{{}}}", K::NOUN);
    router
        .route(&list, get(self::list::<K>))
        .route(&one, get(get_one::<K>).put(put::<K>).delete(delete::<K>))
        .route(&format!("{one}/history"), get(history::<K>))
}

pub async fn list<K: DocumentKind>(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<K::List>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(
        state.list_documents::<K>(&access, &params.page()).await?,
    ))
}

pub async fn get_one<K: DocumentKind>(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    let view = state.document::<K>(&access, &name).await?;
    Ok((etag_header(K::etag(&view)), Json(view)))
}

/// `If-None-Match: *` (create only); any other value is a 400: palisade keeps no weak etags
/// to compare with, and a GET-style conditional PUT means nothing here.
fn if_none_match_star(headers: &HeaderMap) -> Result<bool, AppError> {
    match headers.get(axum::http::header::IF_NONE_MATCH) {
        None => Ok(false),
        Some(value) if value.to_str().ok().map(str::trim) == Some("*") => Ok(true),
        Some(_) => Err(AppError::InvalidRequest(
            "/headers/If-None-Match: only '*' (create, never replace) is supported".into(),
        )),
    }
}

pub async fn put<K: DocumentKind>(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: UnreadBody,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    if K::ADMINS_WRITE {
        caller.require_boundary_admin()?;
    }
    palisade_app::path_name(K::NOUN, &name)?;
    let body = body.read().await?;
    body.require_json(&[])?;
    let condition = SaveCondition {
        if_match: if_match(&headers),
        create_only: K::CREATE_ONLY && if_none_match_star(&headers)?,
        restores: None,
        at_once: false,
        rewrite_identical: false,
    };
    let (view, action) = K::save(&state, &access, &name, &body.bytes, condition).await?;
    let status = if action == WriteAction::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, etag_header(K::etag(&view)), Json(view)))
}

pub async fn delete<K: DocumentKind>(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let access = open(&state, &caller, &boundary).await?;
    state
        .delete_document::<K>(&access, &name, if_match(&headers).as_deref())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn history<K: DocumentKind>(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<History>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(
        state
            .document_history::<K>(&access, &name, &params.page())
            .await?,
    ))
}
