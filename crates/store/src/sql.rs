//! What the SQLite and PostgreSQL backends share at the SQL level: the statements (both
//! dialects take `$1`-style parameters and agree on everything used here), the decoding of
//! rows into records, and `Conn`, the three calls through which the shared operations
//! (`ops`) reach either database.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::postgres::{PgConnection, PgRow, Postgres};
use sqlx::sqlite::{Sqlite, SqliteConnection, SqliteRow};
use sqlx::{Database, Row, Transaction};

use crate::{
    BoundaryRecord, ChangeRecord, ClusterRecord, NamespaceRecord, PolicyHistoryEntry, PolicyRecord,
    PolicyStatusRecord, ResourceRecord, Result, StoreError, TokenRecord,
};

// ---- boundaries ----

pub(crate) const INSERT_BOUNDARY: &str =
    "INSERT INTO boundaries (name, display_name, created_at) VALUES ($1, $2, $3)";
pub(crate) const SELECT_BOUNDARY: &str =
    "SELECT name, display_name, created_at FROM boundaries WHERE name = $1";
pub(crate) const SELECT_BOUNDARIES: &str =
    "SELECT name, display_name, created_at FROM boundaries ORDER BY name";
pub(crate) const BOUNDARY_HAS_RESOURCES: &str =
    "SELECT EXISTS (SELECT 1 FROM resources WHERE boundary = $1) AS found";
pub(crate) const BOUNDARY_HAS_POLICIES: &str =
    "SELECT EXISTS (SELECT 1 FROM policies WHERE boundary = $1) AS found";
pub(crate) const DELETE_BOUNDARY_ATTACHMENTS: &str =
    "DELETE FROM boundary_clusters WHERE boundary = $1";
/// A boundary's tokens go with it: a boundary created later under the same name must not
/// inherit them.
pub(crate) const DELETE_BOUNDARY_TOKENS: &str = "DELETE FROM tokens WHERE boundary = $1";
pub(crate) const DELETE_BOUNDARY: &str = "DELETE FROM boundaries WHERE name = $1";

// ---- policies ----

pub(crate) const SELECT_POLICIES: &str = "SELECT boundary, name, spec_json, metadata_json, \
     etag, created_at, updated_at, updated_by \
     FROM policies WHERE boundary = $1 ORDER BY name";
pub(crate) const SELECT_POLICY: &str = "SELECT boundary, name, spec_json, metadata_json, \
     etag, created_at, updated_at, updated_by \
     FROM policies WHERE boundary = $1 AND name = $2";
pub(crate) const INSERT_POLICY: &str = "INSERT INTO policies \
     (boundary, name, spec_json, metadata_json, etag, created_at, updated_at, updated_by) \
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7)";
pub(crate) const UPDATE_POLICY: &str = "UPDATE policies \
     SET spec_json = $3, metadata_json = $4, etag = $5, updated_at = $6, updated_by = $7 \
     WHERE boundary = $1 AND name = $2";
pub(crate) const DELETE_POLICY: &str = "DELETE FROM policies WHERE boundary = $1 AND name = $2";
pub(crate) const INSERT_POLICY_HISTORY: &str = "INSERT INTO policy_history \
     (boundary, name, actor, at, before_json, after_json) VALUES ($1, $2, $3, $4, $5, $6)";
pub(crate) const SELECT_POLICY_HISTORY: &str = "SELECT seq, actor, at, before_json, after_json \
     FROM policy_history WHERE boundary = $1 AND name = $2 ORDER BY seq";

// ---- resources ----

pub(crate) const SELECT_RESOURCE: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at \
     FROM resources WHERE boundary = $1 AND resource_type = $2 AND name = $3";
/// `$2`: type filter or NULL; `$3`/`$4`: the last item of the previous page or NULL;
/// `$5`: how many rows to read.
pub(crate) const SELECT_RESOURCES_PAGE: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at \
     FROM resources \
     WHERE boundary = $1 \
       AND ($2 IS NULL OR resource_type = $2) \
       AND ($3 IS NULL OR (resource_type, name) > ($3, $4)) \
     ORDER BY resource_type, name LIMIT $5";
pub(crate) const RESOURCE_EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM resources \
     WHERE boundary = $1 AND resource_type = $2 AND name = $3) AS found";
pub(crate) const INSERT_RESOURCE: &str = "INSERT INTO resources \
     (boundary, resource_type, name, body_json, etag, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $6)";
pub(crate) const UPDATE_RESOURCE: &str = "UPDATE resources \
     SET body_json = $4, etag = $5, updated_at = $6 \
     WHERE boundary = $1 AND resource_type = $2 AND name = $3";
pub(crate) const DELETE_RESOURCE: &str =
    "DELETE FROM resources WHERE boundary = $1 AND resource_type = $2 AND name = $3";

// ---- changes ----

pub(crate) const INSERT_CHANGE: &str =
    "INSERT INTO changes (boundary, kind, subject, body_json, at) VALUES ($1, $2, $3, $4, $5)";
/// Changes outlive their boundary (they are the audit trail), so this reads whatever rows
/// carry the name, without looking the boundary up.
pub(crate) const SELECT_CHANGES: &str = "SELECT seq, boundary, kind, subject, body_json, at \
     FROM changes WHERE boundary = $1 ORDER BY seq";

// ---- tokens ----

pub(crate) const INSERT_TOKEN: &str = "INSERT INTO tokens \
     (id, secret_sha256, role, boundary, created_at, expires_at, created_by) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";
pub(crate) const COUNT_TOKENS: &str = "SELECT COUNT(*) AS n FROM tokens";
pub(crate) const SELECT_TOKEN_BY_HASH: &str =
    "SELECT id, secret_sha256, role, boundary, created_at, expires_at, created_by \
     FROM tokens WHERE secret_sha256 = $1";
pub(crate) const SELECT_TOKEN: &str =
    "SELECT id, secret_sha256, role, boundary, created_at, expires_at, created_by \
     FROM tokens WHERE id = $1";
/// `$1`: a boundary, or NULL for every token.
pub(crate) const SELECT_TOKENS: &str =
    "SELECT id, secret_sha256, role, boundary, created_at, expires_at, created_by \
     FROM tokens WHERE ($1 IS NULL OR boundary = $1) ORDER BY created_at, id";
pub(crate) const DELETE_TOKEN: &str = "DELETE FROM tokens WHERE id = $1";

// ---- clusters ----

pub(crate) const SELECT_CLUSTER: &str =
    "SELECT name, kubeconfig_sealed, kubernetes_version, admission_enforced, \
     admission_reason, last_error, created_at, updated_at \
     FROM clusters WHERE name = $1";
pub(crate) const SELECT_CLUSTERS: &str =
    "SELECT name, kubeconfig_sealed, kubernetes_version, admission_enforced, \
     admission_reason, last_error, created_at, updated_at \
     FROM clusters ORDER BY name";
pub(crate) const SELECT_BOUNDARY_CLUSTERS: &str =
    "SELECT name, kubeconfig_sealed, kubernetes_version, admission_enforced, \
     admission_reason, last_error, created_at, updated_at \
     FROM clusters \
     WHERE name IN (SELECT cluster FROM boundary_clusters WHERE boundary = $1) \
     ORDER BY name";
pub(crate) const CLUSTER_EXISTS: &str =
    "SELECT EXISTS (SELECT 1 FROM clusters WHERE name = $1) AS found";
/// Inserts nothing when the name is taken (no error, so a PostgreSQL transaction goes on).
pub(crate) const INSERT_CLUSTER: &str = "INSERT INTO clusters \
     (name, kubeconfig_sealed, created_at, updated_at) VALUES ($1, $2, $3, $3) \
     ON CONFLICT (name) DO NOTHING";
pub(crate) const UPDATE_CLUSTER_SEALED: &str =
    "UPDATE clusters SET kubeconfig_sealed = $2, updated_at = $3 WHERE name = $1";
pub(crate) const UPDATE_CLUSTER_STATUS: &str = "UPDATE clusters \
     SET kubernetes_version = $2, admission_enforced = $3, admission_reason = $4, updated_at = $5 \
     WHERE name = $1";
pub(crate) const DELETE_CLUSTER_ATTACHMENTS: &str =
    "DELETE FROM boundary_clusters WHERE cluster = $1";
pub(crate) const DELETE_CLUSTER: &str = "DELETE FROM clusters WHERE name = $1";
pub(crate) const ATTACH_CLUSTER: &str = "INSERT INTO boundary_clusters \
     (boundary, cluster, attached_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";
pub(crate) const DETACH_CLUSTER: &str =
    "DELETE FROM boundary_clusters WHERE boundary = $1 AND cluster = $2";

// ---- reconciler ----

pub(crate) const INSERT_SETTING: &str =
    "INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING";
pub(crate) const SELECT_SETTING: &str = "SELECT value AS name FROM settings WHERE key = $1";
pub(crate) const UPDATE_CLUSTER_ERROR: &str = "UPDATE clusters SET last_error = $2 WHERE name = $1";
pub(crate) const CLUSTER_ATTACHED: &str = "SELECT EXISTS (SELECT 1 FROM boundary_clusters \
     WHERE boundary = $1 AND cluster = $2) AS found";
pub(crate) const SELECT_NAMESPACE: &str = "SELECT cluster, name, boundary, created_at \
     FROM namespaces WHERE cluster = $1 AND name = $2";
pub(crate) const INSERT_NAMESPACE: &str = "INSERT INTO namespaces \
     (cluster, name, boundary, created_at) VALUES ($1, $2, $3, $4)";
pub(crate) const SELECT_BOUNDARY_NAMESPACES: &str = "SELECT cluster, name, boundary, created_at \
     FROM namespaces WHERE boundary = $1 ORDER BY cluster, name";
pub(crate) const SELECT_CLUSTER_NAMESPACES: &str = "SELECT cluster, name, boundary, created_at \
     FROM namespaces WHERE cluster = $1 ORDER BY boundary, name";
pub(crate) const DELETE_NAMESPACE: &str =
    "DELETE FROM namespaces WHERE boundary = $1 AND cluster = $2 AND name = $3";
pub(crate) const BOUNDARY_HAS_NAMESPACES: &str =
    "SELECT EXISTS (SELECT 1 FROM namespaces WHERE boundary = $1) AS found";
pub(crate) const BOUNDARY_HAS_NAMESPACES_IN: &str =
    "SELECT EXISTS (SELECT 1 FROM namespaces WHERE boundary = $1 AND cluster = $2) AS found";
pub(crate) const DELETE_CLUSTER_NAMESPACES: &str = "DELETE FROM namespaces WHERE cluster = $1";
pub(crate) const DELETE_STATUSES_OF: &str =
    "DELETE FROM policy_status WHERE cluster = $1 AND boundary = $2";
pub(crate) const DELETE_CLUSTER_STATUSES: &str = "DELETE FROM policy_status WHERE cluster = $1";
pub(crate) const DELETE_BOUNDARY_STATUSES: &str = "DELETE FROM policy_status WHERE boundary = $1";
pub(crate) const INSERT_STATUS: &str = "INSERT INTO policy_status \
     (boundary, policy, cluster, policy_etag, status, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";
pub(crate) const SELECT_BOUNDARY_STATUSES: &str =
    "SELECT boundary, policy, cluster, policy_etag, status, updated_at \
     FROM policy_status WHERE boundary = $1 ORDER BY policy, cluster";

pub(crate) const PING: &str = "SELECT 1";

// ---- change kinds ----

pub(crate) const POLICY_PUT: &str = "policy.put";
pub(crate) const POLICY_DELETE: &str = "policy.delete";
pub(crate) const RESOURCE_CREATE: &str = "resource.create";
pub(crate) const RESOURCE_UPDATE: &str = "resource.update";
pub(crate) const RESOURCE_DELETE: &str = "resource.delete";

// ---- the connection interface of the shared operations ----

/// A bind parameter.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    Text(&'a str),
    OptText(Option<&'a str>),
    Int(i64),
    Bytes(&'a [u8]),
    OptBool(Option<bool>),
}

/// Turns one row into a record.
pub(crate) type Decoder<T> = fn(&dyn Fields) -> sqlx::Result<T>;

/// A connection (or an open transaction's connection) of either backend.
#[async_trait]
pub(crate) trait Conn: Send {
    /// Reads a boundary's name inside a write transaction and, on PostgreSQL, locks its row
    /// until the transaction ends. (SQLite's `BEGIN IMMEDIATE` already holds the database's
    /// write lock.)
    const LOCK_BOUNDARY: &'static str;

    /// Runs a statement; the number of rows it changed.
    async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> sqlx::Result<u64>;

    async fn fetch_optional<T: Send>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        decode: Decoder<T>,
    ) -> sqlx::Result<Option<T>>;

    async fn fetch_all<T: Send>(
        &mut self,
        sql: &str,
        args: &[Arg<'_>],
        decode: Decoder<T>,
    ) -> sqlx::Result<Vec<T>>;
}

macro_rules! impl_conn {
    ($conn:ty, $db:ty, $lock_boundary:expr) => {
        #[async_trait]
        impl Conn for $conn {
            const LOCK_BOUNDARY: &'static str = $lock_boundary;

            async fn execute(&mut self, sql: &str, args: &[Arg<'_>]) -> sqlx::Result<u64> {
                let done = bind::<$db>(sql, args).execute(&mut *self).await?;
                Ok(done.rows_affected())
            }

            async fn fetch_optional<T: Send>(
                &mut self,
                sql: &str,
                args: &[Arg<'_>],
                decode: Decoder<T>,
            ) -> sqlx::Result<Option<T>> {
                let row = bind::<$db>(sql, args).fetch_optional(&mut *self).await?;
                row.as_ref().map(|row| decode(row)).transpose()
            }

            async fn fetch_all<T: Send>(
                &mut self,
                sql: &str,
                args: &[Arg<'_>],
                decode: Decoder<T>,
            ) -> sqlx::Result<Vec<T>> {
                let rows = bind::<$db>(sql, args).fetch_all(&mut *self).await?;
                rows.iter().map(|row| decode(row)).collect()
            }
        }
    };
}

impl_conn!(
    SqliteConnection,
    Sqlite,
    "SELECT name FROM boundaries WHERE name = $1"
);
impl_conn!(
    PgConnection,
    Postgres,
    "SELECT name FROM boundaries WHERE name = $1 FOR UPDATE"
);

/// A query with its parameters bound.
fn bind<'q, DB>(sql: &'q str, args: &[Arg<'q>]) -> sqlx::query::Query<'q, DB, DB::Arguments<'q>>
where
    DB: Database,
    &'q str: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<&'q str>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    &'q [u8]: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
    Option<bool>: sqlx::Encode<'q, DB> + sqlx::Type<DB>,
{
    let mut query = sqlx::query::<DB>(sql);
    for arg in args {
        query = match *arg {
            Arg::Text(value) => query.bind(value),
            Arg::OptText(value) => query.bind(value),
            Arg::Int(value) => query.bind(value),
            Arg::Bytes(value) => query.bind(value),
            Arg::OptBool(value) => query.bind(value),
        };
    }
    query
}

// ---- decoding ----

/// Typed column reads, implemented the same way for both backends' rows.
pub(crate) trait Fields {
    fn text(&self, column: &str) -> sqlx::Result<String>;
    fn opt_text(&self, column: &str) -> sqlx::Result<Option<String>>;
    fn int(&self, column: &str) -> sqlx::Result<i64>;
    fn bytes(&self, column: &str) -> sqlx::Result<Vec<u8>>;
    fn opt_bool(&self, column: &str) -> sqlx::Result<Option<bool>>;
    fn flag(&self, column: &str) -> sqlx::Result<bool>;
}

macro_rules! impl_fields {
    ($row:ty) => {
        impl Fields for $row {
            fn text(&self, column: &str) -> sqlx::Result<String> {
                self.try_get(column)
            }
            fn opt_text(&self, column: &str) -> sqlx::Result<Option<String>> {
                self.try_get(column)
            }
            fn int(&self, column: &str) -> sqlx::Result<i64> {
                self.try_get(column)
            }
            fn bytes(&self, column: &str) -> sqlx::Result<Vec<u8>> {
                self.try_get(column)
            }
            fn opt_bool(&self, column: &str) -> sqlx::Result<Option<bool>> {
                self.try_get(column)
            }
            fn flag(&self, column: &str) -> sqlx::Result<bool> {
                self.try_get(column)
            }
        }
    };
}
impl_fields!(SqliteRow);
impl_fields!(PgRow);

pub(crate) fn boundary(row: &dyn Fields) -> sqlx::Result<BoundaryRecord> {
    Ok(BoundaryRecord {
        name: row.text("name")?,
        display_name: row.opt_text("display_name")?,
        created_at: row.text("created_at")?,
    })
}

pub(crate) fn policy(row: &dyn Fields) -> sqlx::Result<PolicyRecord> {
    Ok(PolicyRecord {
        boundary: row.text("boundary")?,
        name: row.text("name")?,
        spec_json: row.text("spec_json")?,
        metadata_json: row.text("metadata_json")?,
        etag: row.text("etag")?,
        created_at: row.text("created_at")?,
        updated_at: row.text("updated_at")?,
        updated_by: row.text("updated_by")?,
    })
}

pub(crate) fn history_entry(row: &dyn Fields) -> sqlx::Result<PolicyHistoryEntry> {
    Ok(PolicyHistoryEntry {
        seq: row.int("seq")?,
        actor: row.text("actor")?,
        at: row.text("at")?,
        before_json: row.opt_text("before_json")?,
        after_json: row.opt_text("after_json")?,
    })
}

pub(crate) fn resource(row: &dyn Fields) -> sqlx::Result<ResourceRecord> {
    Ok(ResourceRecord {
        boundary: row.text("boundary")?,
        resource_type: row.text("resource_type")?,
        name: row.text("name")?,
        body_json: row.text("body_json")?,
        etag: row.text("etag")?,
        created_at: row.text("created_at")?,
        updated_at: row.text("updated_at")?,
    })
}

pub(crate) fn change(row: &dyn Fields) -> sqlx::Result<ChangeRecord> {
    Ok(ChangeRecord {
        seq: row.int("seq")?,
        boundary: row.text("boundary")?,
        kind: row.text("kind")?,
        subject: row.text("subject")?,
        body_json: row.opt_text("body_json")?,
        at: row.text("at")?,
    })
}

pub(crate) fn token(row: &dyn Fields) -> sqlx::Result<TokenRecord> {
    Ok(TokenRecord {
        id: row.text("id")?,
        secret_sha256: row.text("secret_sha256")?,
        role: row.text("role")?,
        boundary: row.opt_text("boundary")?,
        created_at: row.text("created_at")?,
        expires_at: row.opt_text("expires_at")?,
        created_by: row.text("created_by")?,
    })
}

pub(crate) fn cluster(row: &dyn Fields) -> sqlx::Result<ClusterRecord> {
    Ok(ClusterRecord {
        name: row.text("name")?,
        kubeconfig_sealed: row.bytes("kubeconfig_sealed")?,
        kubernetes_version: row.opt_text("kubernetes_version")?,
        admission_enforced: row.opt_bool("admission_enforced")?,
        admission_reason: row.opt_text("admission_reason")?,
        last_error: row.opt_text("last_error")?,
        created_at: row.text("created_at")?,
        updated_at: row.text("updated_at")?,
    })
}

pub(crate) fn namespace(row: &dyn Fields) -> sqlx::Result<NamespaceRecord> {
    Ok(NamespaceRecord {
        cluster: row.text("cluster")?,
        name: row.text("name")?,
        boundary: row.text("boundary")?,
        created_at: row.text("created_at")?,
    })
}

pub(crate) fn policy_status(row: &dyn Fields) -> sqlx::Result<PolicyStatusRecord> {
    Ok(PolicyStatusRecord {
        boundary: row.text("boundary")?,
        policy: row.text("policy")?,
        cluster: row.text("cluster")?,
        policy_etag: row.text("policy_etag")?,
        status: row.text("status")?,
        updated_at: row.text("updated_at")?,
    })
}

pub(crate) fn name(row: &dyn Fields) -> sqlx::Result<String> {
    row.text("name")
}

/// The `found` column of the `... EXISTS (...) AS found` statements.
pub(crate) fn found(row: &dyn Fields) -> sqlx::Result<bool> {
    row.flag("found")
}

pub(crate) fn count(row: &dyn Fields) -> sqlx::Result<i64> {
    row.int("n")
}

// ---- errors and transaction endings ----

/// `Conflict` for a unique violation (a taken name), `NotFound` for a foreign-key violation
/// (a referenced object is missing), `Database` otherwise.
pub(crate) fn on_insert(error: sqlx::Error, what: &str) -> StoreError {
    if let sqlx::Error::Database(db) = &error {
        if db.is_unique_violation() {
            return StoreError::Conflict(format!("{what} already exists"));
        }
        if db.is_foreign_key_violation() {
            return StoreError::NotFound;
        }
    }
    StoreError::Database(error)
}

/// Ends a transaction: commits on success, rolls back on failure. Should the rollback fail,
/// the transaction's drop queues another, and the pool's `after_release` check (see the
/// backends' `connect`) closes a connection that comes back still inside a transaction
/// instead of reusing it.
pub(crate) async fn finish<DB: Database, T>(
    tx: Transaction<'_, DB>,
    result: Result<T>,
) -> Result<T> {
    match result {
        Ok(value) => {
            tx.commit().await?;
            Ok(value)
        }
        Err(error) => {
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(error = %rollback, "rollback failed");
            }
            Err(error)
        }
    }
}

/// Runs `work`, everything a guarded write does before its commit, by `deadline`: `Timeout`
/// when it has not finished by then (the work is dropped; its transaction, if any, is rolled
/// back by the caller's `finish_by`).
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

/// `finish` for a guarded write: the deadline is checked once more before the commit, and a
/// passed deadline rolls back with `Timeout`. The commit itself runs without a time limit, so
/// its outcome, not a timer, decides the answer.
pub(crate) async fn finish_by<DB: Database, T>(
    tx: Transaction<'_, DB>,
    result: Result<T>,
    deadline: Option<Instant>,
) -> Result<T> {
    let result = match (result, deadline) {
        (Ok(value), Some(deadline)) => remaining(deadline).map(|_| value),
        (result, _) => result,
    };
    finish(tx, result).await
}
