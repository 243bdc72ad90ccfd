//! A boundary's namespaces: palisade creates a namespace labelled
//! `palisade.dev/boundary=<boundary>` in an attached cluster, or adopts (labels) an existing
//! one; the boundary's admission rules apply there from then on. Deleting releases it: the
//! label is removed, the namespace and its objects stay.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::{NamespaceList, NamespaceRequest, NamespaceView};
use palisade_app::Caller;

use super::{open, ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

#[utoipa::path(put, path = "/v1/boundaries/{boundary}/clusters/{cluster}/namespaces/{namespace}",
    tag = "namespaces",
    params(("boundary" = String, Path), ("cluster" = String, Path), ("namespace" = String, Path)),
    request_body = NamespaceRequest,
    responses((status = 200, body = NamespaceView), (status = 201, body = NamespaceView),
        (status = 400, body = crate::openapi::Error), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 503, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster, namespace)): Path<(String, String, String)>,
    body: UnreadBody,
) -> ApiResult<impl IntoResponse> {
    let access = open(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    palisade_app::path_name("namespace", &namespace)?;
    let body = body.read().await?;
    let request: NamespaceRequest = if body.bytes.iter().all(u8::is_ascii_whitespace) {
        NamespaceRequest::default()
    } else {
        body.parse()?
    };
    let (view, created) = state
        .put_namespace(&access, &cluster, &namespace, request.adopt == Some(true))
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/clusters/{cluster}/namespaces/{namespace}",
    tag = "namespaces",
    params(("boundary" = String, Path), ("cluster" = String, Path), ("namespace" = String, Path)),
    responses((status = 200, body = NamespaceView), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster, namespace)): Path<(String, String, String)>,
) -> ApiResult<Json<NamespaceView>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(
        state.get_namespace(&access, &cluster, &namespace).await?,
    ))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/namespaces", tag = "namespaces",
    params(("boundary" = String, Path), ListParams),
    responses((status = 200, body = NamespaceList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<NamespaceList>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(state.list_namespaces(&access, &params.page()).await?))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/clusters/{cluster}/namespaces/{namespace}",
    tag = "namespaces",
    params(("boundary" = String, Path), ("cluster" = String, Path), ("namespace" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 503, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster, namespace)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let access = open(&state, &caller, &boundary).await?;
    state
        .release_namespace(&access, &cluster, &namespace)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
