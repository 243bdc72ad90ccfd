//! Dev-only: a TCP proxy a test can stall. Put between a client and a server (a replica and
//! PostgreSQL), it forwards bytes both ways until [`StallProxy::stall`]; from then on it
//! forwards nothing and closes nothing, as a network that silently drops a peer does, until
//! [`StallProxy::resume`]. The connections stay open on both sides all along.

#![allow(
    clippy::panic,
    reason = "test helpers: a proxy that cannot start must fail the test loudly"
)]

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// A proxy on a loopback port to `upstream`; stops when dropped (connections under way end).
#[derive(Debug)]
pub struct StallProxy {
    address: SocketAddr,
    stalled: watch::Sender<bool>,
    accepting: tokio::task::JoinHandle<()>,
}

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
        let accepting = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = TcpStream::connect(upstream).await else {
                    continue;
                };
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                connections.spawn(forward(client_read, server_write, watching.clone()));
                connections.spawn(forward(server_read, client_write, watching.clone()));
            }
        });
        StallProxy {
            address,
            stalled,
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

    /// Bytes pass again (what was held back first).
    pub fn resume(&self) {
        self.stalled.send_replace(false);
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

/// Copies from `from` to `to` while not stalled; while stalled, neither reads nor writes.
async fn forward(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut stalled: watch::Receiver<bool>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        if stalled.wait_for(|s| !*s).await.is_err() {
            return;
        }
        let read = tokio::select! {
            read = from.read(&mut buffer) => read,
            // Stalled while waiting: stop reading at once.
            Ok(_) = stalled.wait_for(|s| *s) => continue,
        };
        let Ok(read) = read else { return };
        if read == 0 {
            let _ = to.shutdown().await;
            return;
        }
        // Read just before a stall: held back until it ends.
        if stalled.wait_for(|s| !*s).await.is_err() {
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
