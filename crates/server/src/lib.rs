//! palisade's HTTP API: `app(state)` builds the router, `serve` runs it. The only crate that
//! knows status codes; every decision comes from `palisade-policy`, every byte from the store.

pub mod auth;
pub mod demo;
pub mod error;
pub mod guard;
pub mod json;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod sealing;
pub mod serving;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, FromRequest, Request};
use axum::http::{header, HeaderMap};
use axum::Router;
use palisade_policy::Catalog;
use palisade_store::SharedStore;

use crate::error::ApiError;

/// Request bodies above this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// How long a plan path waits for the store before answering 503 (SPEC 2.4).
pub const POLICY_READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Everything a handler needs, shared by every request.
#[derive(Clone, Debug)]
pub struct AppState {
    pub store: SharedStore,
    pub catalog: Arc<Catalog>,
    pub metrics: metrics::Metrics,
    pub sealing: sealing::SealingKey,
    pub policy_timeout: Duration,
    /// Turns for CPU-heavy request work (parsing and validating an apply), one per core, so
    /// that a burst of large requests queues instead of taking every worker thread.
    pub heavy_work: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    pub fn new(store: SharedStore, catalog: Catalog, sealing: sealing::SealingKey) -> Self {
        AppState {
            store,
            catalog: Arc::new(catalog),
            metrics: metrics::Metrics::global(),
            sealing,
            policy_timeout: POLICY_READ_TIMEOUT,
            heavy_work: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get),
            )),
        }
    }
}

/// The whole HTTP API.
pub fn app(state: AppState) -> Router {
    app_with(state, Router::new())
}

/// The API plus `extra` routes (the portal's pages), sharing state, limits and metrics.
pub fn app_with(state: AppState, extra: Router<AppState>) -> Router {
    routes::router()
        .merge(extra)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn(serving::mark_start))
        .with_state(state)
}

pub use serving::{serve, serve_on, shutdown_signal, Limits};

/// A request body read as bytes, with the 1 MiB limit answered as our 413.
#[derive(Debug)]
pub struct Body {
    pub headers: HeaderMap,
    pub bytes: axum::body::Bytes,
}

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let headers = request.headers().clone();
        let bytes = axum::body::Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::PayloadTooLarge
                } else {
                    ApiError::InvalidRequest(format!(
                        "the body could not be read whole: the client stopped sending it or \
                         did not send it within {} s",
                        serving::BODY_TIMEOUT.as_secs()
                    ))
                }
            })?;
        Ok(Body { headers, bytes })
    }
}

impl Body {
    /// 415 unless the content type is JSON (or one of `also`); a missing type is taken as JSON.
    pub fn require_json(&self, also: &[&str]) -> Result<(), ApiError> {
        let Some(value) = self.headers.get(header::CONTENT_TYPE) else {
            return Ok(());
        };
        let media = value
            .to_str()
            .unwrap_or("")
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        if media == "application/json" || also.contains(&media.as_str()) {
            Ok(())
        } else {
            let mut accepted = vec!["application/json"];
            accepted.extend_from_slice(also);
            Err(ApiError::UnsupportedMediaType(format!(
                "content type '{media}' is not supported here; use {}",
                accepted.join(" or ")
            )))
        }
    }

    /// Parses the body as exactly one JSON value with no key twice in an object; a syntax
    /// error names the line and column (see [`json::parse_value`]).
    pub fn json(&self) -> Result<serde_json::Value, ApiError> {
        json::parse_value(&self.bytes)
    }
}

/// A fresh installation id: `p` and 16 hex digits of randomness (a Kubernetes label value).
pub fn new_installation_id() -> String {
    use rand::RngCore;
    let mut bytes = [0u8; 8];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    format!("p{}", hex::encode(bytes))
}

/// Where `palisade serve` keeps its files.
#[derive(Clone, Debug)]
pub struct DataDir(pub PathBuf);
