//! The bearer-token extractor: `Authorization: Bearer <token>` resolved to the application's
//! `Caller` (401 otherwise), within the request's store bound.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use palisade_app::{caller_from_token, AppError, Caller};

use crate::error::ApiError;
use crate::AppState;

/// The token of `Authorization: Bearer <token>` (401 without one).
pub fn bearer(headers: &axum::http::HeaderMap) -> Result<&str, ApiError> {
    let header = headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            AppError::Unauthorized("missing Authorization: Bearer <token> header".into())
        })?;
    // The scheme is case-insensitive (RFC 9110 11.1).
    let token = header
        .to_str()
        .ok()
        .map(str::trim)
        .and_then(|h| h.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            AppError::Unauthorized("the Authorization header must be 'Bearer <token>'".into())
        })?;
    Ok(token)
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let token = bearer(&parts.headers)?;
        // The token lookup counts against the request's store bound (SPEC 2.4): on a plan
        // path the whole answer, not each step, is bounded by `policy_timeout`.
        let deadline =
            crate::serving::deadline_of(state, parts.extensions.get::<crate::serving::Started>());
        match tokio::time::timeout_at(deadline, caller_from_token(state, token)).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(AppError::Unavailable(
                "the store did not answer the token lookup in time".into(),
            )
            .into()),
        }
    }
}
