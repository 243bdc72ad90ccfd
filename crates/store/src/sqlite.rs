//! The SQLite backend, the default: one database file in WAL mode with `synchronous=FULL`,
//! foreign keys on and a 5 s busy timeout. Every write runs in a `BEGIN IMMEDIATE`
//! transaction, which takes the database's write lock before its first read, so a guarded
//! write's checks and its write cannot interleave with a policy change.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool,
    SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Connection, Transaction};
use tokio::sync::{Mutex, MutexGuard};

use crate::sql::{by, finish, finish_by, remaining};
use crate::{
    ops, BoundaryRecord, ChangeRecord, ClusterRecord, Editor, Guard, Lease, NamespaceRecord,
    NewResource, Page, PolicyHistoryEntry, PolicyRecord, PolicyStatusRecord, PolicyWrite,
    ResourceKey, ResourceQuery, ResourceRecord, Result, Store, StoreError, TokenRecord,
    WriteAction, INSTALLATION_KEY,
};

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// This process's writers take turns here (first come, first served) before
    /// `BEGIN IMMEDIATE`, so they queue fairly instead of polling SQLite's lock; the busy
    /// timeout then only covers other processes using the same file.
    writer: Mutex<()>,
    /// Bumped after each committed change the reconciler acts on (`Store::subscribe`).
    changes: tokio::sync::watch::Sender<u64>,
}

/// An open `BEGIN IMMEDIATE` transaction and this process's writer turn, held until it ends.
type Write<'a> = (MutexGuard<'a, ()>, Transaction<'static, Sqlite>);

impl SqliteStore {
    /// Opens `sqlite://PATH`, `sqlite:PATH` or a plain path, creating the file and its
    /// directory when absent, and applies the migrations.
    ///
    /// Processes starting together on a new file take turns: the file is created (mode 0600,
    /// which SQLite gives its `-wal` and `-shm` files too) and migrated under an exclusive
    /// lock on `<file>.lock`, so a second process waits and then finds the migrations applied.
    pub async fn connect(url: &str) -> Result<Self> {
        if crate::backend_of(url)? != crate::Backend::Sqlite {
            return Err(StoreError::UnsupportedUrl("postgres".into()));
        }
        let options = match url.get(..7) {
            Some(scheme) if scheme.eq_ignore_ascii_case("sqlite:") => {
                SqliteConnectOptions::from_str(&format!("sqlite:{}", &url[7..]))?
            }
            _ => SqliteConnectOptions::new().filename(url),
        };
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        create_parent_dir(&options).await?;
        let file = database_file(&options);
        let migration_lock = match &file {
            Some(path) => Some(lock_exclusively(lock_path(path)).await?),
            None => None,
        };
        if let Some(path) = &file {
            create_private(path).map_err(io_error)?;
        }

        let pool = SqlitePoolOptions::new()
            // Never hand out a connection still inside a transaction (a rollback that failed,
            // or a future dropped mid-transaction): close it instead.
            .after_release(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        // Closing the lock file releases the lock.
        drop(migration_lock);
        Ok(Self {
            pool,
            writer: Mutex::new(()),
            changes: tokio::sync::watch::Sender::new(0),
        })
    }

    /// Passes `result` through, waking the reconciler when it is a success.
    fn woken<T>(&self, result: Result<T>) -> Result<T> {
        if result.is_ok() {
            self.changes.send_modify(|n| *n = n.wrapping_add(1));
        }
        result
    }

    async fn write(&self) -> Result<Write<'_>> {
        let turn = self.writer.lock().await;
        let tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        Ok((turn, tx))
    }
}

/// `BEGIN IMMEDIATE` on `conn`, waiting for another process's write lock only until
/// `deadline`: SQLite's busy handler is given the time left (and the usual 5 s again once the
/// transaction has begun), so a deadline never leaves a connection blocked in a busy wait
/// behind a cancelled request. When `BEGIN` fails, the caller hands the error to
/// `failed_begin`, which restores the busy timeout.
async fn begin_immediate_by(
    conn: &mut SqliteConnection,
    deadline: Instant,
) -> Result<Transaction<'_, Sqlite>, sqlx::Error> {
    let left = remaining(deadline).unwrap_or(Duration::ZERO);
    set_busy_timeout(conn, left).await?;
    let mut tx = conn.begin_with("BEGIN IMMEDIATE").await?;
    match set_busy_timeout(&mut tx, BUSY_TIMEOUT).await {
        Ok(()) => Ok(tx),
        Err(error) => {
            if let Err(rollback) = tx.rollback().await {
                tracing::warn!(error = %rollback, "rollback failed");
            }
            Err(error)
        }
    }
}

/// After a failed `begin_immediate_by`: the connection goes back to the pool, so it must wait
/// the usual time again; a lock still held at the deadline is `Timeout`.
async fn failed_begin(conn: &mut SqliteConnection, error: Option<sqlx::Error>) -> StoreError {
    if let Err(reset) = set_busy_timeout(conn, BUSY_TIMEOUT).await {
        tracing::warn!(error = %reset, "cannot restore the busy timeout");
    }
    match error {
        Some(error) if !is_busy(&error) => StoreError::Database(error),
        _ => StoreError::Timeout,
    }
}

/// A result as two options, so that the borrow an `Ok` holds ends with the `None` on the
/// error path (a partly moved `Result` would keep it until the end of the scope).
fn split<T, E>(result: std::result::Result<T, E>) -> (Option<T>, Option<E>) {
    match result {
        Ok(value) => (Some(value), None),
        Err(error) => (None, Some(error)),
    }
}

async fn set_busy_timeout(conn: &mut SqliteConnection, wait: Duration) -> Result<(), sqlx::Error> {
    let statement = format!("PRAGMA busy_timeout = {}", wait.as_millis().max(1));
    sqlx::query(&statement)
        .persistent(false)
        .execute(conn)
        .await
        .map(drop)
}

/// `SQLITE_BUSY` or one of its extended codes: another connection holds the lock.
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| code & 0xff == 5)
}

fn is_in_memory(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| p == ":memory:" || p.starts_with("file:"))
}

async fn create_parent_dir(options: &SqliteConnectOptions) -> Result<()> {
    let path = options.get_filename();
    match path.parent() {
        Some(parent) if !is_in_memory(path) && !parent.as_os_str().is_empty() => {
            tokio::fs::create_dir_all(parent).await.map_err(io_error)
        }
        _ => Ok(()),
    }
}

fn io_error(error: std::io::Error) -> StoreError {
    StoreError::Database(sqlx::Error::Io(error))
}

/// The database file on disk; `None` for an in-memory database.
fn database_file(options: &SqliteConnectOptions) -> Option<PathBuf> {
    let path = options.get_filename();
    (!is_in_memory(path)).then(|| path.to_path_buf())
}

/// `<file>.lock`, next to the database file.
fn lock_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    file.with_file_name(name)
}

/// Opens (creating it, mode 0600) and exclusively locks `path`, waiting on a blocking thread
/// while another process holds it. The lock lasts until the returned file is closed.
async fn lock_exclusively(path: PathBuf) -> Result<std::fs::File> {
    let locked = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)?;
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await
    .map_err(|e| io_error(std::io::Error::other(e)))?;
    locked.map_err(io_error)
}

/// Creates the database file with mode 0600 when it does not exist yet (SQLite then creates
/// its `-wal` and `-shm` files with the same mode); an existing file is left as it is.
fn create_private(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> Result<()> {
        ops::ping(&mut *self.pool.acquire().await?).await
    }

    // ---- boundaries ----

    async fn create_boundary(
        &self,
        name: &str,
        display_name: Option<&str>,
    ) -> Result<BoundaryRecord> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::create_boundary(&mut *tx, name, display_name).await;
        finish(tx, result).await
    }

    async fn get_boundary(&self, name: &str) -> Result<BoundaryRecord> {
        ops::get_boundary(&mut *self.pool.acquire().await?, name).await
    }

    async fn list_boundaries(&self) -> Result<Vec<BoundaryRecord>> {
        ops::list_boundaries(&mut *self.pool.acquire().await?).await
    }

    async fn delete_boundary(&self, name: &str) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::delete_boundary(&mut *tx, name).await;
        self.woken(finish(tx, result).await)
    }

    // ---- policies ----

    async fn list_policies(&self, boundary: &str) -> Result<Vec<PolicyRecord>> {
        ops::list_policies(&mut *self.pool.acquire().await?, boundary).await
    }

    async fn get_policy(&self, boundary: &str, name: &str) -> Result<PolicyRecord> {
        ops::get_policy(&mut *self.pool.acquire().await?, boundary, name).await
    }

    async fn put_policy(
        &self,
        write: PolicyWrite,
        actor: &str,
    ) -> Result<(PolicyRecord, WriteAction)> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::put_policy(&mut *tx, &write, actor).await;
        self.woken(finish(tx, result).await)
    }

    async fn apply_policies(
        &self,
        writes: Vec<PolicyWrite>,
        actor: &str,
    ) -> Result<Vec<(PolicyRecord, WriteAction)>> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::apply_policies(&mut *tx, &writes, actor).await;
        self.woken(finish(tx, result).await)
    }

    async fn delete_policy(
        &self,
        boundary: &str,
        name: &str,
        if_match: Option<&str>,
        actor: &str,
    ) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::delete_policy(&mut *tx, boundary, name, if_match, actor).await;
        self.woken(finish(tx, result).await)
    }

    async fn policy_history(&self, boundary: &str, name: &str) -> Result<Vec<PolicyHistoryEntry>> {
        ops::policy_history(&mut *self.pool.acquire().await?, boundary, name).await
    }

    // ---- resources ----

    async fn create_resource(
        &self,
        resource: NewResource,
        guard: Option<Guard>,
        deadline: Option<Instant>,
    ) -> Result<(ResourceRecord, Vec<String>)> {
        let Some(deadline) = deadline else {
            let (_turn, mut tx) = self.write().await?;
            let result = ops::create_resource(&mut *tx, resource, guard).await;
            return finish(tx, result).await;
        };
        let _turn = by(Some(deadline), async { Ok(self.writer.lock().await) }).await?;
        let mut conn = by(Some(deadline), async { Ok(self.pool.acquire().await?) }).await?;
        let (begun, failed) = split(begin_immediate_by(&mut conn, deadline).await);
        let mut tx = match begun {
            Some(tx) => tx,
            None => {
                drop(begun);
                return Err(failed_begin(&mut conn, failed).await);
            }
        };
        let result = by(
            Some(deadline),
            ops::create_resource(&mut *tx, resource, guard),
        )
        .await;
        finish_by(tx, result, Some(deadline)).await
    }

    async fn get_resource(&self, key: &ResourceKey) -> Result<ResourceRecord> {
        ops::get_resource(&mut *self.pool.acquire().await?, key).await
    }

    async fn list_resources(
        &self,
        boundary: &str,
        query: &ResourceQuery,
    ) -> Result<Page<ResourceRecord>> {
        ops::list_resources(&mut *self.pool.acquire().await?, boundary, query).await
    }

    async fn update_resource(
        &self,
        key: &ResourceKey,
        if_match: Option<&str>,
        editor: Editor,
        deadline: Option<Instant>,
    ) -> Result<(ResourceRecord, Vec<String>)> {
        let Some(deadline) = deadline else {
            let (_turn, mut tx) = self.write().await?;
            let result = ops::update_resource(&mut *tx, key, if_match, editor).await;
            return finish(tx, result).await;
        };
        let _turn = by(Some(deadline), async { Ok(self.writer.lock().await) }).await?;
        let mut conn = by(Some(deadline), async { Ok(self.pool.acquire().await?) }).await?;
        let (begun, failed) = split(begin_immediate_by(&mut conn, deadline).await);
        let mut tx = match begun {
            Some(tx) => tx,
            None => {
                drop(begun);
                return Err(failed_begin(&mut conn, failed).await);
            }
        };
        let result = by(
            Some(deadline),
            ops::update_resource(&mut *tx, key, if_match, editor),
        )
        .await;
        finish_by(tx, result, Some(deadline)).await
    }

    async fn delete_resource(&self, key: &ResourceKey, if_match: Option<&str>) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::delete_resource(&mut *tx, key, if_match).await;
        finish(tx, result).await
    }

    // ---- changes ----

    async fn list_changes(&self, boundary: &str) -> Result<Vec<ChangeRecord>> {
        ops::list_changes(&mut *self.pool.acquire().await?, boundary).await
    }

    // ---- tokens ----

    async fn create_token(&self, token: TokenRecord) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::create_token(&mut *tx, &token).await;
        finish(tx, result).await
    }

    /// `BEGIN IMMEDIATE` is the database-wide lock: it excludes every other writer, in this
    /// process or another.
    async fn bootstrap_admin_token(&self, token: TokenRecord) -> Result<bool> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::bootstrap_admin_token(&mut *tx, &token).await;
        finish(tx, result).await
    }

    async fn token_by_secret_hash(&self, secret_sha256: &str) -> Result<TokenRecord> {
        ops::token_by_secret_hash(&mut *self.pool.acquire().await?, secret_sha256).await
    }

    async fn list_tokens(&self, boundary: Option<&str>) -> Result<Vec<TokenRecord>> {
        ops::list_tokens(&mut *self.pool.acquire().await?, boundary).await
    }

    async fn get_token(&self, id: &str) -> Result<TokenRecord> {
        ops::get_token(&mut *self.pool.acquire().await?, id).await
    }

    async fn delete_token(&self, id: &str) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::delete_token(&mut *tx, id).await;
        finish(tx, result).await
    }

    // ---- clusters ----

    async fn put_cluster(&self, name: &str, kubeconfig_sealed: &[u8]) -> Result<bool> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::put_cluster(&mut *tx, name, kubeconfig_sealed).await;
        self.woken(finish(tx, result).await)
    }

    async fn get_cluster(&self, name: &str) -> Result<ClusterRecord> {
        ops::get_cluster(&mut *self.pool.acquire().await?, name).await
    }

    async fn list_clusters(&self) -> Result<Vec<ClusterRecord>> {
        ops::list_clusters(&mut *self.pool.acquire().await?).await
    }

    async fn delete_cluster(&self, name: &str) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::delete_cluster(&mut *tx, name).await;
        self.woken(finish(tx, result).await)
    }

    async fn set_cluster_status(
        &self,
        name: &str,
        kubernetes_version: Option<&str>,
        admission_enforced: Option<bool>,
        admission_reason: Option<&str>,
    ) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::set_cluster_status(
            &mut *tx,
            name,
            kubernetes_version,
            admission_enforced,
            admission_reason,
        )
        .await;
        finish(tx, result).await
    }

    async fn attach_cluster(&self, boundary: &str, cluster: &str) -> Result<bool> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::attach_cluster(&mut *tx, boundary, cluster).await;
        self.woken(finish(tx, result).await)
    }

    async fn detach_cluster(&self, boundary: &str, cluster: &str) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::detach_cluster(&mut *tx, boundary, cluster).await;
        self.woken(finish(tx, result).await)
    }

    async fn boundary_clusters(&self, boundary: &str) -> Result<Vec<ClusterRecord>> {
        ops::boundary_clusters(&mut *self.pool.acquire().await?, boundary).await
    }

    // ---- the reconciler's state ----

    async fn installation_id(&self, candidate: &str) -> Result<String> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::setting_or_insert(&mut *tx, INSTALLATION_KEY, candidate).await;
        finish(tx, result).await
    }

    async fn set_cluster_error(&self, name: &str, error: Option<&str>) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::set_cluster_error(&mut *tx, name, error).await;
        finish(tx, result).await
    }

    async fn put_namespace(&self, boundary: &str, cluster: &str, name: &str) -> Result<bool> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::put_namespace(&mut *tx, boundary, cluster, name).await;
        self.woken(finish(tx, result).await)
    }

    async fn get_namespace(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
    ) -> Result<NamespaceRecord> {
        ops::get_namespace(&mut *self.pool.acquire().await?, boundary, cluster, name).await
    }

    async fn list_namespaces(&self, boundary: &str) -> Result<Vec<NamespaceRecord>> {
        ops::list_namespaces(&mut *self.pool.acquire().await?, boundary).await
    }

    async fn cluster_namespaces(&self, cluster: &str) -> Result<Vec<NamespaceRecord>> {
        ops::cluster_namespaces(&mut *self.pool.acquire().await?, cluster).await
    }

    async fn delete_namespace(&self, boundary: &str, cluster: &str, name: &str) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::delete_namespace(&mut *tx, boundary, cluster, name).await;
        self.woken(finish(tx, result).await)
    }

    async fn replace_policy_statuses(
        &self,
        cluster: &str,
        boundary: &str,
        statuses: Vec<PolicyStatusRecord>,
    ) -> Result<()> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::replace_policy_statuses(&mut *tx, cluster, boundary, &statuses).await;
        finish(tx, result).await
    }

    async fn policy_statuses(&self, boundary: &str) -> Result<Vec<PolicyStatusRecord>> {
        ops::policy_statuses(&mut *self.pool.acquire().await?, boundary).await
    }

    async fn subscribe(&self) -> Result<tokio::sync::watch::Receiver<u64>> {
        Ok(self.changes.subscribe())
    }

    /// One process owns a SQLite file: its reconciler always leads.
    async fn try_lease(&self, _installation: &str) -> Result<Option<Lease>> {
        Ok(Some(Lease::local()))
    }
}
