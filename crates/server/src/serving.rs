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

/// How many connections a server serves at once unless told otherwise ([`serve`] derives its
/// own from the process's open-files limit).
pub const MAX_CONNECTIONS: usize = 4096;

/// The limits of a server; [`Limits::default`] has the documented values.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// See [`HEADER_TIMEOUT`].
    pub header: Duration,
    /// See [`BODY_TIMEOUT`].
    pub body: Duration,
    /// See [`REQUEST_TIMEOUT`].
    pub request: Duration,
    /// Connections served at once. At the cap, a connection is closed to make room for a new
    /// one: the one idle the longest (no request under way after an answer, or no request
    /// head [`FRESH_GRACE`] after it opened), else the one that has been sending a request
    /// body the longest. A new connection gets its grace to send its request head, and a
    /// request that has arrived whole is answered; only while every connection is one of
    /// those do new connections wait in the listen queue. So clients holding idle sockets or
    /// trickling bodies cannot keep others (`/healthz`, `/readyz`) out, and the process never
    /// runs out of file descriptors on accepting.
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header: HEADER_TIMEOUT,
            body: BODY_TIMEOUT,
            request: REQUEST_TIMEOUT,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// Raises the process's soft limit of open files to its hard limit (a soft limit of 1,024 is
/// common, and is what a client holding idle sockets exhausted), and answers the connections to
/// serve at once: that limit less a reserve for the store's connections, the clusters' clients
/// and files (a quarter of it, at most 1,024).
pub fn connections_for_open_files() -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limits = getrlimit(Resource::Nofile);
    let raised = Rlimit {
        current: limits.maximum,
        maximum: limits.maximum,
    };
    if limits.maximum.is_some() && limits.maximum != limits.current {
        if let Err(error) = setrlimit(Resource::Nofile, raised) {
            tracing::warn!(%error, "the open-files limit could not be raised to its hard limit");
        }
    }
    let open_files = getrlimit(Resource::Nofile)
        .current
        .map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
    let reserve = (open_files / 4).min(1024);
    open_files.saturating_sub(reserve).max(1)
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
    serve_listener(listener, router, shutdown_signal(), tls).await
}

/// Serves `router` on `listener` until `shutdown` completes, as many connections at once as
/// the process's open-files limit allows ([`connections_for_open_files`]); with `tls`, HTTPS
/// only.
pub async fn serve_listener(
    listener: TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()>,
    tls: Option<Arc<rustls::ServerConfig>>,
) -> std::io::Result<()> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let limits = Limits {
        max_connections: connections_for_open_files(),
        ..Limits::default()
    };
    tracing::info!(
        address = %listener.local_addr()?,
        scheme,
        max_connections = limits.max_connections,
        "palisade is listening"
    );
    serve_with(listener, router, shutdown, limits, tls).await
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
    let connections = Arc::new(Connections::new(limits.max_connections));
    loop {
        // Room for one more connection first: the listen queue holds the rest meanwhile.
        tokio::select! {
            () = connections.room() => {}
            () = &mut shutdown => break,
        }
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
                let (connection, close) = connections.open();
                let service = TowerToHyperService::new(tracked(router.clone(), connection.clone()));
                let (builder, watcher, acceptor, connections) =
                    (builder.clone(), graceful.watcher(), acceptor.clone(), connections.clone());
                tokio::spawn(async move {
                    let served = async {
                        let Some(acceptor) = acceptor else {
                            return serve_connection(&builder, watcher, stream, service).await;
                        };
                        match tokio::time::timeout(limits.header, acceptor.accept(stream)).await {
                            Ok(Ok(stream)) => {
                                serve_connection(&builder, watcher, stream, service).await
                            }
                            Ok(Err(error)) => tracing::debug!(%error, "TLS handshake failed"),
                            Err(_) => tracing::debug!("TLS handshake timed out"),
                        }
                    };
                    tokio::select! {
                        () = served => {}
                        () = close.notified() => {
                            tracing::debug!("idle connection closed to make room for a new one");
                        }
                    }
                    connections.closed(&connection);
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

/// How long a new connection is kept at the cap before it has sent a request head: long
/// enough for a client that sends its request at once (a probe) to be answered, short enough
/// that clients sending nothing make way at hundreds of connections a second.
pub const FRESH_GRACE: Duration = Duration::from_millis(500);

/// One connection as the cap sees it.
#[derive(Debug)]
struct Connection {
    id: u64,
    opened: tokio::time::Instant,
    /// Requests begun on it (their heads arrived).
    requests: std::sync::atomic::AtomicU64,
    /// Requests under way on it.
    in_flight: std::sync::atomic::AtomicUsize,
    /// When its last request ended (or it opened).
    idle_since: std::sync::Mutex<tokio::time::Instant>,
    /// Since when its request's body has been arriving (`None`: no body under way).
    receiving_since: std::sync::Mutex<Option<tokio::time::Instant>>,
}

/// Whether the cap may close a connection to make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Eviction {
    /// Yes, in this order (least first): idle (after an answer, or sending no request head past
    /// [`FRESH_GRACE`]) by how long, then sending a request body by how long.
    Idle(tokio::time::Instant),
    Receiving(tokio::time::Instant),
    /// Not before this: a new connection that has not sent its request head yet.
    NotBefore(tokio::time::Instant),
    /// No: a request that arrived is being answered (it ends within [`REQUEST_TIMEOUT`]).
    Never,
}

impl Connection {
    fn eviction(&self, now: tokio::time::Instant) -> Eviction {
        use std::sync::atomic::Ordering;
        if self.in_flight.load(Ordering::Acquire) > 0 {
            return match self.receiving_since.lock().ok().and_then(|since| *since) {
                Some(since) => Eviction::Receiving(since),
                None => Eviction::Never,
            };
        }
        if self.requests.load(Ordering::Acquire) > 0 {
            return Eviction::Idle(self.idle_since.lock().map_or(now, |t| *t));
        }
        let grace_ends = self.opened + FRESH_GRACE;
        if grace_ends <= now {
            Eviction::Idle(self.opened)
        } else {
            Eviction::NotBefore(grace_ends)
        }
    }
}

/// A request body that marks its connection as receiving until it has arrived whole (or is
/// dropped), so that the cap can tell a client trickling a body from a request being answered.
struct Receiving {
    inner: hyper::body::Incoming,
    connection: Arc<Connection>,
    done: bool,
}

impl Receiving {
    fn new(inner: hyper::body::Incoming, connection: Arc<Connection>) -> Self {
        use hyper::body::Body as _;
        let done = inner.is_end_stream();
        if !done {
            if let Ok(mut since) = connection.receiving_since.lock() {
                *since = Some(tokio::time::Instant::now());
            }
        }
        Receiving {
            inner,
            connection,
            done,
        }
    }

    fn finish(&mut self) {
        if !self.done {
            self.done = true;
            if let Ok(mut since) = self.connection.receiving_since.lock() {
                *since = None;
            }
        }
    }
}

impl Drop for Receiving {
    fn drop(&mut self) {
        self.finish();
    }
}

impl hyper::body::Body for Receiving {
    type Data = axum::body::Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        let this = self.get_mut();
        let polled = std::pin::Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            std::task::Poll::Ready(None | Some(Err(_))) => this.finish(),
            std::task::Poll::Ready(Some(Ok(_))) if this.inner.is_end_stream() => this.finish(),
            _ => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

/// A live connection and what closes it.
type Live = (Arc<Connection>, Arc<tokio::sync::Notify>);

/// The connections a server holds, at most `max` (see [`Limits::max_connections`]).
#[derive(Debug)]
struct Connections {
    max: usize,
    next: std::sync::atomic::AtomicU64,
    live: std::sync::Mutex<std::collections::HashMap<u64, Live>>,
    freed: tokio::sync::Notify,
}

impl Connections {
    fn new(max: usize) -> Self {
        Connections {
            max: max.max(1),
            next: std::sync::atomic::AtomicU64::new(0),
            live: std::sync::Mutex::new(std::collections::HashMap::new()),
            freed: tokio::sync::Notify::new(),
        }
    }

    /// Returns once one more connection fits: at the cap, the connection idle the longest,
    /// else the one sending a request body the longest, is told to close (and forgotten at
    /// once); with neither, waits for one to end or for a new one's grace to pass.
    async fn room(&self) {
        loop {
            let freed = self.freed.notified();
            let not_before = {
                let Ok(mut live) = self.live.lock() else {
                    return;
                };
                if live.len() < self.max {
                    return;
                }
                let now = tokio::time::Instant::now();
                let first = live
                    .values()
                    .map(|(c, close)| (c.eviction(now), c.id, close))
                    .min_by_key(|(eviction, _, _)| *eviction)
                    .map(|(eviction, id, close)| (eviction, id, close.clone()));
                match first {
                    Some((Eviction::Idle(_) | Eviction::Receiving(_), id, close)) => {
                        live.remove(&id);
                        close.notify_one();
                        return;
                    }
                    Some((Eviction::NotBefore(when), _, _)) => Some(when),
                    Some((Eviction::Never, _, _)) | None => None,
                }
            };
            match not_before {
                Some(when) => {
                    tokio::select! {
                        () = freed => {}
                        () = tokio::time::sleep_until(when) => {}
                    }
                }
                None => freed.await,
            }
        }
    }

    /// Registers a new connection; the notify closes it.
    fn open(&self) -> (Arc<Connection>, Arc<tokio::sync::Notify>) {
        let connection = Arc::new(Connection {
            id: self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            opened: tokio::time::Instant::now(),
            requests: std::sync::atomic::AtomicU64::new(0),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            idle_since: std::sync::Mutex::new(tokio::time::Instant::now()),
            receiving_since: std::sync::Mutex::new(None),
        });
        let close = Arc::new(tokio::sync::Notify::new());
        if let Ok(mut live) = self.live.lock() {
            live.insert(connection.id, (connection.clone(), close.clone()));
        }
        (connection, close)
    }

    /// A connection ended (or was closed to make room).
    fn closed(&self, connection: &Connection) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(&connection.id);
        }
        self.freed.notify_one();
    }
}

/// `router`, counting the requests under way on `connection` (what makes it busy or idle) and
/// marking while their bodies arrive.
fn tracked(
    router: Router,
    connection: Arc<Connection>,
) -> impl tower::Service<
    Request<hyper::body::Incoming>,
    Response = Response,
    Error = std::convert::Infallible,
    Future = impl Future<Output = Result<Response, std::convert::Infallible>> + Send,
> + Clone {
    use std::sync::atomic::Ordering;
    use tower::ServiceExt;
    tower::service_fn(move |request: Request<hyper::body::Incoming>| {
        let (router, connection) = (router.clone(), connection.clone());
        async move {
            connection.in_flight.fetch_add(1, Ordering::AcqRel);
            connection.requests.fetch_add(1, Ordering::AcqRel);
            let body =
                |incoming| axum::body::Body::new(Receiving::new(incoming, connection.clone()));
            let response = router.oneshot(request.map(body)).await;
            if let Ok(mut since) = connection.idle_since.lock() {
                *since = tokio::time::Instant::now();
            }
            connection.in_flight.fetch_sub(1, Ordering::AcqRel);
            response
        }
    })
}

/// Serves one connection (plain or TLS) until it ends or a graceful shutdown ends it.
async fn serve_connection<I, S>(
    builder: &hyper::server::conn::http1::Builder,
    watcher: hyper_util::server::graceful::Watcher,
    io: I,
    service: TowerToHyperService<S>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: tower::Service<
            Request<hyper::body::Incoming>,
            Response = Response,
            Error = std::convert::Infallible,
        > + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
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
