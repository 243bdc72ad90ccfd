//! The reconciler's lease: which replica runs the reconciler of an installation.

/// The right to run this installation's reconciler. PostgreSQL: a session-level advisory lock
/// held on a connection of its own, lost when that connection is; SQLite: an exclusive lock
/// on `<file>.reconciler.lock`, held while the file handle is open (one process of those
/// serving a file leads; an in-memory database has one process anyway).
#[derive(Debug)]
pub struct Lease {
    connection: Option<tokio::sync::Mutex<sqlx::PgConnection>>,
    /// Closing it releases the lock.
    _file: Option<std::fs::File>,
}

impl Lease {
    pub(crate) fn local() -> Self {
        Lease {
            connection: None,
            _file: None,
        }
    }

    pub(crate) fn locked(file: std::fs::File) -> Self {
        Lease {
            connection: None,
            _file: Some(file),
        }
    }

    pub(crate) fn on(connection: sqlx::PgConnection) -> Self {
        Lease {
            connection: Some(tokio::sync::Mutex::new(connection)),
            _file: None,
        }
    }

    /// Whether the lease still holds (PostgreSQL: its connection answers within 5 s).
    pub async fn held(&self) -> bool {
        use sqlx::Connection;
        let Some(connection) = &self.connection else {
            return true;
        };
        let mut connection = connection.lock().await;
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(5), connection.ping()).await,
            Ok(Ok(()))
        )
    }
}
