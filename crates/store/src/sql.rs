//! The SQL layer the shared operations (`ops`) stand on: `Conn`, the three calls through
//! which they reach either database, with the bind parameters they take and the typed column
//! reads (`Fields`) row decoders use. Both dialects take `$1`-style parameters and agree on
//! every statement the operations run; what does differ (how a write locks its boundary or
//! the whole database) is a constant of each backend's `Conn` (see `impl_conn!`).
//!
//! The items `SqlBackend` names are `pub` only so that it may name them; the module is
//! private, so none of them (nor any driver type) is part of the crate's API.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::Database;

use crate::{DatabaseError, Result, StoreError};

/// A driver result, its error already in the store's words.
pub type DbResult<T> = std::result::Result<T, DatabaseError>;

/// A bind parameter.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
    OptInt(Option<i64>),
    Bytes(&'a [u8]),
    OptBool(Option<bool>),
}

/// Turns one row into a record.
pub type Decoder<T> = fn(&dyn Fields) -> sqlx::Result<T>;

/// A connection of either backend, on its own (a read) or inside a write transaction.
#[async_trait]
pub trait Conn: Send {
    /// Reads a boundary's name inside a write transaction and locks the boundary until the
    /// transaction ends: PostgreSQL locks its row (`FOR UPDATE`); SQLite's `BEGIN IMMEDIATE`
    /// already holds the database's write lock.
    const LOCK_BOUNDARY: &'static str;
    /// What a `SELECT` of a boundary appends to take its row in a SHARED lock (PostgreSQL
    /// ` FOR SHARE`): resource writes hold it, so they serialise against policy changes
    /// (which hold the exclusive lock) but not against each other. SQLite: nothing.
    const SHARE: &'static str;
    /// What a `SELECT` of one row appends to lock that row until the transaction ends
    /// (PostgreSQL ` FOR UPDATE`; SQLite: nothing, its write lock covers the database).
    const LOCK_ROW: &'static str;
    /// Locks the whole database until the transaction ends, if the write transaction does
    /// not already (PostgreSQL: an advisory lock; SQLite: `None`, `BEGIN IMMEDIATE` does).
    const LOCK_DATABASE: Option<&'static str>;

    /// Runs a statement; the number of rows it changed.
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> DbResult<u64>;

    async fn fetch_optional<T: Send>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        decode: Decoder<T>,
    ) -> DbResult<Option<T>>;

    async fn fetch_all<T: Send>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        decode: Decoder<T>,
    ) -> DbResult<Vec<T>>;

    /// Runs statements without parameters as they are, in the simple protocol: transaction
    /// control and settings (`BEGIN`, `COMMIT`, `PRAGMA ...`).
    async fn run(&mut self, sql: &str) -> DbResult<()>;
}

/// Implements `Conn` for a backend's connection type, with its locking statements.
macro_rules! impl_conn {
    ($conn:ty, $row:ty, $db:ty, lock_boundary: $lock_boundary:expr,
     share: $share:expr, lock_row: $lock_row:expr,
     lock_database: $lock_database:expr $(,)?) => {
        #[async_trait::async_trait]
        impl $crate::sql::Conn for $conn {
            const LOCK_BOUNDARY: &'static str = $lock_boundary;
            const SHARE: &'static str = $share;
            const LOCK_ROW: &'static str = $lock_row;
            const LOCK_DATABASE: Option<&'static str> = $lock_database;

            async fn execute(
                &mut self,
                sql: &str,
                args: &[$crate::sql::Arg<'_>],
            ) -> $crate::sql::DbResult<u64> {
                let done = $crate::sql::bind::<$db>(sql, args)
                    .execute(&mut *self)
                    .await
                    .map_err($crate::DatabaseError::from_sqlx)?;
                Ok(done.rows_affected())
            }

            async fn fetch_optional<T: Send>(
                &mut self,
                sql: &str,
                args: &[$crate::sql::Arg<'_>],
                decode: $crate::sql::Decoder<T>,
            ) -> $crate::sql::DbResult<Option<T>> {
                let row = $crate::sql::bind::<$db>(sql, args)
                    .fetch_optional(&mut *self)
                    .await
                    .map_err($crate::DatabaseError::from_sqlx)?;
                row.as_ref()
                    .map(|row| decode(row))
                    .transpose()
                    .map_err($crate::DatabaseError::from_sqlx)
            }

            async fn fetch_all<T: Send>(
                &mut self,
                sql: &str,
                args: &[$crate::sql::Arg<'_>],
                decode: $crate::sql::Decoder<T>,
            ) -> $crate::sql::DbResult<Vec<T>> {
                let rows = $crate::sql::bind::<$db>(sql, args)
                    .fetch_all(&mut *self)
                    .await
                    .map_err($crate::DatabaseError::from_sqlx)?;
                rows.iter()
                    .map(|row| decode(row))
                    .collect::<sqlx::Result<_>>()
                    .map_err($crate::DatabaseError::from_sqlx)
            }

            async fn run(&mut self, sql: &str) -> $crate::sql::DbResult<()> {
                sqlx::Executor::execute(&mut *self, sql)
                    .await
                    .map(drop)
                    .map_err($crate::DatabaseError::from_sqlx)
            }
        }

        impl $crate::sql::Fields for $row {
            fn text(&self, column: &str) -> sqlx::Result<String> {
                sqlx::Row::try_get(self, column)
            }
            fn opt_text(&self, column: &str) -> sqlx::Result<Option<String>> {
                sqlx::Row::try_get(self, column)
            }
            fn int(&self, column: &str) -> sqlx::Result<i64> {
                sqlx::Row::try_get(self, column)
            }
            fn opt_int(&self, column: &str) -> sqlx::Result<Option<i64>> {
                sqlx::Row::try_get(self, column)
            }
            fn bytes(&self, column: &str) -> sqlx::Result<Vec<u8>> {
                sqlx::Row::try_get(self, column)
            }
            fn opt_bool(&self, column: &str) -> sqlx::Result<Option<bool>> {
                sqlx::Row::try_get(self, column)
            }
            fn flag(&self, column: &str) -> sqlx::Result<bool> {
                sqlx::Row::try_get(self, column)
            }
        }
    };
}
pub(crate) use impl_conn;

/// A query with its parameters bound.
pub(crate) fn bind<'q, DB>(
    sql: &'q str,
    args: &[Arg<'q>],
) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>>
where
    DB: Database,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<i64>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q [u8]: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut query = sqlx::query::<DB>(sql);
    for arg in args {
        query = match *arg {
            Arg::Text(value) => query.bind(value),
            Arg::OptText(value) => query.bind(value),
            Arg::Int(value) => query.bind(value),
            Arg::OptInt(value) => query.bind(value),
            Arg::Bytes(value) => query.bind(value),
            Arg::OptBool(value) => query.bind(value),
        };
    }
    query
}

/// Typed column reads, implemented the same way for both backends' rows (`impl_conn!`).
pub trait Fields {
    fn text(&self, column: &str) -> sqlx::Result<String>;
    fn opt_text(&self, column: &str) -> sqlx::Result<Option<String>>;
    fn int(&self, column: &str) -> sqlx::Result<i64>;
    fn opt_int(&self, column: &str) -> sqlx::Result<Option<i64>>;
    fn bytes(&self, column: &str) -> sqlx::Result<Vec<u8>>;
    fn opt_bool(&self, column: &str) -> sqlx::Result<Option<bool>>;
    fn flag(&self, column: &str) -> sqlx::Result<bool>;
}

/// `Ok($record { .. })` read from `$row` (a `&dyn Fields`): each field from the column of its
/// name (or the one named in parentheses) by the `Fields` read it names, then any field given
/// its value after the braces, e.g.
/// `record! { row, Token { id: text, secret: text("secret_sha256") }, scopes = vec![] }`.
macro_rules! record {
    ($row:expr, $record:ident { $($field:ident: $read:ident $(($column:literal))?),* $(,)? }
     $(, $other:ident = $value:expr)* $(,)?) => {
        Ok($record {
            $($field: $row.$read($crate::sql::record!(@column $field $($column)?))?,)*
            $($other: $value,)*
        })
    };
    (@column $field:ident $column:literal) => {
        $column
    };
    (@column $field:ident) => {
        stringify!($field)
    };
}
pub(crate) use record;

// ---- deadlines ----

/// Runs `work`, a step of a write before its commit, by `deadline`: `Timeout` when it has
/// not finished by then (the work is dropped; its transaction is rolled back by the caller).
pub(crate) async fn by<T>(
    deadline: Option<Instant>,
    work: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match deadline {
        None => work.await,
        Some(deadline) => tokio::time::timeout_at(deadline.into(), work)
            .await
            .unwrap_or(Err(StoreError::Timeout)),
    }
}

/// The time left before `deadline`; `Timeout` when none is.
pub(crate) fn remaining(deadline: Instant) -> Result<Duration> {
    match deadline.checked_duration_since(Instant::now()) {
        Some(left) if !left.is_zero() => Ok(left),
        _ => Err(StoreError::Timeout),
    }
}
