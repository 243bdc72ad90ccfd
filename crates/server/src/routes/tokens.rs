//! `/v1/tokens`: create (shown once), list, revoke. Admins manage every token; a
//! boundary-admin manages developer tokens of its boundary.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use palisade_store::{StoreError, TokenRecord};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::{hash_secret, new_token_secret, Caller, Role};
use crate::error::{ApiError, ApiResult};
use crate::{AppState, Body};

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// `admin`, `boundary-admin` or `developer`.
    #[schema(pattern = "^(admin|boundary-admin|developer)$")]
    pub role: String,
    /// Required for `boundary-admin` and `developer`; absent for `admin`.
    #[serde(default)]
    pub boundary: Option<String>,
    /// 1-3650; absent: the token does not expire.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3650)]
    pub expires_in_days: Option<u32>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenView {
    pub id: String,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boundary: Option<String>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub created_by: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedToken {
    #[serde(flatten)]
    pub token: TokenView,
    /// The secret: shown once, stored only as a hash.
    pub secret: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenList {
    pub items: Vec<TokenView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

fn view(record: TokenRecord) -> TokenView {
    TokenView {
        id: record.id,
        role: record.role,
        boundary: record.boundary,
        created_at: record.created_at,
        expires_at: record.expires_at,
        created_by: record.created_by,
    }
}

#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = NewToken,
    responses((status = 201, body = CreatedToken), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: Body,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    // Answer order (SPEC 2.4): a boundary the caller cannot see is 404 before any 403, and
    // both come before the body's own errors.
    // The body is parsed once; its errors wait until the boundary and the role are checked.
    let parsed = body.json();
    let named = parsed
        .as_ref()
        .ok()
        .and_then(|v| v.get("boundary"))
        .and_then(|b| b.as_str());
    if let Some(boundary) = named {
        if palisade_policy::Name::parse(boundary).is_ok() {
            super::visible_boundary(&state, &caller, boundary).await?;
        }
    }
    caller.require_boundary_admin()?;
    body.require_json(&[])?;
    let new: NewToken = crate::json::from_value(parsed?)?;
    let role = match (new.role.as_str(), new.boundary.as_deref()) {
        ("admin", None) => Role::Admin,
        ("admin", Some(_)) => {
            return Err(ApiError::invalid(
                "/boundary",
                "an admin token has no boundary",
            ))
        }
        ("boundary-admin" | "developer", None) => {
            return Err(ApiError::invalid(
                "/boundary",
                format!("is required for a {} token", new.role),
            ))
        }
        ("boundary-admin", Some(b)) => Role::BoundaryAdmin(b.to_owned()),
        ("developer", Some(b)) => Role::Developer(b.to_owned()),
        (other, _) => {
            return Err(ApiError::invalid(
                "/role",
                format!("unknown role '{other}'; roles are admin, boundary-admin, developer"),
            ))
        }
    };
    if let Some(days) = new.expires_in_days {
        if !(1..=3650).contains(&days) {
            return Err(ApiError::invalid(
                "/expires_in_days",
                format!("must be from 1 to 3650, got {days}"),
            ));
        }
    }
    if let Some(boundary) = role.boundary() {
        super::visible_boundary(&state, &caller, boundary).await?;
    }
    let allowed = match (&caller.role, &role) {
        (Role::Admin, _) => true,
        (Role::BoundaryAdmin(own), Role::Developer(b)) => own == b,
        _ => false,
    };
    if !allowed {
        return Err(ApiError::Forbidden(format!(
            "a {} token cannot create {} tokens",
            caller.role.name(),
            role.name()
        )));
    }
    let (id, secret) = new_token_secret();
    let now = chrono::Utc::now();
    let record = TokenRecord {
        id,
        secret_sha256: hash_secret(&secret),
        role: role.name().to_owned(),
        boundary: role.boundary().map(str::to_owned),
        created_at: palisade_store::now(),
        expires_at: new.expires_in_days.map(|days| {
            (now + chrono::Duration::days(i64::from(days)))
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        }),
        created_by: caller.actor(),
    };
    state
        .store
        .create_token(record.clone())
        .await
        .map_err(|e| ApiError::from_store(e, "token"))?;
    Ok((
        StatusCode::CREATED,
        Json(CreatedToken {
            token: view(record),
            secret,
        }),
    ))
}

#[utoipa::path(get, path = "/v1/tokens", tag = "tokens", params(super::ListParams),
    responses((status = 200, body = TokenList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    super::Query(params): super::Query<super::ListParams>,
) -> ApiResult<Json<TokenList>> {
    caller.require_boundary_admin()?;
    params.limit()?;
    let records = state
        .store
        .list_tokens(caller.role.boundary())
        .await
        .map_err(|e| ApiError::from_store(e, "token"))?;
    let mut views: Vec<TokenView> = records.into_iter().map(view).collect();
    views.sort_by(|a, b| a.id.cmp(&b.id));
    let page = super::page(views, |t| t.id.clone(), &params)?;
    Ok(Json(TokenList {
        items: page.items,
        continue_token: page.continue_token,
    }))
}

#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens",
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let not_found = || ApiError::NotFound(format!("token '{id}' not found"));
    let record = state.store.get_token(&id).await.map_err(|e| match e {
        StoreError::NotFound => not_found(),
        other => ApiError::from_store(other, "token"),
    })?;
    // A token of a boundary the caller cannot see is not there for it (404 before 403).
    if record.boundary.as_deref().is_some_and(|b| !caller.sees(b))
        || (record.boundary.is_none() && !caller.is_admin())
    {
        return Err(not_found());
    }
    caller.require_boundary_admin()?;
    let target = Role::from_record(&record.role, record.boundary.as_deref());
    match (&caller.role, &target) {
        (Role::Admin, _) => {}
        (Role::BoundaryAdmin(own), Some(Role::Developer(b))) if own == b => {}
        (Role::BoundaryAdmin(own), Some(role)) if role.boundary() == Some(own.as_str()) => {
            return Err(ApiError::Forbidden(
                "a boundary-admin token can revoke developer tokens only".into(),
            ))
        }
        _ => return Err(not_found()),
    }
    state.store.delete_token(&id).await.map_err(|e| match e {
        StoreError::NotFound => not_found(),
        other => ApiError::from_store(other, "token"),
    })?;
    Ok(StatusCode::NO_CONTENT)
}
