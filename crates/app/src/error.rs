//! What a use case can answer besides success: a typed error with the stable code of SPEC
//! 4.1 and the text users see, and no status code (the HTTP adapter maps each variant to
//! one). Internal causes are kept for the log, never shown.

use palisade_api_types::error::{ErrorBody, ErrorDetail};
use palisade_api_types::ErrorCode;
use palisade_store::StoreError;

/// The 503 message when the boundary's policies cannot be read (SPEC 2.4).
pub const POLICY_UNAVAILABLE_MESSAGE: &str =
    "The boundary's policies could not be read; the request was not applied. Try again shortly.";

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// The request is wrong (400); the message starts with the field's JSON Pointer.
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the object has changed since you read it (If-Match does not match its etag)")]
    PreconditionFailed,
    /// 412 for `If-None-Match: *` on an object that exists (the message names it).
    #[error("{0}")]
    AlreadyExists(String),
    /// 413 for a documented limit other than the body size (the message names it).
    #[error("{0}")]
    LimitExceeded(String),
    /// 422 with the body of SPEC 2.4, built by `api-types`, and the audit policies'
    /// warnings, sent as `Warning` headers like on a success.
    #[error("compute plan not allowed")]
    PlanNotAllowed(Box<ErrorBody>, Vec<String>),
    /// 429: a write rate limit; the message says which, `retry_after` when to try again.
    #[error("{message}")]
    RateLimited {
        message: String,
        retry_after: std::time::Duration,
    },
    /// 503 on plan paths: the policies could not be read. The cause is logged.
    #[error("policies unavailable: {0}")]
    PolicyUnavailable(String),
    /// 503 elsewhere: the store could not be reached.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// 503: a cluster palisade must change now could not be reached (the message says which
    /// and why; it holds no secrets).
    #[error("{0}")]
    ClusterUnavailable(String),
    /// 429 with `Retry-After`: the caller's boundary has as much under way as it may (the
    /// message names the bound).
    #[error("{0}")]
    TooManyRequests(String),
    /// 503 `unavailable` with `Retry-After`: the process has as much under way as it takes
    /// (the message names the bound).
    #[error("{0}")]
    Busy(String),
    /// 500; the cause is logged, never returned.
    #[error("internal: {0}")]
    Internal(String),
}

impl AppError {
    pub fn invalid(pointer: &str, message: impl std::fmt::Display) -> Self {
        AppError::InvalidRequest(format!("{pointer}: {message}"))
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            AppError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            AppError::Unauthorized(_) => ErrorCode::Unauthorized,
            AppError::Forbidden(_) => ErrorCode::Forbidden,
            AppError::NotFound(_) => ErrorCode::NotFound,
            AppError::Conflict(_) => ErrorCode::Conflict,
            AppError::PreconditionFailed | AppError::AlreadyExists(_) => {
                ErrorCode::PreconditionFailed
            }
            AppError::LimitExceeded(_) => ErrorCode::PayloadTooLarge,
            AppError::RateLimited { .. } => ErrorCode::RateLimited,
            AppError::PlanNotAllowed(..) => ErrorCode::ComputePlanNotAllowed,
            AppError::PolicyUnavailable(_) => ErrorCode::ComputePlanPolicyUnavailable,
            AppError::Unavailable(_) | AppError::ClusterUnavailable(_) | AppError::Busy(_) => {
                ErrorCode::Unavailable
            }
            AppError::TooManyRequests(_) => ErrorCode::RateLimited,
            AppError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// How many seconds a client should wait before trying again, when the error says (the
    /// HTTP adapter's `Retry-After`).
    pub fn retry_after(&self) -> Option<u64> {
        match self {
            AppError::TooManyRequests(_) | AppError::Busy(_) => {
                Some(crate::uploads::RETRY_AFTER_SECONDS)
            }
            // Whole seconds, rounded up: a client that waits as long finds a write free.
            AppError::RateLimited { retry_after, .. } => {
                Some((retry_after.as_secs() + u64::from(retry_after.subsec_nanos() > 0)).max(1))
            }
            _ => None,
        }
    }

    /// The error body users see.
    pub fn body(&self) -> ErrorBody {
        if let AppError::PlanNotAllowed(body, _) = self {
            return (**body).clone();
        }
        let message = match self {
            AppError::PolicyUnavailable(_) => POLICY_UNAVAILABLE_MESSAGE.to_owned(),
            AppError::Unavailable(_) => {
                "The store could not be reached; try again shortly.".to_owned()
            }
            AppError::Internal(_) => "An internal error occurred; it has been logged.".to_owned(),
            other => other.to_string(),
        };
        ErrorBody {
            error: ErrorDetail {
                code: self.code(),
                message,
                details: serde_json::Map::new(),
            },
        }
    }

    /// Maps a store failure on a path that does not check plans.
    pub fn from_store(error: StoreError, what: &str) -> Self {
        match error {
            StoreError::NotFound => AppError::NotFound(format!("{what} not found")),
            StoreError::Conflict(reason) => AppError::Conflict(reason),
            StoreError::PreconditionFailed => AppError::PreconditionFailed,
            StoreError::PolicyUnavailable(e) => AppError::PolicyUnavailable(e.to_string()),
            StoreError::Vetoed(veto) => match veto.downcast::<AppError>() {
                Ok(api) => *api,
                Err(other) => AppError::Internal(other.to_string()),
            },
            StoreError::Database(e) => AppError::Unavailable(e.to_string()),
            StoreError::Timeout => AppError::Unavailable("the store did not answer in time".into()),
            StoreError::LeaseLost(reason) => AppError::Unavailable(reason),
            StoreError::Migrate(e) => AppError::Internal(e.to_string()),
            StoreError::UnsupportedUrl(e) => AppError::Internal(e),
            StoreError::Corrupt(what) => AppError::Internal(format!("corrupt row: {what}")),
            StoreError::UploadQuota { stored } => AppError::LimitExceeded(format!(
                "the boundary's uploads count {stored} bytes; this one would pass their limit"
            )),
            StoreError::UploadMissing(id) => {
                AppError::invalid("/upload", format!("no upload '{id}'"))
            }
        }
    }

    /// Maps a store failure on a plan path: a database failure there means the policies
    /// could not be read (503 `compute_plan_policy_unavailable`), never "allow".
    pub fn from_store_on_plan_path(error: StoreError, what: &str) -> Self {
        match error {
            StoreError::Database(e) => AppError::PolicyUnavailable(e.to_string()),
            StoreError::Corrupt(c) => AppError::PolicyUnavailable(c),
            StoreError::Timeout => {
                AppError::PolicyUnavailable("the store did not answer in time".into())
            }
            other => AppError::from_store(other, what),
        }
    }
}

/// On a plan path an unreachable store means the policies could not be read: 503
/// `compute_plan_policy_unavailable`, whichever step (token, boundary, policies) failed.
pub fn on_plan_path(error: AppError) -> AppError {
    match error {
        AppError::Unavailable(cause) => AppError::PolicyUnavailable(cause),
        other => other,
    }
}

pub type AppResult<T> = Result<T, AppError>;

impl From<palisade_api_types::json::InvalidBody> for AppError {
    fn from(error: palisade_api_types::json::InvalidBody) -> Self {
        AppError::InvalidRequest(error.0)
    }
}

/// 404 naming the boundary.
pub fn boundary_not_found(boundary: &str) -> AppError {
    AppError::NotFound(format!("boundary '{boundary}' not found"))
}
