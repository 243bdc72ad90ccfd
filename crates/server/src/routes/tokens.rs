//! `/v1/tokens`: create (shown once), list, revoke. Admins manage every token; a
//! boundary-admin manages developer tokens of its boundary.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use palisade_api_types::view::{CreatedToken, NewToken, TokenList};
use palisade_app::Caller;

use super::{ListParams, Query};
use crate::error::ApiResult;
use crate::{AppState, UnreadBody};

#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = NewToken,
    responses((status = 201, body = CreatedToken), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error), (status = 403, body = crate::openapi::Error),
        (status = 404, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn create(
    State(state): State<AppState>,
    caller: Caller,
    body: UnreadBody,
) -> ApiResult<(StatusCode, Json<CreatedToken>)> {
    // A caller that manages no tokens is refused before its body is read.
    caller.require_boundary_admin()?;
    let body = body.read().await?;
    // The body is parsed once; its errors wait until the boundary it names is checked
    // (SPEC 2.4: 404 before 400), and so does its media type.
    let parsed = body.json();
    let named = parsed
        .as_ref()
        .ok()
        .and_then(|v| v.get("boundary"))
        .and_then(|b| b.as_str());
    state.may_create_tokens(&caller, named).await?;
    body.require_json(&[])?;
    let new: NewToken = palisade_api_types::json::from_value(parsed?)?;
    let checked = state.create_token(&caller, new).await?;
    Ok((StatusCode::CREATED, Json(checked)))
}

#[utoipa::path(get, path = "/v1/tokens", tag = "tokens", params(super::ListParams),
    responses((status = 200, body = TokenList), (status = 400, body = crate::openapi::Error),
        (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    Query(params): Query<ListParams>,
) -> ApiResult<Json<TokenList>> {
    Ok(Json(state.list_tokens(&caller, &params.page()).await?))
}

#[utoipa::path(delete, path = "/v1/tokens/{id}", tag = "tokens",
    params(("id" = String, Path)),
    responses((status = 204), (status = 401, body = crate::openapi::Error),
        (status = 403, body = crate::openapi::Error), (status = 404, body = crate::openapi::Error), (status = 429, body = crate::openapi::Error)),
    security(("bearer" = [])))]
pub async fn delete(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    state.revoke_token(&caller, &id).await?;
    Ok(StatusCode::NO_CONTENT)
}
