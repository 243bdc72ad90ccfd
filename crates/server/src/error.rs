//! The one mapping from failures to HTTP answers: every error leaves as the JSON error body
//! of SPEC 4.1 with its stable code. An application error keeps its code and text and gets
//! its status here; a few failures exist only in HTTP (method, media type, body size, the
//! request's total time). Internal details are logged, never returned.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use palisade_api_types::error::{ErrorBody, ErrorDetail};
use palisade_api_types::ErrorCode;
use palisade_app::AppError;

pub use palisade_app::error::POLICY_UNAVAILABLE_MESSAGE;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// What a use case answered.
    #[error(transparent)]
    App(#[from] AppError),
    #[error("{0}")]
    MethodNotAllowed(String),
    #[error("the request body is larger than 1 MiB")]
    PayloadTooLarge,
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 503 `unavailable`: the request ran into the server's total time bound and was stopped.
    #[error("the request did not complete within {} s and was stopped; try again", .0.as_secs())]
    TimedOut(std::time::Duration),
}

impl From<palisade_api_types::json::InvalidBody> for ApiError {
    fn from(error: palisade_api_types::json::InvalidBody) -> Self {
        ApiError::App(error.into())
    }
}

/// The status of an application error: the one its code carries (SPEC 4.1).
pub fn status_of(error: &AppError) -> StatusCode {
    StatusCode::from_u16(error.code().http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl ApiError {
    /// 400 naming the field.
    pub fn invalid(pointer: &str, message: impl std::fmt::Display) -> Self {
        ApiError::App(AppError::invalid(pointer, message))
    }

    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::App(error) => status_of(error),
            ApiError::MethodNotAllowed(_) => StatusCode::METHOD_NOT_ALLOWED,
            ApiError::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TimedOut(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// The error body users see.
    pub fn body(&self) -> ErrorBody {
        let (code, message) = match self {
            ApiError::App(error) => return error.body(),
            ApiError::MethodNotAllowed(_) => (ErrorCode::MethodNotAllowed, self.to_string()),
            ApiError::PayloadTooLarge => (ErrorCode::PayloadTooLarge, self.to_string()),
            ApiError::UnsupportedMediaType(_) => {
                (ErrorCode::UnsupportedMediaType, self.to_string())
            }
            ApiError::TimedOut(_) => (ErrorCode::Unavailable, self.to_string()),
        };
        ErrorBody {
            error: ErrorDetail {
                code,
                message,
                details: serde_json::Map::new(),
            },
        }
    }
}

/// A warning text as a `Warning` header value (`299 palisade "<text>"`, RFC 7234 5.5; a
/// double quote in the text becomes a single one).
pub fn warning_header(text: &str) -> String {
    format!("299 palisade \"{}\"", text.replace('"', "'"))
}

/// Appends `Warning` headers for `warnings`.
pub fn with_warnings<T: std::fmt::Display>(mut response: Response, warnings: &[T]) -> Response {
    for warning in warnings {
        if let Ok(value) = HeaderValue::from_str(&warning_header(&warning.to_string())) {
            response.headers_mut().append(header::WARNING, value);
        }
    }
    response
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        match &self {
            ApiError::App(AppError::Internal(cause)) => tracing::error!(%cause, "internal error"),
            ApiError::App(AppError::PolicyUnavailable(cause)) => {
                tracing::warn!(%cause, "policies unreadable: request refused")
            }
            ApiError::App(AppError::Unavailable(cause)) => {
                tracing::warn!(%cause, "store unavailable")
            }
            _ => {}
        }
        let mut response = (status, axum::Json(self.body())).into_response();
        if let ApiError::App(AppError::PlanNotAllowed(_, warnings)) = &self {
            response = with_warnings(response, warnings);
        }
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"palisade\""),
            );
        }
        let retry_after = match &self {
            ApiError::App(error) => error.retry_after(),
            _ => None,
        };
        if let Some(seconds) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
        }
        response
    }
}

pub type ApiResult<T> = Result<T, ApiError>;
