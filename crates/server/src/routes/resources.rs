//! Resources of a boundary and the plan picker: where the compute-plan rule is enforced.
//! A create, or a merge patch that moves a plan (container-instance components matched by
//! name), is checked inside the write's transaction; functions are never checked but carry a
//! `Warning`; any other change succeeds on a now-disallowed plan (grandfathering).

use std::collections::BTreeSet;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use palisade_api_types::resource::{json_kind, merge_patch, Resource};
use palisade_policy::compute_plan::{decide, picker_options, plan_checks, PlanCheck, Plans};
use palisade_policy::{Name, Policy, ResourceType};
use palisade_store::{Edit, NewResource, ResourceKey, ResourceQuery, ResourceRecord, StoreError};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;
use utoipa::ToSchema;

use super::{etag_header, if_match, visible_boundary, ListParams, Query};
use crate::auth::Caller;
use crate::error::{on_plan_path, ApiError, ApiResult};
use crate::guard::{
    decode_policies, function_warning, plan_guard, warning_header, FUNCTION_UNREAD_WARNING,
};
use crate::metrics::plan_decision;
use crate::serving::Started;
use crate::{AppState, Body};

/// A resource as the API shows it: its body plus what the server adds.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResourceView {
    #[serde(flatten)]
    #[schema(inline, value_type = Object)]
    pub body: serde_json::Value,
    pub boundary: String,
    pub etag: String,
    pub created_at: String,
    pub updated_at: String,
    /// Only in `?grandfathered=true` lists: the policies that now disallow its plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<Vec<String>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ResourceList {
    pub items: Vec<ResourceView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

pub fn view(record: ResourceRecord, denied_by: Option<Vec<String>>) -> ResourceView {
    ResourceView {
        body: serde_json::from_str(&record.body_json).unwrap_or(serde_json::Value::Null),
        boundary: record.boundary,
        etag: record.etag,
        created_at: record.created_at,
        updated_at: record.updated_at,
        denied_by,
    }
}

fn stored_resource(record: &ResourceRecord) -> ApiResult<Resource> {
    serde_json::from_str(&record.body_json).map_err(|e| {
        ApiError::Internal(format!(
            "stored resource {}/{}/{} cannot be decoded: {e}",
            record.boundary, record.resource_type, record.name
        ))
    })
}

/// Reads and decodes the boundary's policies outside a write (picker, functions, lists).
pub async fn read_policies(state: &AppState, boundary: &str) -> ApiResult<Vec<Policy>> {
    let records = tokio::time::timeout(state.policy_timeout, state.store.list_policies(boundary))
        .await
        .map_err(|_| ApiError::PolicyUnavailable("policy read timed out".into()))?
        .map_err(|e| ApiError::from_store_on_plan_path(e, "boundary"))?;
    decode_policies(&records, &state.catalog)
}

/// The `Warning` for a function whose plan changes (never a refusal).
async fn function_warnings(state: &AppState, boundary: &str, checks: &[PlanCheck]) -> Vec<String> {
    if checks.is_empty() {
        return Vec::new();
    }
    let policies = match read_policies(state, boundary).await {
        Ok(policies) => policies,
        Err(_) => {
            plan_decision("function", "unavailable");
            return vec![FUNCTION_UNREAD_WARNING.to_owned()];
        }
    };
    let mut warnings = Vec::new();
    for check in checks {
        if let Ok(decision) = decide(
            &policies,
            &state.catalog,
            ResourceType::Function,
            &check.plan,
        ) {
            plan_decision("function", "not_enforced");
            if !decision.allowed {
                warnings.push(function_warning(check.plan.as_str(), &decision.denied_by));
            }
        }
    }
    warnings
}

fn with_warnings(mut response: Response, warnings: &[String]) -> Response {
    for warning in warnings {
        let value = if warning.starts_with("299 ") {
            warning.clone()
        } else {
            warning_header(warning)
        };
        if let Ok(value) = HeaderValue::from_str(&value) {
            response
                .headers_mut()
                .append(HeaderName::from_static("warning"), value);
        }
    }
    response
}

fn outcome_of(error: &ApiError) -> &'static str {
    match error {
        ApiError::PlanNotAllowed(..) => "denied",
        ApiError::PolicyUnavailable(_) => "unavailable",
        _ => "error",
    }
}

/// `step` by `deadline`; past it, `late` (nothing has been written: the steps bounded here
/// only read).
async fn read_by<T>(
    deadline: Instant,
    late: ApiError,
    step: impl std::future::Future<Output = ApiResult<T>>,
) -> ApiResult<T> {
    tokio::time::timeout_at(deadline, step)
        .await
        .unwrap_or(Err(late))
}

/// Creates a resource in `boundary` (the caller already authorised): validation (400), name
/// (409), then, for a checked type, the plan check inside the write's transaction (503, 422).
/// Returns the record and the `Warning` header values. Shared by the API and the portal.
pub async fn create_resource(
    state: &AppState,
    boundary: &str,
    value: &serde_json::Value,
) -> ApiResult<(ResourceRecord, Vec<String>)> {
    create_resource_by(
        state,
        boundary,
        value,
        crate::serving::deadline_of(state, None),
    )
    .await
}

/// `create_resource` with the request's deadline: the store gives up before its commit when
/// the deadline passes (503, nothing written); a commit under way decides the answer.
pub async fn create_resource_by(
    state: &AppState,
    boundary: &str,
    value: &serde_json::Value,
    deadline: Instant,
) -> ApiResult<(ResourceRecord, Vec<String>)> {
    let (resource, ty) = Resource::from_value(value, &state.catalog, None)
        .map_err(|e| ApiError::InvalidRequest(e.to_string()))?;
    let checks = plan_checks(None, &resource.plans());
    let guard = (ty.is_plan_checked() && !checks.is_empty())
        .then(|| plan_guard(state.catalog.clone(), ty, checks.clone()));
    let guarded = guard.is_some();
    let new = NewResource {
        boundary: boundary.to_owned(),
        resource_type: ty.as_str().to_owned(),
        name: resource.name.clone(),
        body_json: serde_json::to_string(&resource).unwrap_or_default(),
    };
    let result = state
        .store
        .create_resource(new, guard, Some(deadline.into_std()))
        .await
        .map_err(|e| match e {
            StoreError::Conflict(_) => ApiError::Conflict(format!(
                "{ty} '{}' already exists in boundary '{boundary}'",
                resource.name
            )),
            StoreError::NotFound => crate::auth::boundary_not_found(boundary),
            other if guarded => ApiError::from_store_on_plan_path(other, "resource"),
            other => ApiError::from_store(other, "resource"),
        });
    let (record, mut warnings) = match result {
        Ok(done) => done,
        Err(error) => {
            if guarded {
                plan_decision(ty.as_str(), outcome_of(&error));
            }
            return Err(error);
        }
    };
    if guarded {
        plan_decision(ty.as_str(), "allowed");
    }
    if ty == ResourceType::Function {
        warnings.extend(function_warnings(state, boundary, &checks).await);
    }
    Ok((record, warnings))
}

#[utoipa::path(post, path = "/v1/boundaries/{boundary}/resources", tag = "resources",
    params(("boundary" = String, Path)),
    request_body(content = Object, description = "`{\"type\", \"name\", \"plan\", ...}`; container instances carry `components`"),
    responses((status = 201, body = ResourceView), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error),
        (status = 409, body = crate::openapi::Error), (status = 413, body = crate::openapi::Error),
        (status = 415, body = crate::openapi::Error),
        (status = 422, body = crate::openapi::PlanNotAllowed),
        (status = 503, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    started: Option<Extension<Started>>,
    caller: Result<Caller, ApiError>,
    Path(boundary): Path<String>,
    body: Body,
) -> ApiResult<Response> {
    let deadline = crate::serving::deadline_of(&state, started.as_deref());
    let caller = caller.map_err(on_plan_path)?;
    read_by(
        deadline,
        ApiError::PolicyUnavailable("the boundary lookup did not answer in time".into()),
        visible_boundary(&state, &caller, &boundary),
    )
    .await
    .map_err(on_plan_path)?;
    body.require_json(&[])?;
    let value = body.json()?;
    let (record, warnings) = create_resource_by(&state, &boundary, &value, deadline).await?;
    let etag = etag_header(&record.etag);
    let response = (StatusCode::CREATED, etag, Json(view(record, None))).into_response();
    Ok(with_warnings(response, &warnings))
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

/// The enforce-mode policies that now disallow a resource's current plans.
pub fn denied_by_now(
    policies: &[Policy],
    state: &AppState,
    record: &ResourceRecord,
) -> Vec<String> {
    let Ok(ty) = ResourceType::parse(&record.resource_type) else {
        return Vec::new();
    };
    if !ty.is_plan_checked() {
        return Vec::new();
    }
    let Ok(resource) = stored_resource(record) else {
        return Vec::new();
    };
    let plans = match resource.plans() {
        Plans::Single(plan) => vec![plan],
        Plans::Components(list) => list.into_iter().map(|(_, plan)| plan).collect(),
        Plans::None => Vec::new(),
    };
    let mut names = BTreeSet::new();
    for plan in plans {
        if let Ok(decision) = decide(policies, &state.catalog, ty, &plan) {
            names.extend(decision.denied_by.iter().map(Name::to_string));
        }
    }
    names.into_iter().collect()
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
    visible_boundary(&state, &caller, &boundary).await?;
    if let Some(ty) = &params.resource_type {
        ResourceType::parse(ty).map_err(|e| ApiError::invalid("/type", e))?;
    }
    let limit = ListParams {
        limit: params.limit,
        continue_token: None,
    }
    .limit()?;
    let store_error = |e| match e {
        StoreError::NotFound => {
            ApiError::invalid("/continue", "is not a continue token of this list")
        }
        other => ApiError::from_store(other, "resource"),
    };
    if !params.grandfathered.unwrap_or(false) {
        let query = ResourceQuery {
            resource_type: params.resource_type.clone(),
            limit,
            after: params.continue_token.clone(),
        };
        let page = state
            .store
            .list_resources(&boundary, &query)
            .await
            .map_err(store_error)?;
        return Ok(Json(ResourceList {
            items: page.items.into_iter().map(|r| view(r, None)).collect(),
            continue_token: page.next,
        }));
    }
    // Grandfathered: walk the list and keep resources whose current plan is now disallowed.
    let policies = read_policies(&state, &boundary).await?;
    let mut items: Vec<(String, ResourceView)> = Vec::new();
    let mut after = params.continue_token.clone();
    loop {
        let query = ResourceQuery {
            resource_type: params.resource_type.clone(),
            limit: 500,
            after: after.clone(),
        };
        let page = state
            .store
            .list_resources(&boundary, &query)
            .await
            .map_err(store_error)?;
        for record in page.items {
            let denied = denied_by_now(&policies, &state, &record);
            if !denied.is_empty() {
                items.push((
                    format!("{}/{}", record.resource_type, record.name),
                    view(record, Some(denied)),
                ));
            }
        }
        match page.next {
            Some(next) if items.len() <= limit => after = Some(next),
            _ => break,
        }
    }
    // The walk already started after `continue`: page the matches by their keys.
    let listed = super::page(
        items,
        |(key, _)| key.clone(),
        &ListParams {
            limit: params.limit,
            continue_token: None,
        },
    )?;
    Ok(Json(ResourceList {
        items: listed.items.into_iter().map(|(_, v)| v).collect(),
        continue_token: listed.continue_token,
    }))
}

fn resource_key(boundary: &str, resource_type: &str, name: &str) -> ApiResult<ResourceKey> {
    let key = ResourceKey {
        boundary: boundary.to_owned(),
        resource_type: resource_type.to_owned(),
        name: name.to_owned(),
    };
    match ResourceType::parse(resource_type) {
        Ok(_) => Ok(key),
        Err(_) => Err(resource_not_found(&key)),
    }
}

fn resource_not_found(key: &ResourceKey) -> ApiError {
    ApiError::NotFound(format!(
        "{} '{}' not found in boundary '{}'",
        key.resource_type, key.name, key.boundary
    ))
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
    visible_boundary(&state, &caller, &boundary).await?;
    let key = resource_key(&boundary, &resource_type, &name)?;
    let record = state.store.get_resource(&key).await.map_err(|e| match e {
        StoreError::NotFound => resource_not_found(&key),
        other => ApiError::from_store(other, "resource"),
    })?;
    Ok((etag_header(&record.etag), Json(view(record, None))))
}

/// Applies a JSON merge patch to a resource (the caller already authorised). A change that
/// moves a plan is checked inside the write's transaction; any other change succeeds, even on
/// a now-disallowed plan. Returns the record and the `Warning` header values.
pub async fn patch_resource(
    state: &AppState,
    key: &ResourceKey,
    if_match: Option<&str>,
    patch: serde_json::Value,
) -> ApiResult<(ResourceRecord, Vec<String>)> {
    patch_resource_by(
        state,
        key,
        if_match,
        patch,
        crate::serving::deadline_of(state, None),
    )
    .await
}

/// `patch_resource` with the request's deadline (see `create_resource_by`).
pub async fn patch_resource_by(
    state: &AppState,
    key: &ResourceKey,
    if_match: Option<&str>,
    patch: serde_json::Value,
    deadline: Instant,
) -> ApiResult<(ResourceRecord, Vec<String>)> {
    let plan_path = patch.get("plan").is_some() || patch.get("components").is_some();
    let catalog = state.catalog.clone();
    let function_checks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let function_checks_out = function_checks.clone();
    let guarded = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let guarded_out = guarded.clone();
    let editor: palisade_store::Editor = Box::new(move |current: &ResourceRecord| {
        let veto = |e: ApiError| -> palisade_store::Veto { Box::new(e) };
        let old = stored_resource(current).map_err(veto)?;
        let mut merged =
            serde_json::to_value(&old).map_err(|e| veto(ApiError::Internal(e.to_string())))?;
        merge_patch(&mut merged, &patch);
        for field in ["type", "name"] {
            let before = if field == "type" {
                &old.resource_type
            } else {
                &old.name
            };
            if merged.get(field).and_then(serde_json::Value::as_str) != Some(before.as_str()) {
                return Err(veto(ApiError::invalid(
                    &format!("/{field}"),
                    format!("cannot be changed (it is '{before}'); create a new resource instead"),
                )));
            }
        }
        let (new, ty) = Resource::from_value(&merged, &catalog, Some(&old))
            .map_err(|e| veto(ApiError::InvalidRequest(e.to_string())))?;
        let checks = plan_checks(Some(&old.plans()), &new.plans());
        let guard = if ty.is_plan_checked() && !checks.is_empty() {
            guarded.store(true, std::sync::atomic::Ordering::Relaxed);
            Some(plan_guard(catalog.clone(), ty, checks))
        } else {
            if ty == ResourceType::Function {
                if let Ok(mut out) = function_checks.lock() {
                    *out = checks;
                }
            }
            None
        };
        Ok(Edit {
            body_json: serde_json::to_string(&new).unwrap_or_default(),
            guard,
        })
    });
    let result = state
        .store
        .update_resource(key, if_match, editor, Some(deadline.into_std()))
        .await;
    let was_guarded = guarded_out.load(std::sync::atomic::Ordering::Relaxed);
    let result = match result {
        Err(StoreError::NotFound) => Err(resource_not_found(key)),
        Err(e) if plan_path || was_guarded => Err(ApiError::from_store_on_plan_path(e, "resource")),
        Err(e) => Err(ApiError::from_store(e, "resource")),
        Ok(done) => Ok(done),
    };
    let (record, mut warnings) = match result {
        Ok(done) => done,
        Err(error) => {
            if was_guarded {
                plan_decision(&key.resource_type, outcome_of(&error));
            }
            return Err(error);
        }
    };
    if was_guarded {
        plan_decision(&key.resource_type, "allowed");
    }
    let checks = function_checks_out
        .lock()
        .map(|c| c.clone())
        .unwrap_or_default();
    warnings.extend(function_warnings(state, &key.boundary, &checks).await);
    Ok((record, warnings))
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
        (status = 503, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn patch(
    State(state): State<AppState>,
    started: Option<Extension<Started>>,
    caller: Result<Caller, ApiError>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let deadline = crate::serving::deadline_of(&state, started.as_deref());
    // Whether this patch can move a plan decides how a store failure is answered.
    let patch: Option<serde_json::Value> = serde_json::from_slice(&body.bytes).ok();
    let plan_path = patch
        .as_ref()
        .is_some_and(|p| p.get("plan").is_some() || p.get("components").is_some());
    let unreachable = |e: ApiError| if plan_path { on_plan_path(e) } else { e };
    let caller = caller.map_err(unreachable)?;
    read_by(
        deadline,
        ApiError::Unavailable("the boundary lookup did not answer in time".into()),
        visible_boundary(&state, &caller, &boundary),
    )
    .await
    .map_err(unreachable)?;
    let key = resource_key(&boundary, &resource_type, &name)?;
    body.require_json(&["application/merge-patch+json"])?;
    let patch = body.json()?;
    if !patch.is_object() {
        return Err(ApiError::InvalidRequest(format!(
            "the body must be a JSON merge patch object, got {}",
            json_kind(&patch)
        )));
    }
    let (record, warnings) =
        patch_resource_by(&state, &key, if_match(&headers).as_deref(), patch, deadline).await?;
    let etag = etag_header(&record.etag);
    Ok(with_warnings(
        (etag, Json(view(record, None))).into_response(),
        &warnings,
    ))
}

#[utoipa::path(delete, path = "/v1/boundaries/{boundary}/resources/{resource_type}/{name}", tag = "resources",
    params(("boundary" = String, Path), ("resource_type" = String, Path), ("name" = String, Path),
        ("If-Match" = Option<String>, Header, description = "the etag you read")),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error), (status = 412, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> ApiResult<StatusCode> {
    visible_boundary(&state, &caller, &boundary).await?;
    let key = resource_key(&boundary, &resource_type, &name)?;
    state
        .store
        .delete_resource(&key, if_match(&headers).as_deref())
        .await
        .map_err(|e| match e {
            StoreError::NotFound => resource_not_found(&key),
            other => ApiError::from_store(other, "resource"),
        })?;
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

#[derive(Debug, Serialize, ToSchema)]
pub struct PickerPlan {
    pub name: String,
    /// vCPU.
    pub cpu: f64,
    /// e.g. `4 GiB`.
    pub memory: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_warning: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Picker {
    #[serde(rename = "type")]
    pub resource_type: String,
    /// False for functions: the API does not enforce their plans.
    pub enforced: bool,
    pub plans: Vec<PickerPlan>,
}

/// The picker data for `ty` (shared with the portal).
pub async fn picker(state: &AppState, boundary: &str, ty: ResourceType) -> ApiResult<Picker> {
    let policies = read_policies(state, boundary).await?;
    let plans = picker_options(&policies, &state.catalog, ty)
        .into_iter()
        .map(|option| PickerPlan {
            name: option.plan.name.to_string(),
            cpu: option.plan.cpu,
            memory: option.plan.memory_display(),
            allowed: option.allowed,
            reason: option.reason(),
            audit_warning: option.audit_warning(),
        })
        .collect();
    Ok(Picker {
        resource_type: ty.as_str().to_owned(),
        enforced: ty.is_plan_checked(),
        plans,
    })
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
    visible_boundary(&state, &caller, &boundary)
        .await
        .map_err(on_plan_path)?;
    let text = params
        .resource_type
        .ok_or_else(|| ApiError::invalid("/type", "is required, e.g. ?type=app"))?;
    let ty = ResourceType::parse(&text).map_err(|e| ApiError::invalid("/type", e))?;
    if !ty.has_plans() {
        return Err(ApiError::invalid("/type", format!("{ty} has no plans")));
    }
    Ok(Json(picker(&state, &boundary, ty).await?))
}
