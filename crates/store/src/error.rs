//! The store's errors, in its own types: no database driver type appears in them, so the
//! crates above the store neither depend on the driver nor change when it does.
//!
//! Each error says its cause once: an error either carries a message of its own or names
//! its cause as its `source`, never both.

/// Why a guard refused a write; the caller downcasts it back to its own error type.
pub type Veto = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("not found")]
    NotFound,
    /// A name is taken, or a delete is refused because something still depends on the object.
    #[error("conflict: {0}")]
    Conflict(String),
    /// `If-Match` named another version.
    #[error("precondition failed: the object has changed")]
    PreconditionFailed,
    /// The boundary's policies could not be read inside a guarded write. Nothing was written.
    #[error("the boundary's policies could not be read")]
    PolicyUnavailable(#[source] DatabaseError),
    /// A guarded write's deadline passed before its commit began. Nothing was written (once a
    /// commit is under way, its outcome is the answer, however late).
    #[error("the store did not answer before the deadline; nothing was written")]
    Timeout,
    /// A guard or editor refused the write. Nothing was written.
    #[error("refused")]
    Vetoed(#[source] Veto),
    /// The database failed or is unreachable.
    #[error("database error")]
    Database(#[from] DatabaseError),
    #[error("migration failed")]
    Migrate(#[source] MigrationError),
    /// A database URL that names no supported store (the scheme only: never the URL, which
    /// may hold a password).
    #[error("unsupported scheme '{0}' (use postgres://, postgresql://, sqlite: or a file path)")]
    UnsupportedUrl(String),
    /// A stored row holds something the store cannot read back (e.g. a bad timestamp).
    #[error("corrupt row: {0}")]
    Corrupt(String),
    /// Storing the upload would take its boundary's uploads past the limit it was given;
    /// `stored` is what they count now. Nothing was written.
    #[error("the boundary's uploads count {stored} bytes; this one would pass their limit")]
    UploadQuota { stored: u64 },
    /// The reconciler's lease could not be confirmed, now or earlier (a lease query failed or
    /// did not answer in time), or no longer holds the cluster asked about: write nothing
    /// there. A lease once lost holds nothing more; the replica joins again.
    #[error("the lease is not confirmed: {0}")]
    LeaseLost(String),
    /// A resource names an upload that is not stored (deleted meanwhile). Nothing was
    /// written.
    #[error("upload {0} is not stored")]
    UploadMissing(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// What kind of failure a `DatabaseError` is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DatabaseErrorKind {
    /// The database could not be reached or the connection to it failed (I/O, TLS, protocol),
    /// or the connection pool is closed.
    Unreachable,
    /// No connection became free in time (PostgreSQL: 2 s), typically because the server is
    /// down or overloaded.
    TimedOut,
    /// The row breaks a unique constraint (a name is taken).
    UniqueViolation,
    /// The row references a row that does not exist.
    ForeignKeyViolation,
    /// The database refused a statement for another reason (see `DatabaseError::code`).
    Refused,
    /// A value read back has another type than the store expects.
    Decode,
    /// Anything else (a bad URL, a driver fault).
    Other,
}

/// A failure of the database or of the way to it: what happened, in the driver's words, and
/// its kind. It carries no source: the message is the whole story.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DatabaseError {
    kind: DatabaseErrorKind,
    code: Option<String>,
    message: String,
}

impl DatabaseError {
    pub fn kind(&self) -> DatabaseErrorKind {
        self.kind
    }

    /// The database's own code for a refused statement: the SQLSTATE on PostgreSQL (e.g.
    /// `55P03`), the extended result code on SQLite (e.g. `5` for `SQLITE_BUSY`).
    pub fn code(&self) -> Option<&str> {
        self.code.as_deref()
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// Translates a driver error; the only way one enters the store's error types.
    pub(crate) fn from_sqlx(error: sqlx::Error) -> Self {
        use sqlx::error::ErrorKind as Violation;
        let (kind, code) = match &error {
            sqlx::Error::Database(db) => {
                let kind = match db.kind() {
                    Violation::UniqueViolation => DatabaseErrorKind::UniqueViolation,
                    Violation::ForeignKeyViolation => DatabaseErrorKind::ForeignKeyViolation,
                    _ => DatabaseErrorKind::Refused,
                };
                (kind, db.code().map(|code| code.into_owned()))
            }
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => (DatabaseErrorKind::Unreachable, None),
            sqlx::Error::PoolTimedOut => (DatabaseErrorKind::TimedOut, None),
            sqlx::Error::ColumnDecode { .. }
            | sqlx::Error::Decode(_)
            | sqlx::Error::ColumnNotFound(_)
            | sqlx::Error::ColumnIndexOutOfBounds { .. }
            | sqlx::Error::TypeNotFound { .. } => (DatabaseErrorKind::Decode, None),
            _ => (DatabaseErrorKind::Other, None),
        };
        DatabaseError {
            kind,
            code,
            message: error.to_string(),
        }
    }

    /// A failure of palisade's own around the database, in its words.
    pub(crate) fn other(message: impl Into<String>) -> Self {
        DatabaseError {
            kind: DatabaseErrorKind::Other,
            code: None,
            message: message.into(),
        }
    }

    /// A failed file operation on the database's side (SQLite: its file or directory).
    pub(crate) fn io(error: std::io::Error) -> Self {
        Self::from_sqlx(sqlx::Error::Io(error))
    }
}

impl std::fmt::Display for DatabaseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DatabaseError {}

/// A driver error as a `StoreError::Database`.
pub(crate) fn db(error: sqlx::Error) -> StoreError {
    StoreError::Database(DatabaseError::from_sqlx(error))
}

/// The migrations could not be applied; the message says which and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrationError {
    message: String,
}

impl MigrationError {
    pub(crate) fn from_sqlx(error: sqlx::migrate::MigrateError) -> Self {
        MigrationError {
            message: error.to_string(),
        }
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for MigrationError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MigrationError {}

/// A migration failure as a `StoreError::Migrate`.
pub(crate) fn migrate(error: sqlx::migrate::MigrateError) -> StoreError {
    StoreError::Migrate(MigrationError::from_sqlx(error))
}
