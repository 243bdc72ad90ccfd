//! The one mapping from failures to HTTP answers: every error leaves as the JSON error body
//! of SPEC 4.1 with its stable code. Internal details are logged, never returned.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use palisade_api_types::error::{ErrorBody, ErrorDetail};
use palisade_api_types::ErrorCode;
use palisade_store::StoreError;

/// The 503 message when the boundary's policies cannot be read (SPEC 2.4).
pub const POLICY_UNAVAILABLE_MESSAGE: &str =
    "The boundary's policies could not be read; the request was not applied. Try again shortly.";

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400; the message starts with the field's JSON Pointer.
    #[error("{0}")]
    InvalidRequest(String),
    #[error("{0}")]
    Unauthorized(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("{0}")]
    Conflict(String),
    #[error("the object has changed since you read it (If-Match does not match its etag)")]
    PreconditionFailed,
    /// 412 for `If-None-Match: *` on an object that exists (the message names it).
    #[error("{0}")]
    AlreadyExists(String),
    #[error("the request body is larger than 1 MiB")]
    PayloadTooLarge,
    /// 413 for a documented limit other than the body size (the message names it).
    #[error("{0}")]
    LimitExceeded(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 422 with the body of SPEC 2.4, built by `api-types`, and the audit policies'
    /// warnings, sent as `Warning` headers like on a success.
    #[error("compute plan not allowed")]
    PlanNotAllowed(Box<ErrorBody>, Vec<String>),
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
    /// 503 `unavailable`: the request ran into the server's total time bound and was stopped.
    #[error("the request did not complete within {} s and was stopped; try again", .0.as_secs())]
    TimedOut(std::time::Duration),
    /// 500; the cause is logged, never returned.
    #[error("internal: {0}")]
    Internal(String),
}

impl ApiError {
    pub fn invalid(pointer: &str, message: impl std::fmt::Display) -> Self {
        ApiError::InvalidRequest(format!("{pointer}: {message}"))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::InvalidRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized(_) => StatusCode::UNAUTHORIZED,
            ApiError::Forbidden(_) => StatusCode::FORBIDDEN,
            ApiError::NotFound(_) => StatusCode::NOT_FOUND,
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PreconditionFailed | ApiError::AlreadyExists(_) => {
                StatusCode::PRECONDITION_FAILED
            }
            ApiError::PayloadTooLarge | ApiError::LimitExceeded(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::PlanNotAllowed(..) => StatusCode::UNPROCESSABLE_ENTITY,
            ApiError::PolicyUnavailable(_)
            | ApiError::Unavailable(_)
            | ApiError::ClusterUnavailable(_)
            | ApiError::TimedOut(_) => StatusCode::SERVICE_UNAVAILABLE,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            ApiError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            ApiError::Unauthorized(_) => ErrorCode::Unauthorized,
            ApiError::Forbidden(_) => ErrorCode::Forbidden,
            ApiError::NotFound(_) => ErrorCode::NotFound,
            ApiError::MethodNotAllowed(_) => ErrorCode::MethodNotAllowed,
            ApiError::Conflict(_) => ErrorCode::Conflict,
            ApiError::PreconditionFailed | ApiError::AlreadyExists(_) => {
                ErrorCode::PreconditionFailed
            }
            ApiError::PayloadTooLarge | ApiError::LimitExceeded(_) => ErrorCode::PayloadTooLarge,
            ApiError::UnsupportedMediaType(_) => ErrorCode::UnsupportedMediaType,
            ApiError::PlanNotAllowed(..) => ErrorCode::ComputePlanNotAllowed,
            ApiError::PolicyUnavailable(_) => ErrorCode::ComputePlanPolicyUnavailable,
            ApiError::Unavailable(_) | ApiError::ClusterUnavailable(_) | ApiError::TimedOut(_) => {
                ErrorCode::Unavailable
            }
            ApiError::Internal(_) => ErrorCode::Internal,
        }
    }

    /// The error body users see.
    pub fn body(&self) -> ErrorBody {
        if let ApiError::PlanNotAllowed(body, _) = self {
            return (**body).clone();
        }
        let message = match self {
            ApiError::PolicyUnavailable(_) => POLICY_UNAVAILABLE_MESSAGE.to_owned(),
            ApiError::Unavailable(_) => {
                "The store could not be reached; try again shortly.".to_owned()
            }
            ApiError::Internal(_) => "An internal error occurred; it has been logged.".to_owned(),
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
            StoreError::NotFound => ApiError::NotFound(format!("{what} not found")),
            StoreError::Conflict(reason) => ApiError::Conflict(reason),
            StoreError::PreconditionFailed => ApiError::PreconditionFailed,
            StoreError::PolicyUnavailable(e) => ApiError::PolicyUnavailable(e.to_string()),
            StoreError::Vetoed(veto) => match veto.downcast::<ApiError>() {
                Ok(api) => *api,
                Err(other) => ApiError::Internal(other.to_string()),
            },
            StoreError::Database(e) => ApiError::Unavailable(e.to_string()),
            StoreError::Timeout => ApiError::Unavailable("the store did not answer in time".into()),
            StoreError::Migrate(e) => ApiError::Internal(e.to_string()),
            StoreError::UnsupportedUrl(e) => ApiError::Internal(e),
            StoreError::Corrupt(what) => ApiError::Internal(format!("corrupt row: {what}")),
        }
    }

    /// Maps a store failure on a plan path: a database failure there means the policies
    /// could not be read (503 `compute_plan_policy_unavailable`), never "allow".
    pub fn from_store_on_plan_path(error: StoreError, what: &str) -> Self {
        match error {
            StoreError::Database(e) => ApiError::PolicyUnavailable(e.to_string()),
            StoreError::Corrupt(c) => ApiError::PolicyUnavailable(c),
            StoreError::Timeout => {
                ApiError::PolicyUnavailable("the store did not answer in time".into())
            }
            other => ApiError::from_store(other, what),
        }
    }
}

/// On a plan path an unreachable store means the policies could not be read: 503
/// `compute_plan_policy_unavailable`, whichever step (token, boundary, policies) failed.
pub fn on_plan_path(error: ApiError) -> ApiError {
    match error {
        ApiError::Unavailable(cause) => ApiError::PolicyUnavailable(cause),
        other => other,
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            ApiError::Internal(cause) => tracing::error!(%cause, "internal error"),
            ApiError::PolicyUnavailable(cause) => {
                tracing::warn!(%cause, "policies unreadable: request refused")
            }
            ApiError::Unavailable(cause) => tracing::warn!(%cause, "store unavailable"),
            _ => {}
        }
        let mut response = (status, axum::Json(self.body())).into_response();
        if let ApiError::PlanNotAllowed(_, warnings) = &self {
            for warning in warnings {
                if let Ok(value) = HeaderValue::from_str(&crate::guard::warning_header(warning)) {
                    response.headers_mut().append(header::WARNING, value);
                }
            }
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"palisade\""),
            );
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
