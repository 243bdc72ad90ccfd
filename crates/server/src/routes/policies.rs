//! Policies of a boundary: `PUT` with the document's `spec` as body, `GET`, `DELETE`,
//! history (the routes of every versioned document, `documents`, described here for OpenAPI),
//! and the policy's own: preview, report, and `POST /v1/apply` of whole YAML documents (all or
//! nothing).

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::{
    ApplyResults, History, PolicyList, PolicyReport, PolicyView, Preview, RollbackRequest,
    RolloutView,
};
use palisade_app::rollout::Step;
use palisade_app::Caller;
use serde::Deserialize;

use super::{etag_header, if_match, open, ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

super::documents::document_paths!(
    "policies",
    "/v1/boundaries/{boundary}/policies",
    "/v1/boundaries/{boundary}/policies/{policy}",
    "/v1/boundaries/{boundary}/policies/{policy}/history",
    "policy",
    PolicyView,
    PolicyList
);

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
// Served by `documents::put::<Policies>`, as are the routes of `document_paths`.
pub fn put() {}

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

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/policies/{policy}/rollback", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read")),
    request_body = RollbackRequest,
    responses((status = 200, body = PolicyView, description = "the policy, its spec that of the version named, as a new version (unchanged when it was that spec already)"),
        (status = 400, body = crate::openapi::Error), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 412, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error),
        (status = 415, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn rollback(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: UnreadBody,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    palisade_app::path_name("policy", &name)?;
    let request: RollbackRequest = body.read().await?.parse()?;
    let saved = state
        .rollback_policy(&access, &name, &request, if_match(&headers))
        .await?;
    Ok((etag_header(&saved.view.etag), Json(saved.view)))
}

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/policies/{policy}/rollout/promote", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path)),
    responses((status = 200, body = RolloutView, description = "the rollout, at its next stage (done after the last)"),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error, description = "no rollout of the policy runs"),
        (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn promote(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
) -> ApiResult<Json<RolloutView>> {
    step(state, caller, boundary, name, Step::Promote).await
}

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/policies/{policy}/rollout/abort", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path)),
    responses((status = 200, body = RolloutView, description = "the rollout, aborted: the previous version applies everywhere again"),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error, description = "no rollout of the policy runs"),
        (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn abort(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
) -> ApiResult<Json<RolloutView>> {
    step(state, caller, boundary, name, Step::Abort).await
}

async fn step(
    state: AppState,
    caller: Caller,
    boundary: String,
    name: String,
    step: Step,
) -> ApiResult<Json<RolloutView>> {
    let access = open(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    palisade_app::path_name("policy", &name)?;
    Ok(Json(state.step_rollout(&access, &name, step).await?))
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
