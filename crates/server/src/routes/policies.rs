//! Policies of a boundary: `PUT` with the document's `spec` as body, `GET`, `DELETE`,
//! history, and `POST /v1/apply` of whole YAML documents (all or nothing).

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::{
    ApplyResults, History, PolicyList, PolicyReport, PolicyView, Preview,
};
use palisade_app::policies::SaveCondition;
use palisade_app::policies::WriteAction;
use palisade_app::{AppError, Caller};
use serde::Deserialize;

use super::{etag_header, if_match, open, ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/policies", tag = "policies",
    params(("boundary" = String, Path), ListParams),
    responses((status = 200, body = PolicyList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<PolicyList>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(state.list_policies(&access, &params.page()).await?))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/policies/{policy}", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path)),
    responses((status = 200, body = PolicyView), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    let view = state.get_policy(&access, &name).await?;
    Ok((etag_header(&view.etag), Json(view)))
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

#[utoipa::path(put, path = "/v1/boundaries/{boundary}/policies/{policy}", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read"),
        ("If-None-Match" = Option<String>, Header, description = "`*`: create only; 412 when the policy exists")),
    request_body(content = Object, description = "the policy document's spec"),
    responses((status = 200, body = PolicyView), (status = 201, body = PolicyView),
        (status = 400, body = crate::openapi::Error), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
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
    let access = open(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    palisade_app::path_name("policy", &name)?;
    let body = body.read().await?;
    body.require_json(&[])?;
    let condition = SaveCondition {
        if_match: if_match(&headers),
        create_only: if_none_match_star(&headers)?,
    };
    let saved = state
        .save_policy(&access, &name, &body.bytes, condition)
        .await?;
    let status = if saved.action == WriteAction::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, etag_header(&saved.view.etag), Json(saved.view)))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/policies/{policy}", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path),
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
        .delete_policy(&access, &name, if_match(&headers).as_deref())
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/policies/{policy}/history", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path), ListParams),
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
        state.policy_history(&access, &name, &params.page()).await?,
    ))
}

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/policies/{policy}/preview", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path), ListParams),
    request_body(content = Option<Object>,
        description = "a policy document's spec to preview; empty: the saved version"),
    responses((status = 200, body = Preview), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error),
        (status = 415, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn preview(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    params: Result<Query<ListParams>, crate::error::ApiError>,
    body: UnreadBody,
) -> ApiResult<Json<Preview>> {
    let access = open(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    let Query(params) = params?;
    palisade_app::path_name("policy", &name)?;
    let body = body.read().await?;
    body.require_json(&[])?;
    Ok(Json(
        state
            .preview_policy_page(&access, &name, &body.bytes, &params.page())
            .await?,
    ))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/policies/{policy}/report", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path)),
    responses((status = 200, body = PolicyReport), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn report(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
) -> ApiResult<Json<PolicyReport>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(state.policy_report(&access, &name).await?))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ApplyParams {
    /// `true`: validate and report what would change, write nothing.
    pub dry_run: Option<bool>,
}

#[utoipa::path(post, path = "/v1/apply", tag = "policies", params(ApplyParams),
    request_body(content = String, content_type = "application/yaml",
        description = "one or more BoundaryPolicy documents"),
    responses((status = 200, body = ApplyResults), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn apply(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ApplyParams>,
    body: UnreadBody,
) -> ApiResult<Json<ApplyResults>> {
    // Only the roles that may apply send a body to read.
    caller.require_boundary_admin()?;
    let body = body.read().await?;
    let dry_run = params.dry_run.unwrap_or(false);
    Ok(Json(
        state.apply(&caller, body.bytes.to_vec(), dry_run).await?,
    ))
}
