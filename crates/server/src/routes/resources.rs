//! Resources of a boundary and the plan picker: where the compute-plan rule is enforced (by
//! `palisade-app`); here the request's deadline, the body and the `Warning` headers.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use palisade_api_types::view::{Picker, ResourceList, ResourceView};
use palisade_app::resources::{known_type, moves_a_plan, ResourceFilter};
use palisade_app::{AppError, Caller, PageRequest};
use serde::Deserialize;

use super::{etag_header, if_match, open, Query};
use crate::error::{with_warnings, ApiError, ApiResult};
use crate::serving::Started;
use crate::{AppState, UnreadBody};

/// On a plan path an unreachable store means the policies could not be read: 503
/// `compute_plan_policy_unavailable`, whichever step (token, boundary, policies) failed.
fn on_plan_path(error: ApiError) -> ApiError {
    match error {
        ApiError::App(error) => ApiError::App(palisade_app::error::on_plan_path(error)),
        other => other,
    }
}

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/resources", tag = "resources",
    params(("boundary" = String, Path)),
    request_body(content = Object, description = "`{\"type\", \"name\", \"plan\", ...}`; container instances carry `components`"),
    responses((status = 201, body = ResourceView), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error),
        (status = 415, body = crate::openapi::Error),
        (status = 422, body = crate::openapi::PlanNotAllowed),
        (status = 503, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    started: Option<Extension<Started>>,
    caller: Result<Caller, ApiError>,
    Path(boundary): Path<String>,
    body: UnreadBody,
) -> ApiResult<Response> {
    let deadline = crate::serving::deadline_of(&state, started.as_deref());
    let caller = caller.map_err(on_plan_path)?;
    let access = state.open_by(&caller, &boundary, deadline, true).await?;
    let body = body.read().await?;
    body.require_json(&[])?;
    let value = body.json()?;
    let written = state.create_resource(&access, &value, deadline).await?;
    let etag = etag_header(&written.view.etag);
    let response = (StatusCode::CREATED, etag, Json(written.view)).into_response();
    Ok(with_warnings(response, &written.warnings))
}

/// Whether a merge patch names a plan (see [`moves_a_plan`]); a body that cannot be read or
/// parsed does not.
async fn moves_a_plan_by(body: UnreadBody) -> bool {
    match body.read().await {
        // Bounded before it is parsed, as every JSON body is.
        Ok(body) => {
            palisade_api_types::nesting::check_json(&body.bytes).is_ok()
                && serde_json::from_slice::<serde_json::Value>(&body.bytes)
                    .ok()
                    .is_some_and(|patch| moves_a_plan(&patch))
        }
        Err(_) => false,
    }
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResourceListParams {
    /// Only resources of this type.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub resource_type: Option<String>,
    /// `true`: only resources whose current plan the policies now disallow.
    pub grandfathered: Option<bool>,
    #[param(minimum = 1, maximum = 1000)]
    pub limit: Option<u32>,
    #[serde(rename = "continue")]
    #[param(rename = "continue")]
    pub continue_token: Option<String>,
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/resources", tag = "resources",
    params(("boundary" = String, Path), ResourceListParams),
    responses((status = 200, body = ResourceList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 503, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    Query(params): Query<ResourceListParams>,
) -> ApiResult<Json<ResourceList>> {
    let access = open(&state, &caller, &boundary).await?;
    let filter = ResourceFilter {
        resource_type: params.resource_type,
        grandfathered: params.grandfathered.unwrap_or(false),
    };
    let page = PageRequest {
        limit: params.limit,
        continue_token: params.continue_token,
    };
    Ok(Json(state.list_resources(&access, &filter, &page).await?))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/resources/{resource_type}/{name}", tag = "resources",
    params(("boundary" = String, Path), ("resource_type" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = ResourceView), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    let view: ResourceView = state.get_resource(&access, &resource_type, &name).await?;
    Ok((etag_header(&view.etag), Json(view)))
}

/// What the cluster holds for a workload resource, read live: replicas, pods, the build Job and
/// the latest Kubernetes events (denials among them).
#[utoipa::path(get, path = "/v1/boundaries/{boundary}/resources/{resource_type}/{name}/workload", tag = "resources",
    params(("boundary" = String, Path), ("resource_type" = String, Path), ("name" = String, Path)),
    responses((status = 200, body = palisade_api_types::view::WorkloadDetail),
        (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error, description = "no such resource, a type that runs no workload, or not placed yet"),
        (status = 503, body = crate::openapi::Error, description = "the cluster could not be read")),
    security(("bearer" = [])))]
pub async fn workload(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(
        state
            .resource_workload(&access, &resource_type, &name)
            .await?,
    ))
}

#[utoipa::path(patch, path = "/v1/boundaries/{boundary}/resources/{resource_type}/{name}", tag = "resources",
    params(("boundary" = String, Path), ("resource_type" = String, Path), ("name" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read")),
    request_body(content = Object, content_type = "application/merge-patch+json",
        description = "a JSON merge patch; `components` replaces the list"),
    responses((status = 200, body = ResourceView), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 412, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error),
        (status = 415, body = crate::openapi::Error),
        (status = 422, body = crate::openapi::PlanNotAllowed),
        (status = 503, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn patch(
    State(state): State<AppState>,
    started: Option<Extension<Started>>,
    caller: Result<Caller, ApiError>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: UnreadBody,
) -> ApiResult<Response> {
    let deadline = crate::serving::deadline_of(&state, started.as_deref());
    // Whether this patch can move a plan decides how a store failure is answered, and only
    // its body tells. The body is read for that only when the store failed (the token or the
    // boundary could not be looked up); a refused token is 401 before any body is read.
    let caller = match caller {
        Ok(caller) => caller,
        Err(error) if error.status() == StatusCode::UNAUTHORIZED => return Err(error),
        Err(error) if moves_a_plan_by(body).await => return Err(on_plan_path(error)),
        Err(error) => return Err(error),
    };
    let access = match state.open_by(&caller, &boundary, deadline, false).await {
        Ok(access) => access,
        Err(AppError::Unavailable(cause)) if moves_a_plan_by(body).await => {
            return Err(AppError::PolicyUnavailable(cause).into())
        }
        Err(error) => return Err(error.into()),
    };
    // An unknown type is an unknown resource (404) before the body is looked at.
    known_type(&access, &resource_type, &name)?;
    let body = body.read().await?;
    body.require_json(&["application/merge-patch+json"])?;
    let patch = body.json()?;
    let written = state
        .patch_resource(
            &access,
            &resource_type,
            &name,
            if_match(&headers).as_deref(),
            patch,
            deadline,
        )
        .await?;
    let etag = etag_header(&written.view.etag);
    Ok(with_warnings(
        (etag, Json(written.view)).into_response(),
        &written.warnings,
    ))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/resources/{resource_type}/{name}", tag = "resources",
    params(("boundary" = String, Path), ("resource_type" = String, Path), ("name" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read")),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error), (status = 412, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    let access = open(&state, &caller, &boundary).await?;
    state
        .delete_resource(
            &access,
            &resource_type,
            &name,
            if_match(&headers).as_deref(),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PlansParams {
    /// The resource type.
    #[serde(rename = "type")]
    #[param(rename = "type")]
    pub resource_type: Option<String>,
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/plans", tag = "resources",
    params(("boundary" = String, Path), PlansParams),
    responses((status = 200, body = Picker), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 503, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn plans(
    State(state): State<AppState>,
    caller: Result<Caller, ApiError>,
    Path(boundary): Path<String>,
    Query(params): Query<PlansParams>,
) -> ApiResult<Json<Picker>> {
    let caller = caller.map_err(on_plan_path)?;
    let access = state
        .open(&caller, &boundary)
        .await
        .map_err(palisade_app::error::on_plan_path)?;
    Ok(Json(
        state
            .picker(&access, params.resource_type.as_deref())
            .await?,
    ))
}
