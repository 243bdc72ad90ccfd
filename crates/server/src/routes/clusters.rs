//! Clusters (platform-level, admin only) and their attachment to boundaries. Credentials
//! are checked against SPEC 4.1, stored sealed, and never returned.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use palisade_store::{ClusterRecord, StoreError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::boundaries::parse_body;
use super::{page, path_name, visible_boundary, ListParams};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::sealing::validate_kubeconfig;
use crate::{AppState, Body};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterCredentials {
    /// A kubeconfig with one cluster, user and context, an https server and inline
    /// credentials.
    #[schema(min_length = 1)]
    pub kubeconfig: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Admission {
    /// Whether admission rules are enforced in this cluster.
    pub enforced: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterView {
    pub name: String,
    /// As observed by `/version`; absent until palisade has reached the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    pub admission: Admission,
    /// Why palisade's last attempt to reconcile the cluster failed (e.g. unreachable); absent
    /// after a success. palisade retries with backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A page of clusters (`{"items": [...], "continue": "..."?}`, by name).
#[derive(Debug, Serialize, ToSchema)]
pub struct ClusterList {
    pub items: Vec<ClusterView>,
    /// Pass as `?continue=` for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// One page of `records`, in name order.
fn cluster_page(mut records: Vec<ClusterRecord>, params: &ListParams) -> ApiResult<ClusterList> {
    records.sort_by(|a, b| a.name.cmp(&b.name));
    let page = page(records, |r| r.name.clone(), params)?;
    Ok(ClusterList {
        items: page.items.into_iter().map(view).collect(),
        continue_token: page.continue_token,
    })
}

fn view(record: ClusterRecord) -> ClusterView {
    ClusterView {
        name: record.name,
        kubernetes_version: record.kubernetes_version,
        admission: Admission {
            enforced: record.admission_enforced.unwrap_or(false),
            reason: match record.admission_enforced {
                None => Some("not checked yet: palisade has not reached this cluster".into()),
                Some(_) => record.admission_reason,
            },
        },
        last_error: record.last_error,
        created_at: record.created_at,
        updated_at: record.updated_at,
    }
}

/// A client for the cluster, from its sealed credentials.
pub async fn connect(
    state: &AppState,
    record: &ClusterRecord,
) -> ApiResult<palisade_reconciler::ClusterClient> {
    let plain = state
        .sealing
        .open(&record.kubeconfig_sealed)
        .map_err(|e| ApiError::Internal(format!("cluster '{}' credentials: {e}", record.name)))?;
    let text = String::from_utf8(plain)
        .map_err(|e| ApiError::Internal(format!("cluster '{}' credentials: {e}", record.name)))?;
    palisade_reconciler::ClusterClient::from_kubeconfig(&text)
        .await
        .map_err(|e| ApiError::ClusterUnavailable(format!("cluster '{}': {e}", record.name)))
}

/// This installation's id (made on first use; the reconciler reads the same).
pub async fn installation(state: &AppState) -> ApiResult<String> {
    state
        .store
        .installation_id(&crate::new_installation_id())
        .await
        .map_err(|e| ApiError::from_store(e, "installation"))
}

#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct DeleteParams {
    /// `true`: forget the cluster even when palisade's objects cannot be removed from it.
    pub force: Option<bool>,
}

/// The cluster's record; 404 naming it when it is unknown.
async fn find_cluster(state: &AppState, name: &str) -> ApiResult<ClusterRecord> {
    state.store.get_cluster(name).await.map_err(|e| match e {
        StoreError::NotFound => cluster_not_found(name),
        other => ApiError::from_store(other, "cluster"),
    })
}

fn cluster_not_found(name: &str) -> ApiError {
    ApiError::NotFound(format!("cluster '{name}' not found"))
}

#[utoipa::path(put, path = "/v1/clusters/{cluster}", tag = "clusters",
    params(("cluster" = String, Path)), request_body = ClusterCredentials,
    responses((status = 200, body = ClusterView), (status = 201, body = ClusterView),
        (status = 400, body = crate::openapi::Error), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path(cluster): Path<String>,
    body: Body,
) -> ApiResult<impl IntoResponse> {
    caller.require_admin()?;
    path_name("cluster", &cluster)?;
    let credentials: ClusterCredentials = parse_body(&body)?;
    // What is stored is the validated document itself (merge keys resolved).
    let kubeconfig = validate_kubeconfig(&credentials.kubeconfig)?;
    let sealed = state.sealing.seal(kubeconfig.as_bytes());
    let created = state
        .store
        .put_cluster(&cluster, &sealed)
        .await
        .map_err(|e| ApiError::from_store(e, "cluster"))?;
    let record = state
        .store
        .get_cluster(&cluster)
        .await
        .map_err(|e| ApiError::from_store(e, "cluster"))?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view(record))))
}

#[utoipa::path(get, path = "/v1/clusters", tag = "clusters", params(ListParams),
    responses((status = 200, body = ClusterList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    super::Query(params): super::Query<ListParams>,
) -> ApiResult<Json<ClusterList>> {
    caller.require_admin()?;
    params.limit()?;
    let records = state
        .store
        .list_clusters()
        .await
        .map_err(|e| ApiError::from_store(e, "cluster"))?;
    Ok(Json(cluster_page(records, &params)?))
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
    caller.require_admin()?;
    let record = find_cluster(&state, &cluster).await?;
    Ok(Json(view(record)))
}

/// Removes palisade's objects from the cluster (every boundary's policies, then the
/// boundary-label guard), then forgets the cluster. An unreachable cluster is a 409 unless
/// `?force=true`.
#[utoipa::path(delete, path = "/v1/clusters/{cluster}", tag = "clusters",
    params(("cluster" = String, Path), DeleteParams),
    responses((status = 204), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(cluster): Path<String>,
    super::Query(params): super::Query<DeleteParams>,
) -> ApiResult<StatusCode> {
    caller.require_admin()?;
    let record = find_cluster(&state, &cluster).await?;
    let installation = installation(&state).await?;
    let removed = async {
        let client = connect(&state, &record).await.map_err(|e| e.to_string())?;
        client
            .remove_installation(&installation)
            .await
            .map_err(|e| e.to_string())
    }
    .await;
    match removed {
        Ok(names) => tracing::info!(cluster, removed = ?names, "palisade's objects removed"),
        Err(reason) if params.force == Some(true) => {
            tracing::warn!(
                cluster,
                reason,
                "cluster forgotten without removing palisade's objects (force)"
            );
        }
        Err(reason) => {
            return Err(ApiError::Conflict(format!(
                "cluster '{cluster}': palisade's objects cannot be removed ({reason}); \
                 retry when it is reachable, or add ?force=true to forget it and leave them"
            )))
        }
    }
    state
        .store
        .delete_cluster(&cluster)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => cluster_not_found(&cluster),
            other => ApiError::from_store(other, "cluster"),
        })?;
    // A pass that ran meanwhile may have put objects back: sweep once more.
    if let Ok(client) = connect(&state, &record).await {
        let _ = client.remove_installation(&installation).await;
    }
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
    super::Query(params): super::Query<ListParams>,
) -> ApiResult<Json<ClusterList>> {
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    params.limit()?;
    let records = state
        .store
        .boundary_clusters(&boundary)
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    Ok(Json(cluster_page(records, &params)?))
}

#[utoipa::path(put, path = "/v1/boundaries/{boundary}/clusters/{cluster}", tag = "clusters",
    params(("boundary" = String, Path), ("cluster" = String, Path)),
    responses((status = 200, body = ClusterView), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn attach(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster)): Path<(String, String)>,
) -> ApiResult<Json<ClusterView>> {
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_admin()?;
    state
        .store
        .attach_cluster(&boundary, &cluster)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => cluster_not_found(&cluster),
            other => ApiError::from_store(other, "cluster"),
        })?;
    let record = state
        .store
        .get_cluster(&cluster)
        .await
        .map_err(|e| ApiError::from_store(e, "cluster"))?;
    Ok(Json(view(record)))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/clusters/{cluster}", tag = "clusters",
    params(("boundary" = String, Path), ("cluster" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn detach(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_admin()?;
    state
        .store
        .detach_cluster(&boundary, &cluster)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::NotFound(format!(
                "cluster '{cluster}' is not attached to boundary '{boundary}'"
            )),
            other => ApiError::from_store(other, "cluster"),
        })?;
    Ok(StatusCode::NO_CONTENT)
}
