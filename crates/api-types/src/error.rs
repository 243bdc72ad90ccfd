//! The JSON error body every API error answers with, and its stable codes.

use serde::{Deserialize, Serialize};

/// Stable, snake_case error codes (SPEC 4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidRequest,
    Unauthorized,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    PreconditionFailed,
    PayloadTooLarge,
    UnsupportedMediaType,
    ComputePlanNotAllowed,
    /// 429: a write rate limit of the token or the boundary (`serve --token-write-rate`,
    /// `--boundary-write-rate`); `Retry-After` says when to try again.
    RateLimited,
    Internal,
    ComputePlanPolicyUnavailable,
    Unavailable,
    /// A code this version does not know (a newer server's): read, so that its message is
    /// still shown; palisade itself never answers it.
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The HTTP status every answer with this code carries (SPEC 4.1).
    pub fn http_status(self) -> u16 {
        match self {
            ErrorCode::InvalidRequest => 400,
            ErrorCode::Unauthorized => 401,
            ErrorCode::Forbidden => 403,
            ErrorCode::NotFound => 404,
            ErrorCode::MethodNotAllowed => 405,
            ErrorCode::Conflict => 409,
            ErrorCode::PreconditionFailed => 412,
            ErrorCode::PayloadTooLarge => 413,
            ErrorCode::UnsupportedMediaType => 415,
            ErrorCode::ComputePlanNotAllowed => 422,
            ErrorCode::RateLimited => 429,
            ErrorCode::Internal | ErrorCode::Unknown => 500,
            ErrorCode::ComputePlanPolicyUnavailable | ErrorCode::Unavailable => 503,
        }
    }
}

/// `{"error": {"code", "message", ...}}`; extra fields depend on the code.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
    #[serde(flatten)]
    pub details: serde_json::Map<String, serde_json::Value>,
}

/// The body of a 422 `compute_plan_not_allowed` (SPEC 2.4).
pub fn compute_plan_not_allowed(
    decision: &palisade_policy::PlanDecision,
    component: Option<&str>,
) -> ErrorBody {
    let mut details = serde_json::Map::new();
    details.insert(
        "resource_type".into(),
        decision.resource_type.as_str().into(),
    );
    details.insert("plan".into(), decision.plan.as_str().into());
    details.insert(
        "component".into(),
        component.map(Into::into).unwrap_or(serde_json::Value::Null),
    );
    details.insert(
        "allowed_plans".into(),
        decision
            .allowed_plans
            .iter()
            .map(|p| serde_json::Value::from(p.as_str()))
            .collect(),
    );
    details.insert(
        "denied_by".into(),
        decision
            .denied_by
            .iter()
            .map(|p| serde_json::Value::from(p.as_str()))
            .collect(),
    );
    ErrorBody {
        error: ErrorDetail {
            code: ErrorCode::ComputePlanNotAllowed,
            message: decision.message().unwrap_or_default(),
            details,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_servers_code_is_read_and_its_message_kept() {
        let body: Result<ErrorBody, _> =
            serde_json::from_str(r#"{"error": {"code": "quota_exceeded", "message": "m"}}"#);
        let body = body.map(|b| (b.error.code, b.error.message));
        assert_eq!(body.ok(), Some((ErrorCode::Unknown, "m".to_owned())));
    }
}
