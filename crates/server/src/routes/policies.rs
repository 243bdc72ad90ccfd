//! Policies of a boundary: `PUT` with the document's `spec` as body, `GET`, `DELETE`,
//! history, and `POST /v1/apply` of whole YAML documents (all or nothing). Saving validates
//! the document (400 naming the field) and answers the save warnings of SPEC 1.

use std::collections::{BTreeMap, BTreeSet};

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use palisade_api_types::document::spec_of;
use palisade_api_types::document::ValidPolicy;
use palisade_api_types::{PolicyDocument, PolicySpec};
use palisade_policy::policy::blocked_type_warnings;
use palisade_policy::{Catalog, Name, Policy};
use palisade_store::{PolicyRecord, PolicyWrite, StoreError, WriteAction};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{etag_header, if_match, page, path_name, visible_boundary, List, ListParams, Query};
use crate::auth::Caller;
use crate::error::{ApiError, ApiResult};
use crate::guard::decode_policy;
use crate::{AppState, Body};

/// A stored policy as the API shows it.
#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyView {
    pub boundary: String,
    pub name: String,
    /// The document's `spec`, as saved (normalised).
    #[schema(value_type = Object)]
    pub spec: serde_json::Value,
    /// `labels` and `annotations` of the document's metadata.
    #[schema(value_type = Object)]
    pub metadata: serde_json::Value,
    pub etag: String,
    pub created_at: String,
    pub updated_at: String,
    pub updated_by: String,
    /// Where the policy is installed and what it enforces there.
    pub status: PolicyStatus,
    /// Save warnings (only in the answer to a save).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyList {
    pub items: Vec<PolicyView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// A policy's install status (SPEC 3.4).
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct PolicyStatus {
    /// One entry per attached cluster in the policy's scope, by cluster name; empty for a
    /// policy without admission rules (nothing of it is installed in clusters).
    pub clusters: Vec<ClusterStatus>,
}

#[derive(Clone, Debug, Serialize, ToSchema)]
pub struct ClusterStatus {
    pub cluster: String,
    /// `pending`, `installed` (no namespace of the boundary to confirm it in), `enforced`,
    /// `error: <reason>` or `not enforced: <reason>`.
    pub status: String,
    /// When the reconciler recorded it; absent while `pending`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
}

/// The per-cluster statuses of `records` (all of one boundary): for each attached cluster in
/// a policy's scope, what the reconciler recorded for the policy's current version, else
/// `pending`.
pub async fn statuses(
    state: &AppState,
    boundary: &str,
    records: &[PolicyRecord],
) -> ApiResult<std::collections::HashMap<String, PolicyStatus>> {
    use std::collections::HashMap;
    let mut out: HashMap<String, PolicyStatus> = HashMap::new();
    if records.is_empty() {
        return Ok(out);
    }
    let clusters = state
        .store
        .boundary_clusters(boundary)
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    let rows = state
        .store
        .policy_statuses(boundary)
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    let mut recorded: HashMap<(&str, &str), &palisade_store::PolicyStatusRecord> = HashMap::new();
    for row in &rows {
        recorded.insert((row.policy.as_str(), row.cluster.as_str()), row);
    }
    for record in records {
        let decoded = crate::guard::decode_policy(record, &state.catalog).ok();
        let mut status = PolicyStatus::default();
        for cluster in &clusters {
            let in_scope = match &decoded {
                Some(policy) => {
                    policy.has_admission_rules()
                        && Name::parse(&cluster.name).is_ok_and(|c| policy.scope().includes(&c))
                }
                // Undecodable: the reconciler reports it per cluster.
                None => true,
            };
            if !in_scope {
                continue;
            }
            let entry = match recorded.get(&(record.name.as_str(), cluster.name.as_str())) {
                Some(row) if row.policy_etag == record.etag => ClusterStatus {
                    cluster: cluster.name.clone(),
                    status: row.status.clone(),
                    updated_at: Some(row.updated_at.clone()),
                },
                _ => ClusterStatus {
                    cluster: cluster.name.clone(),
                    status: "pending".to_owned(),
                    updated_at: None,
                },
            };
            status.clusters.push(entry);
        }
        out.insert(record.name.clone(), status);
    }
    Ok(out)
}

/// `view` with the record's status looked up.
pub async fn view_with_status(
    state: &AppState,
    record: PolicyRecord,
    warnings: Option<Vec<String>>,
) -> ApiResult<PolicyView> {
    let mut statuses = statuses(state, &record.boundary, std::slice::from_ref(&record)).await?;
    let status = statuses.remove(&record.name).unwrap_or_default();
    let mut view = view(record, warnings);
    view.status = status;
    Ok(view)
}

pub fn view(record: PolicyRecord, warnings: Option<Vec<String>>) -> PolicyView {
    PolicyView {
        status: PolicyStatus::default(),
        spec: serde_json::from_str(&record.spec_json).unwrap_or(serde_json::Value::Null),
        metadata: serde_json::from_str(&record.metadata_json)
            .unwrap_or_else(|_| serde_json::json!({})),
        boundary: record.boundary,
        name: record.name,
        etag: record.etag,
        created_at: record.created_at,
        updated_at: record.updated_at,
        updated_by: record.updated_by,
        warnings,
    }
}

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
) -> ApiResult<Json<List<PolicyView>>> {
    visible_boundary(&state, &caller, &boundary).await?;
    let records = state
        .store
        .list_policies(&boundary)
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    let mut statuses = statuses(&state, &boundary, &records).await?;
    let views = records
        .into_iter()
        .map(|r| {
            let status = statuses.remove(&r.name).unwrap_or_default();
            let mut view = view(r, None);
            view.status = status;
            view
        })
        .collect();
    Ok(Json(page(views, |p| p.name.clone(), &params)?))
}

fn policy_not_found(boundary: &str, name: &str) -> ApiError {
    ApiError::NotFound(format!(
        "policy '{name}' not found in boundary '{boundary}'"
    ))
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
    visible_boundary(&state, &caller, &boundary).await?;
    let record = state
        .store
        .get_policy(&boundary, &name)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => policy_not_found(&boundary, &name),
            other => ApiError::from_store(other, "policy"),
        })?;
    let etag = etag_header(&record.etag);
    Ok((etag, Json(view_with_status(&state, record, None).await?)))
}

/// The save warnings of a policy: its document's own warnings, except that "creates of T
/// are now refused" is replaced by `blocked`, decided on the whole boundary after the save.
/// Keeps the documented order: normalisations and plan entries, blocked types, repositories.
fn save_warnings(own: Vec<String>, blocked: &[String]) -> Vec<String> {
    let mut warnings: Vec<String> = own
        .into_iter()
        .filter(|w| !w.starts_with("creates of "))
        .collect();
    let split = warnings
        .iter()
        .position(|w| w.starts_with("registry prefix '") && w.contains("names a repository"))
        .unwrap_or(warnings.len());
    let tail = warnings.split_off(split);
    warnings.extend(blocked.iter().cloned());
    warnings.extend(tail);
    warnings
}

/// Blocked-type warnings of `policy` saved among `others` (the boundary's other policies).
fn blocked_after_save(policy: &Policy, others: &[Policy], catalog: &Catalog) -> Vec<String> {
    let mut all: Vec<Policy> = others.to_vec();
    all.push(policy.clone());
    blocked_type_warnings(&all, catalog)
}

/// The boundary's other stored policies, decoded (for save warnings). A policy that cannot
/// be decoded is left out of the warnings, not a reason to refuse the save.
async fn other_policies(state: &AppState, boundary: &str, except: &str) -> ApiResult<Vec<Policy>> {
    let mut policies = stored_policies(state, boundary).await?;
    policies.retain(|p| p.name().as_str() != except);
    Ok(policies)
}

/// Every stored policy of the boundary that can be decoded.
async fn stored_policies(state: &AppState, boundary: &str) -> ApiResult<Vec<Policy>> {
    let records = state
        .store
        .list_policies(boundary)
        .await
        .map_err(|e| ApiError::from_store(e, "boundary"))?;
    Ok(records
        .iter()
        .filter_map(|r| decode_policy(r, &state.catalog).ok())
        .collect())
}

fn metadata_json(
    labels: &std::collections::BTreeMap<String, String>,
    annotations: &std::collections::BTreeMap<String, String>,
) -> String {
    serde_json::json!({"labels": labels, "annotations": annotations}).to_string()
}

/// Validates and saves the spec of policy `boundary/name` (the caller already authorised):
/// 400 naming the field, 412 on a stale `if_match`. Returns the record, what happened and
/// the save warnings. Shared by the API and the portal's editor.
pub async fn save_policy(
    state: &AppState,
    actor: &str,
    boundary: &str,
    name: &str,
    spec_json: &[u8],
    if_match: Option<String>,
) -> ApiResult<(PolicyRecord, WriteAction, Vec<String>)> {
    save_policy_with(state, actor, boundary, name, spec_json, if_match, false).await
}

/// [`save_policy`], and with `create_only` (`If-None-Match: *`) a 412 when the policy exists.
pub async fn save_policy_with(
    state: &AppState,
    actor: &str,
    boundary: &str,
    name: &str,
    spec_json: &[u8],
    if_match: Option<String>,
    create_only: bool,
) -> ApiResult<(PolicyRecord, WriteAction, Vec<String>)> {
    path_name("policy", name)?;
    // One JSON value, no key twice: what is validated is what is saved.
    crate::json::parse_value(spec_json)?;
    let spec = PolicySpec::from_json(spec_json).map_err(|e| {
        if e.pointer.is_empty() {
            ApiError::InvalidRequest(format!(
                "the body is not a valid policy spec: {}",
                e.message
            ))
        } else {
            ApiError::InvalidRequest(e.to_string())
        }
    })?;
    let policy_name = Name::parse(name).map_err(|e| ApiError::invalid("/path/policy", e))?;
    let (policy, own_warnings) = spec
        .validate(policy_name, &state.catalog)
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let others = other_policies(state, boundary, name).await?;
    let blocked = blocked_after_save(&policy, &others, &state.catalog);
    let warnings = save_warnings(own_warnings, &blocked);
    let metadata = match state.store.get_policy(boundary, name).await {
        Ok(existing) => existing.metadata_json,
        Err(StoreError::NotFound) => {
            if others.len() >= MAX_POLICIES_PER_BOUNDARY {
                return Err(ApiError::invalid(
                    "/path/policy",
                    too_many_policies(boundary, others.len() + 1),
                ));
            }
            metadata_json(&Default::default(), &Default::default())
        }
        Err(other) => return Err(ApiError::from_store(other, "policy")),
    };
    let write = PolicyWrite {
        boundary: boundary.to_owned(),
        name: name.to_owned(),
        spec_json: canonical_spec(&policy),
        metadata_json: metadata,
        if_match,
        create_only,
    };
    let (record, action) = state
        .store
        .put_policy(write, actor)
        .await
        .map_err(|e| match e {
            StoreError::PreconditionFailed if create_only => ApiError::AlreadyExists(format!(
                "policy '{name}' already exists in boundary '{boundary}' (If-None-Match: * creates only)"
            )),
            other => ApiError::from_store(other, "policy"),
        })?;
    tracing::info!(%boundary, policy = %name, action = action.as_str(), %actor, "policy saved");
    Ok((record, action, warnings))
}

/// `If-None-Match: *` (create only); any other value is a 400: palisade keeps no weak etags
/// to compare with, and a GET-style conditional PUT means nothing here.
fn if_none_match_star(headers: &HeaderMap) -> ApiResult<bool> {
    match headers.get(axum::http::header::IF_NONE_MATCH) {
        None => Ok(false),
        Some(value) if value.to_str().ok().map(str::trim) == Some("*") => Ok(true),
        Some(_) => Err(ApiError::InvalidRequest(
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
        (status = 415, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn put(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<impl IntoResponse> {
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    path_name("policy", &name)?;
    body.require_json(&[])?;
    let (record, action, warnings) = save_policy_with(
        &state,
        &caller.actor(),
        &boundary,
        &name,
        &body.bytes,
        if_match(&headers),
        if_none_match_star(&headers)?,
    )
    .await?;
    let status = if action == WriteAction::Created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let etag = etag_header(&record.etag);
    Ok((
        status,
        etag,
        Json(view_with_status(&state, record, Some(warnings)).await?),
    ))
}

fn canonical_spec(policy: &Policy) -> String {
    serde_json::to_string(&spec_of(policy)).unwrap_or_default()
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/policies/{policy}", tag = "policies",
    params(("boundary" = String, Path), ("policy" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read")),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 412, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    visible_boundary(&state, &caller, &boundary).await?;
    caller.require_boundary_admin()?;
    state
        .store
        .delete_policy(
            &boundary,
            &name,
            if_match(&headers).as_deref(),
            &caller.actor(),
        )
        .await
        .map_err(|e| match e {
            StoreError::NotFound => policy_not_found(&boundary, &name),
            other => ApiError::from_store(other, "policy"),
        })?;
    Ok(StatusCode::NO_CONTENT)
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HistoryEntry {
    pub actor: String,
    pub at: String,
    /// The spec before the change; absent for a creation.
    #[schema(value_type = Option<Object>)]
    pub before: Option<serde_json::Value>,
    /// The spec after the change; absent for a deletion.
    #[schema(value_type = Option<Object>)]
    pub after: Option<serde_json::Value>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct History {
    /// Oldest first.
    pub items: Vec<HistoryEntry>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
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
    visible_boundary(&state, &caller, &boundary).await?;
    params.limit()?;
    let entries = state
        .store
        .policy_history(&boundary, &name)
        .await
        .map_err(|e| match e {
            StoreError::NotFound => policy_not_found(&boundary, &name),
            other => ApiError::from_store(other, "policy"),
        })?;
    let parse = |text: Option<String>| text.and_then(|t| serde_json::from_str(&t).ok());
    // The continue token is the position of the last entry returned, zero-padded so that
    // positions order as text.
    let numbered: Vec<(String, HistoryEntry)> = entries
        .into_iter()
        .enumerate()
        .map(|(position, e)| {
            (
                format!("{position:010}"),
                HistoryEntry {
                    actor: e.actor,
                    at: e.at,
                    before: parse(e.before_json),
                    after: parse(e.after_json),
                },
            )
        })
        .collect();
    let page = page(numbered, |(key, _)| key.clone(), &params)?;
    Ok(Json(History {
        items: page.items.into_iter().map(|(_, entry)| entry).collect(),
        continue_token: page.continue_token,
    }))
}

#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ApplyParams {
    /// `true`: validate and report what would change, write nothing.
    pub dry_run: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApplyResult {
    pub boundary: String,
    pub name: String,
    /// `created`, `configured` or `unchanged`.
    pub action: String,
    pub warnings: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ApplyResults {
    pub results: Vec<ApplyResult>,
}

#[utoipa::path(post, path = "/v1/apply", tag = "policies", params(ApplyParams),
    request_body(content = String, content_type = "application/yaml",
        description = "one or more BoundaryPolicy documents"),
    responses((status = 200, body = ApplyResults), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn apply(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ApplyParams>,
    body: Body,
) -> ApiResult<Json<ApplyResults>> {
    // Parsing and validation are CPU work: off the async workers, a few at a time, and
    // stopped between documents when the client goes away (this future is dropped).
    let cancel = CancelOnDrop::default();
    let stop = cancel.flag();
    let turn = state
        .heavy_work
        .clone()
        .acquire_owned()
        .await
        .map_err(|_| ApiError::Internal("the work queue is closed".into()))?;
    let catalog = state.catalog.clone();
    let bytes = body.bytes;
    let parsed = tokio::task::spawn_blocking(move || parse_apply(&bytes, &catalog, &stop))
        .await
        .map_err(|e| ApiError::Internal(format!("apply validation stopped: {e}")))??;
    drop(turn);
    // Answer order (SPEC 2.4): a boundary the caller cannot see (404) before the role (403)
    // before the body's contents (400).
    for boundary in &parsed.boundaries {
        visible_boundary(&state, &caller, boundary).await?;
    }
    caller.require_boundary_admin()?;
    let valid = parsed.documents?;
    let dry_run = params.dry_run.unwrap_or(false);
    let writes: Vec<PolicyWrite> = valid
        .iter()
        .map(|(_, document, checked)| PolicyWrite {
            boundary: checked.boundary.to_string(),
            name: checked.policy.name().to_string(),
            spec_json: canonical_spec(&checked.policy),
            metadata_json: metadata_json(&document.metadata.labels, &document.metadata.annotations),
            if_match: None,
            create_only: false,
        })
        .collect();

    // Each boundary's stored policies are read once, however many documents name it; the
    // request's policies replace their stored versions and count too.
    let mut by_boundary: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (position, write) in writes.iter().enumerate() {
        by_boundary
            .entry(write.boundary.as_str())
            .or_default()
            .push(position);
    }
    let mut warnings: Vec<Vec<String>> = vec![Vec::new(); valid.len()];
    let mut dry_run_actions = vec![WriteAction::Created; valid.len()];
    for (boundary, positions) in &by_boundary {
        let records = state
            .store
            .list_policies(boundary)
            .await
            .map_err(|e| ApiError::from_store(e, "boundary"))?;
        let stored: BTreeMap<&str, &PolicyRecord> =
            records.iter().map(|r| (r.name.as_str(), r)).collect();
        let named: BTreeSet<&str> = positions.iter().map(|&i| writes[i].name.as_str()).collect();
        let kept: Vec<&PolicyRecord> = records
            .iter()
            .filter(|r| !named.contains(r.name.as_str()))
            .collect();
        let total = kept.len() + named.len();
        if total > MAX_POLICIES_PER_BOUNDARY {
            let first_new = positions
                .iter()
                .find(|&&i| !stored.contains_key(writes[i].name.as_str()))
                .map_or(0, |&i| valid[i].0);
            return Err(ApiError::invalid(
                &format!("/{first_new}/metadata/name"),
                too_many_policies(boundary, total),
            ));
        }
        let mut after: Vec<Policy> = kept
            .iter()
            .filter_map(|r| decode_policy(r, &state.catalog).ok())
            .collect();
        after.extend(positions.iter().map(|&i| valid[i].2.policy.clone()));
        let blocked = blocked_type_warnings(&after, &state.catalog);
        for &i in positions {
            warnings[i] = save_warnings(valid[i].2.warnings.clone(), &blocked);
            if let Some(record) = stored.get(writes[i].name.as_str()) {
                dry_run_actions[i] = if record.spec_json == writes[i].spec_json
                    && record.metadata_json == writes[i].metadata_json
                {
                    WriteAction::Unchanged
                } else {
                    WriteAction::Configured
                };
            }
        }
    }
    let actions: Vec<WriteAction> = if dry_run {
        dry_run_actions
    } else {
        state
            .store
            .apply_policies(writes, &caller.actor())
            .await
            .map_err(|e| ApiError::from_store(e, "boundary"))?
            .into_iter()
            .map(|(_, action)| action)
            .collect()
    };
    let results = valid
        .iter()
        .zip(actions)
        .zip(warnings)
        .map(|(((_, _, checked), action), warnings)| ApplyResult {
            boundary: checked.boundary.to_string(),
            name: checked.policy.name().to_string(),
            action: action.as_str().to_owned(),
            warnings,
        })
        .collect();
    Ok(Json(ApplyResults { results }))
}

/// At most this many documents in one `POST /v1/apply` (413 beyond).
pub const MAX_APPLY_DOCUMENTS: usize = 1000;

/// At most this many policies in one boundary (400 on the save that would exceed it).
pub const MAX_POLICIES_PER_BOUNDARY: usize = 500;

fn too_many_policies(boundary: &str, count: usize) -> String {
    format!(
        "boundary '{boundary}' would hold {count} policies; at most \
         {MAX_POLICIES_PER_BOUNDARY} policies are allowed in one boundary"
    )
}

/// A validated document of an apply: its index in the stream, the document, the policy.
type ValidDocument = (usize, PolicyDocument, ValidPolicy);

/// What the CPU-bound part of an apply found: the boundaries the documents name (for the
/// visibility check, which comes before the body's own errors) and the validated documents
/// or the first error.
struct ParsedApply {
    boundaries: BTreeSet<String>,
    documents: ApiResult<Vec<ValidDocument>>,
}

/// Only `metadata.boundary`, read from documents that may be invalid otherwise.
#[derive(Deserialize)]
struct BoundaryOf {
    metadata: Option<BoundaryOfMetadata>,
}

#[derive(Deserialize)]
struct BoundaryOfMetadata {
    boundary: Option<serde_json::Value>,
}

/// Parses and validates an apply body, in time linear in its size. Stops with an error when
/// `stop` is set (the client has gone). A body of more than [`MAX_APPLY_DOCUMENTS`]
/// documents is a 413 before any of them is validated.
fn parse_apply(
    bytes: &[u8],
    catalog: &Catalog,
    stop: &std::sync::atomic::AtomicBool,
) -> ApiResult<ParsedApply> {
    let text = std::str::from_utf8(bytes)
        .map_err(|_| ApiError::InvalidRequest("the body is not UTF-8 text".into()))?;
    let documents = palisade_api_types::yaml::documents::<PolicyDocument>(text);
    if documents.len() > MAX_APPLY_DOCUMENTS {
        return Err(ApiError::LimitExceeded(format!(
            "the body holds {} documents; at most {MAX_APPLY_DOCUMENTS} are accepted in one \
             apply: split it into several requests",
            documents.len()
        )));
    }
    match validate_documents(documents, catalog, stop) {
        Ok(valid) => Ok(ParsedApply {
            boundaries: valid
                .iter()
                .map(|(_, _, checked)| checked.boundary.to_string())
                .collect(),
            documents: Ok(valid),
        }),
        // Only an invalid body is read a second time, for the boundaries it names.
        Err(error) => Ok(ParsedApply {
            boundaries: named_boundaries(text),
            documents: Err(error),
        }),
    }
}

/// The boundaries the documents of `text` name, read leniently (a document may be invalid
/// otherwise).
fn named_boundaries(text: &str) -> BTreeSet<String> {
    palisade_api_types::yaml::documents::<BoundaryOf>(text)
        .iter()
        .filter_map(|(_, head)| head.as_ref().ok())
        .filter_map(|head| head.metadata.as_ref()?.boundary.as_ref()?.as_str())
        .filter(|b| Name::parse(b).is_ok())
        .map(str::to_owned)
        .collect()
}

fn validate_documents(
    documents: Vec<(
        usize,
        Result<PolicyDocument, palisade_api_types::yaml::YamlError>,
    )>,
    catalog: &Catalog,
    stop: &std::sync::atomic::AtomicBool,
) -> ApiResult<Vec<ValidDocument>> {
    if documents.is_empty() {
        return Err(ApiError::InvalidRequest(
            "the body holds no BoundaryPolicy document".into(),
        ));
    }
    // The pointer is prefixed with the document's index in the stream (`/1/spec/rules/0/...`).
    let mut valid = Vec::with_capacity(documents.len());
    let mut seen = BTreeSet::new();
    for (index, document) in documents {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(ApiError::Internal("the client went away".into()));
        }
        let document = document.map_err(|e| {
            let pointer = e.pointer.clone().unwrap_or_default();
            let position = match (e.line, e.column) {
                (Some(l), Some(c)) => format!(" (line {l} column {c})"),
                _ => String::new(),
            };
            ApiError::InvalidRequest(format!("/{index}{pointer}: {}{position}", e.message))
        })?;
        let checked = document.validate(catalog).map_err(|e| {
            ApiError::InvalidRequest(format!("/{index}{}: {}", e.pointer, e.message))
        })?;
        let key = (
            checked.boundary.to_string(),
            checked.policy.name().to_string(),
        );
        if !seen.insert(key.clone()) {
            return Err(ApiError::invalid(
                &format!("/{index}/metadata/name"),
                format!(
                    "policy '{}/{}' is defined twice in this request",
                    key.0, key.1
                ),
            ));
        }
        valid.push((index, document, checked));
    }
    Ok(valid)
}

/// Sets its flag when dropped: the blocking work it was handed stops at its next check.
#[derive(Debug, Default)]
struct CancelOnDrop(std::sync::Arc<std::sync::atomic::AtomicBool>);

impl CancelOnDrop {
    fn flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.0.clone()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    const TWO: &str = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: a, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n---\napiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: b, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n";

    #[test]
    fn validation_stops_when_the_client_has_gone() {
        let catalog = Catalog::builtin();
        let documents = || palisade_api_types::yaml::documents::<PolicyDocument>(TWO);
        let running = validate_documents(documents(), &catalog, &AtomicBool::new(false));
        assert_eq!(running.map(|v| v.len()).ok(), Some(2));
        let stopped = validate_documents(documents(), &catalog, &AtomicBool::new(true));
        assert!(matches!(stopped, Err(ApiError::Internal(_))));
    }

    #[test]
    fn dropping_the_request_sets_the_stop_flag() {
        let cancel = CancelOnDrop::default();
        let flag = cancel.flag();
        assert!(!flag.load(std::sync::atomic::Ordering::Relaxed));
        drop(cancel);
        assert!(flag.load(std::sync::atomic::Ordering::Relaxed));
    }

    #[test]
    fn the_boundaries_named_are_found_even_in_invalid_documents() {
        let body = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: a, boundary: other}\nspec: {rules: []}\n";
        let parsed = parse_apply(
            body.as_bytes(),
            &Catalog::builtin(),
            &AtomicBool::new(false),
        );
        let parsed = parsed.ok().map(|p| (p.boundaries, p.documents.is_err()));
        assert_eq!(parsed, Some((BTreeSet::from(["other".to_owned()]), true)));
    }
}
