//! The SQLite backend, the default: one database file in WAL mode with `synchronous=FULL`,
//! foreign keys on and a 5 s busy timeout. Every write runs in a `BEGIN IMMEDIATE`
//! transaction, which takes the database's write lock before its first read, so a guarded
//! write's checks and its write cannot interleave with a policy change.

use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{Connection, Transaction};
use tokio::sync::{Mutex, MutexGuard};

use crate::sql::finish;
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
    pub async fn connect(url: &str) -> Result<Self> {
        let options = if url.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(url)?
        } else {
            SqliteConnectOptions::new().filename(url)
        };
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        create_parent_dir(&options).await?;

        let pool = SqlitePoolOptions::new()
            // Never hand out a connection still inside a transaction (a rollback that failed,
            // or a future dropped mid-transaction): close it instead.
            .after_release(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
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

async fn create_parent_dir(options: &SqliteConnectOptions) -> Result<()> {
    let path = options.get_filename();
    let in_memory = path
        .to_str()
        .is_some_and(|p| p == ":memory:" || p.starts_with("file:"));
    match path.parent() {
        Some(parent) if !in_memory && !parent.as_os_str().is_empty() => {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|e| StoreError::Database(sqlx::Error::Io(e)))
        }
        _ => Ok(()),
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
    ) -> Result<(ResourceRecord, Vec<String>)> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::create_resource(&mut *tx, resource, guard).await;
        finish(tx, result).await
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
    ) -> Result<(ResourceRecord, Vec<String>)> {
        let (_turn, mut tx) = self.write().await?;
        let result = ops::update_resource(&mut *tx, key, if_match, editor).await;
        finish(tx, result).await
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
