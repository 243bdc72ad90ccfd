//! `/v1/boundaries`: create (admin), list (the caller's), get, delete (admin; 409 while the
//! boundary holds resources or policies).

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{page, path_name, visible_boundary, List, ListParams, Query};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::{AppState, Body};

#[derive(Debug, Serialize, ToSchema)]
pub struct Boundary {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub created_at: String,
}

impl From<palisade_store::BoundaryRecord> for Boundary {
    fn from(record: palisade_store::BoundaryRecord) -> Self {
        Boundary {
            name: record.name,
            display_name: record.display_name,
            created_at: record.created_at,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewBoundary {
    /// A DNS label.
    #[schema(
        pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
        min_length = 1,
        max_length = 63
    )]
    pub name: String,
    #[serde(default)]
    #[schema(max_length = 256)]
    pub display_name: Option<String>,
}

/// Parses a JSON body into `T`; errors name the field by its JSON Pointer.
pub fn parse_body<T: serde::de::DeserializeOwned>(body: &Body) -> ApiResult<T> {
    body.require_json(&[])?;
    crate::json::parse(&body.bytes)
}

#[utoipa::path(post, path = "/v1/boundaries", tag = "boundaries",
    request_body = NewBoundary,
    responses((status = 201, body = Boundary), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Body,
) -> ApiResult<impl IntoResponse> {
    caller.require_admin()?;
    let new: NewBoundary = parse_body(&body)?;
    palisade_policy::Name::parse(&new.name).map_err(|e| ApiError::invalid("/name", e))?;
    if let Some(display) = &new.display_name {
        if display.chars().count() > 256 {
            return Err(ApiError::invalid(
                "/display_name",
                "must be at most 256 characters",
            ));
        }
        if let Some(control) = display.chars().find(|c| c.is_control()) {
            return Err(ApiError::invalid(
                "/display_name",
                format!(
                    "must not contain control characters (found U+{:04X})",
                    u32::from(control)
                ),
            ));
        }
    }
    let record = state
        .store
        .create_boundary(&new.name, new.display_name.as_deref())
        .await
        .map_err(|e| match e {
            palisade_store::StoreError::Conflict(_) => {
                ApiError::Conflict(format!("boundary '{}' already exists", new.name))
            }
            other => ApiError::from_store(other, "boundary"),
        })?;
    Ok((StatusCode::CREATED, Json(Boundary::from(record))))
}

#[utoipa::path(get, path = "/v1/boundaries", tag = "boundaries", params(ListParams),
    responses((status = 200, body = BoundaryList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<List<Boundary>>> {
    let records = state
        .store
        .list_boundaries()
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    let visible = records
        .into_iter()
        .filter(|b| caller.sees(&b.name))
        .map(Boundary::from)
        .collect();
    Ok(Json(page(visible, |b| b.name.clone(), &params)?))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BoundaryList {
    pub items: Vec<Boundary>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
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
    caller.require_visible(&boundary)?;
    let record = state
        .store
        .get_boundary(&boundary)
        .await
        .map_err(|e| match e {
            palisade_store::StoreError::NotFound => crate::auth::boundary_not_found(&boundary),
            other => ApiError::from_store(other, "boundary"),
        })?;
    Ok(Json(record.into()))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}", tag = "boundaries",
    params(("boundary" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
) -> ApiResult<StatusCode> {
    path_name("boundary", &boundary).map_err(|_| crate::auth::boundary_not_found(&boundary))?;
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_admin()?;
    state
        .store
        .delete_boundary(&boundary)
        .await
        .map_err(|e| match e {
            palisade_store::StoreError::Conflict(reason) => {
                ApiError::Conflict(format!("boundary '{boundary}' cannot be deleted: {reason}"))
            }
            other => ApiError::from_store(other, "boundary"),
        })?;
    Ok(StatusCode::NO_CONTENT)
}
