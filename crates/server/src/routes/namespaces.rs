//! A boundary's namespaces: palisade creates a namespace labelled
//! `palisade.dev/boundary=<boundary>` in an attached cluster, or adopts (labels) an existing
//! one; the boundary's admission rules apply there from then on. Deleting releases it: the
//! label is removed, the namespace and its objects stay.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use palisade_policy::Name;
use palisade_reconciler::{LabelOutcome, ReconcileError};
use palisade_store::{NamespaceRecord, StoreError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::boundaries::parse_body;
use super::clusters::connect;
use super::{path_name, visible_boundary};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::{AppState, Body};

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NamespaceRequest {
    /// `true`: label the namespace when it exists and carries no boundary label. Without it,
    /// an existing namespace is a 409 (palisade does not take over namespaces by accident).
    #[serde(default)]
    pub adopt: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NamespaceView {
    pub boundary: String,
    pub cluster: String,
    pub name: String,
    pub created_at: String,
    /// In the answer to a `PUT`: `created`, `adopted` or `unchanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct NamespaceList {
    pub items: Vec<NamespaceView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

fn view(record: NamespaceRecord, action: Option<&str>) -> NamespaceView {
    NamespaceView {
        boundary: record.boundary,
        cluster: record.cluster,
        name: record.name,
        created_at: record.created_at,
        action: action.map(str::to_owned),
    }
}

fn namespace_not_found(boundary: &str, cluster: &str, namespace: &str) -> ApiError {
    ApiError::NotFound(format!(
        "namespace '{namespace}' of boundary '{boundary}' not found in cluster '{cluster}'"
    ))
}

/// A store failure on one namespace: `NotFound` names it.
fn namespace_error(error: StoreError, boundary: &str, cluster: &str, namespace: &str) -> ApiError {
    match error {
        StoreError::NotFound => namespace_not_found(boundary, cluster, namespace),
        other => ApiError::from_store(other, "namespace"),
    }
}

/// The attached cluster's record (404 when the cluster is not attached to the boundary).
async fn attached_cluster(
    state: &AppState,
    boundary: &str,
    cluster: &str,
) -> ApiResult<palisade_store::ClusterRecord> {
    let attached = state
        .store
        .boundary_clusters(boundary)
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    attached
        .into_iter()
        .find(|c| c.name == cluster)
        .ok_or_else(|| {
            ApiError::NotFound(format!(
                "cluster '{cluster}' is not attached to boundary '{boundary}'"
            ))
        })
}

fn cluster_error(cluster: &str, namespace: &str, error: ReconcileError) -> ApiError {
    match error {
        ReconcileError::LabelledForOtherBoundary(other) => ApiError::Conflict(format!(
            "namespace '{namespace}' in cluster '{cluster}' is labelled for boundary '{other}'"
        )),
        ReconcileError::NamespaceExists(_) => ApiError::Conflict(format!(
            "namespace '{namespace}' already exists in cluster '{cluster}' without a boundary \
             label; send {{\"adopt\": true}} to adopt it"
        )),
        other => ApiError::ClusterUnavailable(format!(
            "cluster '{cluster}' could not label namespace '{namespace}': {other}"
        )),
    }
}

#[utoipa::path(put, path = "/v1/boundaries/{boundary}/clusters/{cluster}/namespaces/{namespace}",
    tag = "namespaces",
    params(("boundary" = String, Path), ("cluster" = String, Path), ("namespace" = String, Path)),
    request_body = NamespaceRequest,
    responses((status = 200, body = NamespaceView), (status = 201, body = NamespaceView),
        (status = 400, body = crate::openapi::Error), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 503, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster, namespace)): Path<(String, String, String)>,
    body: Body,
) -> ApiResult<impl IntoResponse> {
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    path_name("namespace", &namespace)?;
    let request: NamespaceRequest = if body.bytes.iter().all(u8::is_ascii_whitespace) {
        NamespaceRequest::default()
    } else {
        parse_body(&body)?
    };
    let record = attached_cluster(&state, &boundary, &cluster).await?;
    // Another boundary's namespace is refused before the cluster is touched.
    let boundary_name =
        Name::parse(&boundary).map_err(|e| ApiError::invalid("/path/boundary", e))?;
    let known = state.store.cluster_namespaces(&cluster).await;
    if let Ok(known) = known {
        if let Some(other) = known
            .iter()
            .find(|n| n.name == namespace && n.boundary != boundary)
        {
            return Err(ApiError::Conflict(format!(
                "namespace '{namespace}' in cluster '{cluster}' belongs to boundary '{}'",
                other.boundary
            )));
        }
    }
    let client = connect(&state, &record).await?;
    let outcome = client
        .label_namespace(&boundary_name, &namespace, request.adopt == Some(true))
        .await
        .map_err(|e| cluster_error(&cluster, &namespace, e))?;
    let created = state
        .store
        .put_namespace(&boundary, &cluster, &namespace)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => ApiError::NotFound(format!(
                "cluster '{cluster}' is not attached to boundary '{boundary}'"
            )),
            other => ApiError::from_store(other, "namespace"),
        })?;
    let stored = state
        .store
        .get_namespace(&boundary, &cluster, &namespace)
        .await
        .map_err(|e| ApiError::from_store(e, "namespace"))?;
    let action = match outcome {
        LabelOutcome::Created => "created",
        LabelOutcome::Adopted => "adopted",
        LabelOutcome::Unchanged => "unchanged",
    };
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view(stored, Some(action)))))
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
    visible_boundary(&state, &caller, &boundary).await?;
    let record = state
        .store
        .get_namespace(&boundary, &cluster, &namespace)
        .await
        .map_err(|e| namespace_error(e, &boundary, &cluster, &namespace))?;
    Ok(Json(view(record, None)))
}

#[utoipa::path(get, path = "/v1/boundaries/{boundary}/namespaces", tag = "namespaces",
    params(("boundary" = String, Path), super::ListParams),
    responses((status = 200, body = NamespaceList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Path(boundary): Path<String>,
    super::Query(params): super::Query<super::ListParams>,
) -> ApiResult<Json<NamespaceList>> {
    visible_boundary(&state, &caller, &boundary).await?;
    params.limit()?;
    let records = state
        .store
        .list_namespaces(&boundary)
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    let mut views: Vec<NamespaceView> = records.into_iter().map(|r| view(r, None)).collect();
    views.sort_by(|a, b| (&a.cluster, &a.name).cmp(&(&b.cluster, &b.name)));
    // The key `<cluster>/<namespace>` orders as (cluster, namespace): names hold no `/`.
    let page = super::page(views, |n| format!("{}/{}", n.cluster, n.name), &params)?;
    Ok(Json(NamespaceList {
        items: page.items,
        continue_token: page.continue_token,
    }))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/clusters/{cluster}/namespaces/{namespace}",
    tag = "namespaces",
    params(("boundary" = String, Path), ("cluster" = String, Path), ("namespace" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 503, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, cluster, namespace)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    state
        .store
        .get_namespace(&boundary, &cluster, &namespace)
        .await
        .map_err(|e| namespace_error(e, &boundary, &cluster, &namespace))?;
    let record = state
        .store
        .get_cluster(&cluster)
        .await
        .map_err(|e| ApiError::from_store(e, "cluster"))?;
    let boundary_name =
        Name::parse(&boundary).map_err(|e| ApiError::invalid("/path/boundary", e))?;
    let client = connect(&state, &record).await?;
    match client.release_namespace(&boundary_name, &namespace).await {
        // Relabelled by a cluster admin meanwhile: nothing of ours to remove.
        Ok(_) | Err(ReconcileError::LabelledForOtherBoundary(_)) => {}
        Err(other) => {
            return Err(ApiError::ClusterUnavailable(format!(
                "cluster '{cluster}' could not release namespace '{namespace}': {other}"
            )))
        }
    }
    state
        .store
        .delete_namespace(&boundary, &cluster, &namespace)
        .await
        .map_err(|e| namespace_error(e, &boundary, &cluster, &namespace))?;
    Ok(StatusCode::NO_CONTENT)
}
