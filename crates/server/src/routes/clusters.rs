//! Clusters (platform-level, admin only) and their attachment to boundaries. Credentials
//! are checked against SPEC 4.1, stored sealed, and never returned.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::view::{ClusterCredentials, ClusterList, ClusterView};
use palisade_app::Caller;
use serde::Deserialize;

use super::{open, ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteParams {
    /// `true`: forget the cluster even when palisade's objects cannot be removed from it.
    pub force: Option<bool>,
}

#[utoipa::path(put, path = "/v1/clusters/{cluster}", tag = "clusters",
    params(("cluster" = String, Path)), request_body = ClusterCredentials,
    responses((status = 200, body = ClusterView), (status = 201, body = ClusterView),
        (status = 400, body = crate::openapi::Error), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path(cluster): Path<String>,
    body: UnreadBody,
) -> ApiResult<impl IntoResponse> {
    caller.require_admin()?;
    palisade_app::path_name("cluster", &cluster)?;
    let credentials: ClusterCredentials = body.read().await?.parse()?;
    let (view, created) = state
        .put_cluster(
            &caller,
            &cluster,
            &credentials.kubeconfig,
            credentials.reserved_namespaces.as_deref(),
        )
        .await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)))
}

#[utoipa::path(get, path = "/v1/clusters", tag = "clusters", params(ListParams),
    responses((status = 200, body = ClusterList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<ClusterList>> {
    Ok(Json(state.list_clusters(&caller, &params.page()).await?))
}

#[utoipa::path(get, path = "/v1/clusters/{cluster}", tag = "clusters",
    params(("cluster" = String, Path)),
    responses((status = 200, body = ClusterView), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn get_one(
    State(state): State<AppState>,
    caller: Caller,
    Path(cluster): Path<String>,
) -> ApiResult<Json<ClusterView>> {
    Ok(Json(state.get_cluster(&caller, &cluster).await?))
}

/// Removes palisade's objects from the cluster (every boundary's policies, then the
/// boundary-label guard), then forgets the cluster. An unreachable cluster is a 409 unless
/// `?force=true`.
#[utoipa::path(delete, path = "/v1/clusters/{cluster}", tag = "clusters",
    params(("cluster" = String, Path), DeleteParams),
    responses((status = 204), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(cluster): Path<String>,
    Query(params): Query<DeleteParams>,
) -> ApiResult<StatusCode> {
    state
        .delete_cluster(&caller, &cluster, params.force == Some(true))
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/clusters", tag = "clusters",
    params(("boundary" = String, Path), ListParams),
    responses((status = 200, body = ClusterList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list_attached(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<ClusterList>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(
        state.attached_clusters(&access, &params.page()).await?,
    ))
}

#[utoipa::path(put, path = "/v1/boundaries/{boundary}/clusters/{cluster}", tag = "clusters",
    params(("boundary" = String, Path), ("cluster" = String, Path)),
    responses((status = 200, body = ClusterView), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn attach(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster)): Path<(String, String)>,
) -> ApiResult<Json<ClusterView>> {
    let access = open(&state, &caller, &boundary).await?;
    Ok(Json(state.attach_cluster(&access, &cluster).await?))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/clusters/{cluster}", tag = "clusters",
    params(("boundary" = String, Path), ("cluster" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn detach(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let access = open(&state, &caller, &boundary).await?;
    state.detach_cluster(&access, &cluster).await?;
    Ok(StatusCode::NO_CONTENT)
}
