//! The listener and the limits every connection and request lives under: a client that sends
//! its request head too slowly, sits idle on a kept-alive connection, or trickles a body is
//! dropped; no request runs longer than [`REQUEST_TIMEOUT`].

use std::future::Future;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use crate::error::ApiError;

/// A request head (request line and headers) must arrive within this time of the connection
/// opening, or of the previous answer on a kept-alive connection (which makes it the idle
/// timeout too). Slower clients are disconnected.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// A request body must arrive whole within this time of the handler starting to read it.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(20);

/// No request runs longer than this: it is answered 503 `unavailable` and its work stops.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a graceful shutdown waits for requests in flight.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// The time limits of a server; [`Limits::default`] has the documented values.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// See [`HEADER_TIMEOUT`].
    pub header: Duration,
    /// See [`BODY_TIMEOUT`].
    pub body: Duration,
    /// See [`REQUEST_TIMEOUT`].
    pub request: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header: HEADER_TIMEOUT,
            body: BODY_TIMEOUT,
            request: REQUEST_TIMEOUT,
        }
    }
}

/// Marks when a request reached the API (see [`Started`]).
pub async fn mark_start(mut request: Request, next: Next) -> Response {
    request
        .extensions_mut()
        .insert(Started(tokio::time::Instant::now()));
    next.run(request).await
}

/// The total time bound of one request: past it, the request's work is dropped and it is
/// answered 503 `unavailable`. (A body over 1 MiB is cut where it is read, after the token
/// is checked: SPEC 2.4 answers 401 before anything about the body.)
async fn bounded(limit: Duration, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::TimedOut(limit).into_response(),
    }
}

/// When the request reached the API: store bounds of a request are measured from here, so
/// that every step of it (token, boundary, policies) shares one bound.
#[derive(Clone, Copy, Debug)]
pub struct Started(pub tokio::time::Instant);

/// The deadline of a request's store work (SPEC 2.4: policies read within 2 s), measured from
/// when the request reached the API, so that the token lookup, the boundary lookup and the
/// guarded write share one bound; `now` when the request carries no start mark.
pub fn deadline_of(state: &crate::AppState, started: Option<&Started>) -> tokio::time::Instant {
    started.map_or_else(tokio::time::Instant::now, |s| s.0) + state.policy_timeout
}

/// Binds `listen` and serves `router` until Ctrl-C or SIGTERM.
pub async fn serve(router: Router, listen: std::net::SocketAddr) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    tracing::info!(address = %listener.local_addr()?, "palisade is listening");
    serve_on(listener, router, shutdown_signal(), Limits::default()).await
}

/// Serves `router` on `listener` (HTTP/1.1) under `limits` until `shutdown` completes, then
/// lets requests in flight finish for up to [`SHUTDOWN_GRACE`].
pub async fn serve_on(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    limits: Limits,
) -> std::io::Result<()> {
    let router = router
        .layer(axum::middleware::from_fn(move |request, next| {
            bounded(limits.request, request, next)
        }))
        .layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            limits.body,
        ));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let stream = match accepted {
                    Ok((stream, _)) => stream,
                    Err(error) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(%error, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let _ = stream.set_nodelay(true);
                let service = TowerToHyperService::new(router.clone());
                let connection = builder.serve_connection(TokioIo::new(stream), service);
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    if let Err(error) = connection.await {
                        tracing::debug!(%error, "connection ended with an error");
                    }
                });
            }
            () = &mut shutdown => break,
        }
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("requests still running after the shutdown grace period were dropped");
    }
    Ok(())
}

/// Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = terminate => {},
    }
}
