//! The PostgreSQL backend, for several replicas sharing one database. Every write is one
//! transaction (READ COMMITTED); guarded writes, policy writes and the other writes of a
//! boundary's contents first lock the boundary's row (`SELECT ... FOR UPDATE`), so a check
//! and its write cannot interleave with a policy change of that boundary, and a boundary's
//! changes get their `seq` in commit order.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::Connection;

use crate::sql::finish;
use crate::{
    ops, BoundaryRecord, ChangeRecord, ClusterRecord, Editor, Guard, NewResource, Page,
    PolicyHistoryEntry, PolicyRecord, PolicyWrite, ResourceKey, ResourceQuery, ResourceRecord,
    Result, Store, TokenRecord, WriteAction,
};

/// The advisory lock `bootstrap_admin_token` holds until its transaction ends (the key is
/// "palisade" in ASCII).
const BOOTSTRAP_LOCK: &str = "SELECT pg_advisory_xact_lock(8097872805151990885)";

/// How long an operation waits for a connection (the pool's default is 30 s): with the server
/// down, calls fail within this time instead of hanging. 2 s is the bound SPEC 2.4 gives
/// for reading the policies before a plan path answers 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

#[derive(Debug)]
pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    /// Opens `postgres://...` (or `postgresql://...`) and applies the migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // Never hand out a connection still inside a transaction: close it instead.
            .after_release(|conn, _| Box::pin(async move { Ok(!conn.is_in_transaction()) }))
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }
}

#[async_trait]
impl Store for PostgresStore {
    fn backend(&self) -> &'static str {
        "postgres"
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
        let mut tx = self.pool.begin().await?;
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
        let mut tx = self.pool.begin().await?;
        let result = ops::delete_boundary(&mut *tx, name).await;
        finish(tx, result).await
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
        let mut tx = self.pool.begin().await?;
        let result = ops::put_policy(&mut *tx, &write, actor).await;
        finish(tx, result).await
    }

    async fn apply_policies(
        &self,
        writes: Vec<PolicyWrite>,
        actor: &str,
    ) -> Result<Vec<(PolicyRecord, WriteAction)>> {
        let mut tx = self.pool.begin().await?;
        let result = ops::apply_policies(&mut *tx, &writes, actor).await;
        finish(tx, result).await
    }

    async fn delete_policy(
        &self,
        boundary: &str,
        name: &str,
        if_match: Option<&str>,
        actor: &str,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::delete_policy(&mut *tx, boundary, name, if_match, actor).await;
        finish(tx, result).await
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
        let mut tx = self.pool.begin().await?;
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
        let mut tx = self.pool.begin().await?;
        let result = ops::update_resource(&mut *tx, key, if_match, editor).await;
        finish(tx, result).await
    }

    async fn delete_resource(&self, key: &ResourceKey, if_match: Option<&str>) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::delete_resource(&mut *tx, key, if_match).await;
        finish(tx, result).await
    }

    // ---- changes ----

    async fn list_changes(&self, boundary: &str) -> Result<Vec<ChangeRecord>> {
        ops::list_changes(&mut *self.pool.acquire().await?, boundary).await
    }

    // ---- tokens ----

    async fn create_token(&self, token: TokenRecord) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::create_token(&mut *tx, &token).await;
        finish(tx, result).await
    }

    /// Under a transaction-level advisory lock, so that replicas starting together make one.
    async fn bootstrap_admin_token(&self, token: TokenRecord) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let result = match sqlx::query(BOOTSTRAP_LOCK).execute(&mut *tx).await {
            Ok(_) => ops::bootstrap_admin_token(&mut *tx, &token).await,
            Err(error) => Err(error.into()),
        };
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
        let mut tx = self.pool.begin().await?;
        let result = ops::delete_token(&mut *tx, id).await;
        finish(tx, result).await
    }

    // ---- clusters ----

    async fn put_cluster(&self, name: &str, kubeconfig_sealed: &[u8]) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let result = ops::put_cluster(&mut *tx, name, kubeconfig_sealed).await;
        finish(tx, result).await
    }

    async fn get_cluster(&self, name: &str) -> Result<ClusterRecord> {
        ops::get_cluster(&mut *self.pool.acquire().await?, name).await
    }

    async fn list_clusters(&self) -> Result<Vec<ClusterRecord>> {
        ops::list_clusters(&mut *self.pool.acquire().await?).await
    }

    async fn delete_cluster(&self, name: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::delete_cluster(&mut *tx, name).await;
        finish(tx, result).await
    }

    async fn set_cluster_status(
        &self,
        name: &str,
        kubernetes_version: Option<&str>,
        admission_enforced: Option<bool>,
        admission_reason: Option<&str>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
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
        let mut tx = self.pool.begin().await?;
        let result = ops::attach_cluster(&mut *tx, boundary, cluster).await;
        finish(tx, result).await
    }

    async fn detach_cluster(&self, boundary: &str, cluster: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::detach_cluster(&mut *tx, boundary, cluster).await;
        finish(tx, result).await
    }

    async fn boundary_clusters(&self, boundary: &str) -> Result<Vec<ClusterRecord>> {
        ops::boundary_clusters(&mut *self.pool.acquire().await?, boundary).await
    }
}
