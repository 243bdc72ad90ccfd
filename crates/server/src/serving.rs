//! The listener and the limits every connection and request lives under: a client that sends
//! its request head too slowly, sits idle on a kept-alive connection, or trickles a body is
//! dropped; no request runs longer than [`REQUEST_TIMEOUT`].

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio_rustls::rustls;

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

/// A body that must arrive whole within `limit` of the first attempt to read it. The bound is
/// on the whole body, not between its pieces: a client that trickles a byte now and then is
/// cut at `limit` as surely as one that stops sending (the reader gets [`BodyTimedOut`]).
struct DeadlineBody {
    limit: Duration,
    deadline: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    inner: axum::body::Body,
}

impl DeadlineBody {
    fn new(limit: Duration, inner: axum::body::Body) -> Self {
        DeadlineBody {
            limit,
            deadline: None,
            inner,
        }
    }
}

/// A request body did not arrive whole within the body limit.
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("the body did not arrive within {}", shown(*.0))]
pub struct BodyTimedOut(pub Duration);

/// `20 s`, or `500 ms` below a second.
pub fn shown(duration: Duration) -> String {
    if duration >= Duration::from_secs(1) && duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{} ms", duration.as_millis())
    }
}

impl hyper::body::Body for DeadlineBody {
    type Data = axum::body::Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let limit = this.limit;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        if deadline.as_mut().poll(cx).is_ready() {
            return std::task::Poll::Ready(Some(Err(Box::new(BodyTimedOut(limit)))));
        }
        std::pin::Pin::new(&mut this.inner)
            .poll_frame(cx)
            .map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
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

/// Why a certificate or key file cannot serve TLS; the text names the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{path}: {why}")]
    File { path: String, why: String },
    #[error("--tls-cert and --tls-key do not make a TLS identity: {0}")]
    Identity(String),
}

/// A TLS server configuration from PEM files: `cert` holds the certificate chain (leaf
/// first), `key` its private key (PKCS#8, PKCS#1 or SEC1). TLS 1.2 and 1.3, HTTP/1.1.
pub fn tls_config(
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer};
    let file_error = |path: &std::path::Path, why: String| TlsError::File {
        path: path.display().to_string(),
        why,
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file_error(cert, e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(cert, e.to_string()))?;
    if chain.is_empty() {
        return Err(file_error(cert, "holds no PEM certificate".to_owned()));
    }
    let private = PrivateKeyDer::from_pem_file(key).map_err(|e| file_error(key, e.to_string()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Identity(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| TlsError::Identity(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Binds `listen` and serves `router` until Ctrl-C or SIGTERM; with `tls`, HTTPS only.
pub async fn serve(
    router: Router,
    listen: std::net::SocketAddr,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(listen).await?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(address = %listener.local_addr()?, scheme, "palisade is listening");
    serve_with(listener, router, shutdown_signal(), Limits::default(), tls).await
}

/// Serves `router` on `listener` (HTTP/1.1) under `limits` until `shutdown` completes, then
/// lets requests in flight finish for up to [`SHUTDOWN_GRACE`].
pub async fn serve_on(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    limits: Limits,
) -> std::io::Result<()> {
    serve_with(listener, router, shutdown, limits, None).await
}

/// [`serve_on`], with TLS when `tls` is given: the handshake must finish within the header
/// limit, like a request head.
pub async fn serve_with(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    limits: Limits,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let router = router
        .layer(axum::middleware::from_fn(move |request, next| {
            bounded(limits.request, request, next)
        }))
        .layer(axum::middleware::map_request(
            move |request: Request| async move {
                request.map(|body| axum::body::Body::new(DeadlineBody::new(limits.body, body)))
            },
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
                let (builder, watcher, acceptor) =
                    (builder.clone(), graceful.watcher(), acceptor.clone());
                tokio::spawn(async move {
                    let Some(acceptor) = acceptor else {
                        return serve_connection(&builder, watcher, stream, service).await;
                    };
                    match tokio::time::timeout(limits.header, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(&builder, watcher, stream, service).await,
                        Ok(Err(error)) => tracing::debug!(%error, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
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

/// Serves one connection (plain or TLS) until it ends or a graceful shutdown ends it.
async fn serve_connection<I>(
    builder: &hyper::server::conn::http1::Builder,
    watcher: hyper_util::server::graceful::Watcher,
    io: I,
    service: TowerToHyperService<Router>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let connection = builder.serve_connection(TokioIo::new(io), service);
    if let Err(error) = watcher.watch(connection).await {
        tracing::debug!(%error, "connection ended with an error");
    }
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
