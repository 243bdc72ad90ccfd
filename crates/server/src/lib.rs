//! palisade's HTTP API: `app(state)` builds the router, `serve` runs it. HTTP only: the
//! extractors, one mapping from `AppError` to a response, OpenAPI and metrics; every use case
//! is `palisade-app`'s. The only crate that knows status codes.

pub mod auth;
pub mod error;
pub mod metrics;
pub mod openapi;
pub mod routes;
pub mod serving;

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;

use axum::extract::{DefaultBodyLimit, FromRef, FromRequest, Request};
use axum::http::{header, HeaderMap};
use axum::Router;
use palisade_app::App;
use palisade_app::SharedStore;
use palisade_policy::Catalog;

use crate::error::ApiError;

pub use palisade_app::{SealingKey, POLICY_READ_TIMEOUT};

/// Request bodies above this are refused with 413.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// What a handler needs: the application and the metrics recorder.
#[derive(Clone, Debug)]
pub struct AppState {
    pub app: App,
    pub metrics: metrics::Metrics,
}

impl AppState {
    /// The API over a new application (no cluster adapter: see [`App::with_clusters`]).
    pub fn new(store: SharedStore, catalog: Catalog, sealing: SealingKey) -> Self {
        AppState::of(App::new(store, catalog, sealing))
    }

    /// The API over `app`.
    pub fn of(app: App) -> Self {
        AppState {
            app,
            metrics: metrics::Metrics::global(),
        }
    }
}

impl Deref for AppState {
    type Target = App;

    fn deref(&self) -> &App {
        &self.app
    }
}

impl DerefMut for AppState {
    fn deref_mut(&mut self) -> &mut App {
        &mut self.app
    }
}

impl FromRef<AppState> for App {
    fn from_ref(state: &AppState) -> App {
        state.app.clone()
    }
}

/// The whole HTTP API; a path outside it is the API's JSON 404 too.
pub fn app(state: AppState) -> Router {
    app_with(state, Router::new().fallback(routes::meta::not_found))
}

/// The API plus `extra` routes (the portal's pages), sharing state, limits and metrics. The
/// API's paths (`/v1` and every path under it, `/openapi.json`, `/healthz`, `/readyz`,
/// `/metrics`) answer as the API does, an unknown one with its JSON 404; every other path is
/// `extra`'s, and one it has no route for goes to its fallback (the portal's HTML 404).
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

pub use serving::{
    serve, serve_listener, serve_on, serve_with, shutdown_signal, tls_config, Limits, TlsError,
};

/// A request body not read yet. A handler reads it ([`UnreadBody::read`]) only once it knows
/// the caller may send it: after the token (401), the boundary (404) and the role (403), as
/// SPEC 4.1 orders the answers. So a caller that may not use a route never makes palisade
/// read (or parse) a body, and is answered the same whatever the body is.
#[derive(Debug)]
pub struct UnreadBody(Request);

impl<S: Send + Sync> FromRequest<S> for UnreadBody {
    type Rejection = std::convert::Infallible;

    async fn from_request(request: Request, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(UnreadBody(request))
    }
}

/// Why a body could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// Over the route's size limit (1 MiB, or the uploads' 8 MiB).
    TooLarge,
    /// It did not arrive whole within the body limit ([`serving::Limits::body`]).
    TimedOut(std::time::Duration),
    /// The client stopped sending it, or closed the connection.
    Incomplete,
}

/// The body limit that cut `error`'s body, if a [`serving::BodyTimedOut`] is among its causes.
fn timed_out(error: &(dyn std::error::Error + 'static)) -> Option<std::time::Duration> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(timed_out) = error.downcast_ref::<serving::BodyTimedOut>() {
            return Some(timed_out.0);
        }
        cause = error.source();
    }
    None
}

impl UnreadBody {
    /// The body's headers.
    pub fn headers(&self) -> &HeaderMap {
        self.0.headers()
    }

    /// Reads the whole body, within the route's size limit.
    pub async fn read_bytes(self) -> Result<(HeaderMap, axum::body::Bytes), ReadError> {
        let headers = self.0.headers().clone();
        let bytes = axum::body::Bytes::from_request(self.0, &())
            .await
            .map_err(|rejection| {
                if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
                    ReadError::TooLarge
                } else if let Some(limit) = timed_out(&rejection) {
                    ReadError::TimedOut(limit)
                } else {
                    ReadError::Incomplete
                }
            })?;
        Ok((headers, bytes))
    }

    /// Reads the whole body; over 1 MiB is our 413, a body that does not arrive a 400.
    pub async fn read(self) -> Result<Body, ApiError> {
        let (headers, bytes) = self.read_bytes().await?;
        Ok(Body { headers, bytes })
    }
}

impl From<ReadError> for ApiError {
    fn from(error: ReadError) -> Self {
        match error {
            ReadError::TooLarge => ApiError::PayloadTooLarge,
            ReadError::TimedOut(limit) => {
                ApiError::App(palisade_app::AppError::InvalidRequest(format!(
                    "the body could not be read whole: it did not arrive within {}",
                    serving::shown(limit)
                )))
            }
            ReadError::Incomplete => ApiError::App(palisade_app::AppError::InvalidRequest(
                "the body could not be read whole: the client stopped sending it".into(),
            )),
        }
    }
}

/// A request body read as bytes, with its request's headers.
#[derive(Debug)]
pub struct Body {
    pub headers: HeaderMap,
    pub bytes: axum::body::Bytes,
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
    /// error names the line and column (see [`palisade_api_types::json::parse_value`]).
    pub fn json(&self) -> Result<serde_json::Value, ApiError> {
        Ok(palisade_api_types::json::parse_value(&self.bytes)?)
    }

    /// Parses the body (JSON, strictly) into `T`; errors name the field.
    pub fn parse<T: serde::de::DeserializeOwned>(&self) -> Result<T, ApiError> {
        self.require_json(&[])?;
        Ok(palisade_api_types::json::parse(&self.bytes)?)
    }
}

/// Where `palisade serve` keeps its files.
#[derive(Clone, Debug)]
pub struct DataDir(pub PathBuf);
