//! Dev-only: a TCP proxy a test can stall. Put between a client and a server (a replica and
//! PostgreSQL), it forwards bytes both ways until [`StallProxy::stall`]; from then on it
//! forwards nothing and closes nothing, as a network that silently drops a peer does, until
//! [`StallProxy::resume`]. The connections stay open on both sides all along.

#![allow(
    clippy::panic,
    reason = "test helpers: a proxy that cannot start must fail the test loudly"
)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy on a loopback port to `upstream`; stops when dropped (connections under way end).
#[derive(Debug)]
pub struct StallProxy {
    address: SocketAddr,
    stalled: watch::Sender<bool>,
    /// How long each chunk a client sends is held before it is passed on.
    delay: watch::Sender<Duration>,
    /// Each connection's own switch, with the first bytes its client sent.
    connections: Arc<Mutex<Vec<Connection>>>,
    accepting: tokio::task::JoinHandle<()>,
}

/// One proxied connection: what its client sent first (a PostgreSQL startup message names the
/// user, the database and the `application_name`), and a switch that stalls it alone.
#[derive(Debug)]
struct Connection {
    first_bytes: Arc<Mutex<Vec<u8>>>,
    stalled: watch::Sender<bool>,
}

/// How many of a client's first bytes are kept to select connections by.
const FIRST_BYTES: usize = 4096;

impl Drop for StallProxy {
    fn drop(&mut self) {
        self.accepting.abort();
    }
}

impl StallProxy {
    /// Listens on `127.0.0.1:<free port>` and forwards every connection to `upstream`. Call
    /// within a Tokio runtime.
    pub async fn start(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| panic!("the proxy cannot listen: {e}"));
        let address = listener
            .local_addr()
            .unwrap_or_else(|e| panic!("the proxy has no address: {e}"));
        let (stalled, watching) = watch::channel(false);
        let (delay, delaying) = watch::channel(Duration::ZERO);
        let connections: Arc<Mutex<Vec<Connection>>> = Arc::default();
        let known = connections.clone();
        let accepting = tokio::spawn(async move {
            let mut tasks = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let (own, own_watching) = watch::channel(false);
                let first_bytes: Arc<Mutex<Vec<u8>>> = Arc::default();
                known
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(Connection {
                        first_bytes: first_bytes.clone(),
                        stalled: own,
                    });
                let switches = Switches {
                    all: watching.clone(),
                    own: own_watching,
                    delay: None,
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tasks.spawn(forward(
                    client_read,
                    server_write,
                    Switches {
                        delay: Some(delaying.clone()),
                        ..switches.clone()
                    },
                    Some(first_bytes),
                ));
                tasks.spawn(forward(server_read, client_write, switches, None));
            }
        });
        StallProxy {
            address,
            stalled,
            delay,
            connections,
            accepting,
        }
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `url` (`scheme://user:password@host:port/path?query`) with its host and port replaced
    /// by the proxy's.
    pub fn url(&self, url: &str) -> String {
        with_address(url, self.address)
    }

    /// From now on no byte passes either way, on any connection, and none is closed.
    pub fn stall(&self) {
        self.stalled.send_replace(true);
    }

    /// Bytes pass again (what was held back first), on every connection.
    pub fn resume(&self) {
        self.stalled.send_replace(false);
        for connection in self.lock().iter() {
            connection.stalled.send_replace(false);
        }
    }

    /// From now on each chunk a client sends waits `delay` before it is passed on (a slow
    /// network); `Duration::ZERO` ends that.
    pub fn slow_down(&self, delay: Duration) {
        self.delay.send_replace(delay);
    }

    /// Stalls only the open connections whose client's first bytes contain `needle` (for
    /// PostgreSQL without TLS, e.g. `sslmode=disable`: the startup message, which carries the
    /// `application_name`); the others, and connections made later, go on. Returns how many
    /// were stalled.
    pub fn stall_connections_with(&self, needle: &[u8]) -> usize {
        let mut stalled = 0;
        for connection in self.lock().iter() {
            let first = connection
                .first_bytes
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if !needle.is_empty() && first.windows(needle.len()).any(|w| w == needle) {
                connection.stalled.send_replace(true);
                stalled += 1;
            }
        }
        stalled
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Connection>> {
        self.connections.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `url` with its host and port replaced by `address`.
fn with_address(url: &str, address: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (user, rest) = match rest.rsplit_once('@') {
        Some((user, rest)) => (Some(user), rest),
        None => (None, rest),
    };
    let tail = rest.find(['/', '?']).map_or("", |at| &rest[at..]);
    match user {
        Some(user) => format!("{scheme}://{user}@{address}{tail}"),
        None => format!("{scheme}://{address}{tail}"),
    }
}

/// The `host:port` of a URL such as `postgres://user:password@127.0.0.1:5432/db`.
pub fn socket_address(url: &str) -> SocketAddr {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let rest = rest.rsplit_once('@').map_or(rest, |(_, rest)| rest);
    let authority = rest.split(['/', '?']).next().unwrap_or(rest);
    authority
        .parse()
        .unwrap_or_else(|e| panic!("'{authority}' is not an address: {e}"))
}

/// The proxy's switch for every connection and a connection's own.
#[derive(Clone, Debug)]
struct Switches {
    all: watch::Receiver<bool>,
    own: watch::Receiver<bool>,
    /// The client's side: how long each chunk waits ([`StallProxy::slow_down`]).
    delay: Option<watch::Receiver<Duration>>,
}

impl Switches {
    /// Resolves once neither switch stalls the connection; `false` once the proxy is gone.
    async fn flowing(&mut self) -> bool {
        loop {
            if self.all.wait_for(|s| !*s).await.is_err() {
                return false;
            }
            if self.own.wait_for(|s| !*s).await.is_err() {
                return false;
            }
            if !*self.all.borrow() {
                return true;
            }
        }
    }

    /// Resolves once either switch stalls the connection (never once the proxy is gone).
    async fn stalled(&mut self) {
        let all = async { self.all.wait_for(|s| *s).await.is_ok() };
        let own = async { self.own.wait_for(|s| *s).await.is_ok() };
        let stalled = tokio::select! {
            stalled = all => stalled,
            stalled = own => stalled,
        };
        if !stalled {
            std::future::pending::<()>().await;
        }
    }
}

/// Copies from `from` to `to` while not stalled; while stalled, neither reads nor writes.
/// With `first_bytes`, keeps the first bytes read (see [`StallProxy::stall_connections_with`]).
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut switches: Switches,
    first_bytes: Option<Arc<Mutex<Vec<u8>>>>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if !switches.flowing().await {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            // Stalled while waiting: stop reading at once.
            () = switches.stalled() => continue,
        };
        let Ok(read) = read else { return };
        if read == 0 {
            let _ = to.shutdown().await;
            return;
        }
        if let Some(first) = &first_bytes {
            let mut first = first.lock().unwrap_or_else(|e| e.into_inner());
            let room = FIRST_BYTES.saturating_sub(first.len()).min(read);
            first.extend_from_slice(&buffer[..room]);
        }
        let delay = switches
            .delay
            .as_ref()
            .map_or(Duration::ZERO, |d| *d.borrow());
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // Read just before a stall: held back until it ends.
        if !switches.flowing().await {
            return;
        }
        if to.write_all(&buffer[..read]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_point_at_the_proxy() {
        let address: SocketAddr = "127.0.0.1:4000".parse().unwrap_or_else(|e| panic!("{e}"));
        let url = "postgres://u:p@127.0.0.1:5432/db?sslmode=disable";
        assert_eq!(
            socket_address(url),
            "127.0.0.1:5432".parse().unwrap_or_else(|e| panic!("{e}"))
        );
        assert_eq!(
            with_address(url, address),
            "postgres://u:p@127.0.0.1:4000/db?sslmode=disable"
        );
        assert_eq!(
            with_address("postgres://h:1/db", address),
            "postgres://127.0.0.1:4000/db"
        );
    }
}
