//! `/v1/boundaries`: create (admin), list (the caller's), get, delete (admin; 409 while the
//! boundary holds resources or policies).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::{Boundary, BoundaryList, NewBoundary};
use palisade_app::Caller;

use super::{ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

#[utoipa::path(post, path = "/v1/boundaries", tag = "boundaries",
    request_body = NewBoundary,
    responses((status = 201, body = Boundary), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: UnreadBody,
) -> ApiResult<impl IntoResponse> {
    caller.require_admin()?;
    let new: NewBoundary = body.read().await?.parse()?;
    let boundary = state.create_boundary(&caller, new).await?;
    Ok((StatusCode::CREATED, Json(boundary)))
}

#[utoipa::path(get, path = "/v1/boundaries", tag = "boundaries", params(ListParams),
    responses((status = 200, body = BoundaryList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<BoundaryList>> {
    Ok(Json(state.list_boundaries(&caller, &params.page()).await?))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}", tag = "boundaries",
    params(("boundary" = String, Path)),
    responses((status = 200, body = Boundary), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
) -> ApiResult<Json<Boundary>> {
    Ok(Json(state.get_boundary(&caller, &boundary).await?))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}", tag = "boundaries",
    params(("boundary" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
) -> ApiResult<StatusCode> {
    state.delete_boundary(&caller, &boundary).await?;
    Ok(StatusCode::NO_CONTENT)
}
