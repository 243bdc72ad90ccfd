//! The store's operations, written once for both backends and grouped by what they store:
//! each module holds an aggregate's statements, the decoding of its rows and its operations.
//! An operation runs on the connection it is handed: a write transaction the store opened
//! (`SqlStore::begin`), which it commits or rolls back, or a pooled connection for a read.
//!
//! | module | stores |
//! | --- | --- |
//! | `boundaries` | boundaries; `lock` serialises a boundary's writes |
//! | `documents` | what versioned, historied documents share, over `DocumentKind` |
//! | `policies` | policies and their history (`policies::put` saves one) |
//! | `exceptions` | exceptions, their approval and their history |
//! | `resources` | resources, guarded creates and plan moves, pages |
//! | `changes` | the committed-change log every boundary write appends to |
//! | `tokens` | API tokens |
//! | `clusters` | clusters, their status and their attachment to boundaries |
//! | `namespaces` | namespaces labelled for a boundary |
//! | `statuses` | policies' install status per cluster |
//! | `audits` | the audit's reports per policy and cluster |
//! | `settings` | installation-wide settings (the installation id, the encryption key's check value) |
//! | `sessions` | portal sessions that ended before they expired |
//! | `snapshot` | everything a reconcile pass reads, at one moment |
//! | `uploads` | code uploaded for builds, in chunks; each boundary's use; the sweeper's deletes |

pub(crate) mod audits;
pub(crate) mod boundaries;
pub(crate) mod changes;
pub(crate) mod clusters;
pub(crate) mod documents;
pub(crate) mod exceptions;
pub(crate) mod namespaces;
pub(crate) mod policies;
pub(crate) mod resources;
pub(crate) mod sessions;
pub(crate) mod settings;
pub(crate) mod snapshot;
pub(crate) mod statuses;
pub(crate) mod tokens;
pub(crate) mod uploads;

use crate::sql::{Arg, Conn, DbResult, Decoder, Fields};
use crate::{Result, StoreError};

pub(crate) async fn ping<C: Conn>(c: &mut C) -> Result<()> {
    c.execute("SELECT 1", &[]).await?;
    Ok(())
}

/// The row `statement` reads, decoded; `NotFound` when there is none.
async fn find<C: Conn, T: Send>(
    c: &mut C,
    statement: &str,
    args: &[Arg<'_>],
    decode: Decoder<T>,
) -> Result<T> {
    let row = c.fetch_optional(statement, args, decode).await?;
    row.ok_or(StoreError::NotFound)
}

/// Every row `statement` reads, decoded.
async fn find_all<C: Conn, T: Send>(
    c: &mut C,
    statement: &str,
    args: &[Arg<'_>],
    decode: Decoder<T>,
) -> Result<Vec<T>> {
    Ok(c.fetch_all(statement, args, decode).await?)
}

/// Whether a `SELECT EXISTS (...) AS found` statement found a row.
async fn exists<C: Conn>(c: &mut C, statement: &str, args: &[Arg<'_>]) -> DbResult<bool> {
    let found = c.fetch_optional(statement, args, found).await?;
    Ok(found.unwrap_or(false))
}

fn found(row: &dyn Fields) -> sqlx::Result<bool> {
    row.flag("found")
}

/// A `name` column.
fn name(row: &dyn Fields) -> sqlx::Result<String> {
    row.text("name")
}

/// `NotFound` when a delete or an update touched no row.
fn touched(rows: u64) -> Result<()> {
    if rows == 0 {
        Err(StoreError::NotFound)
    } else {
        Ok(())
    }
}

/// `PreconditionFailed` unless `if_match` is absent or names `etag`.
fn check_if_match(if_match: Option<&str>, etag: &str) -> Result<()> {
    match if_match {
        Some(value) if !crate::if_match_matches(value, etag) => Err(StoreError::PreconditionFailed),
        _ => Ok(()),
    }
}

/// An insert's failure: `Conflict` for a unique violation (a taken name), `NotFound` for a
/// foreign-key violation (a referenced object is missing), `Database` otherwise.
fn on_insert(error: crate::DatabaseError, what: &str) -> StoreError {
    use crate::DatabaseErrorKind::{ForeignKeyViolation, UniqueViolation};
    match error.kind() {
        UniqueViolation => StoreError::Conflict(format!("{what} already exists")),
        ForeignKeyViolation => StoreError::NotFound,
        _ => StoreError::Database(error),
    }
}
