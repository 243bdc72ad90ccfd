//! The PostgreSQL backend, for several replicas sharing one database. Every write is one
//! transaction (READ COMMITTED); guarded writes, policy writes and the other writes of a
//! boundary's contents first lock the boundary's row (`SELECT ... FOR UPDATE`), so a check
//! and its write cannot interleave with a policy change of that boundary, and a boundary's
//! changes get their `seq` in commit order.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, Postgres};
use sqlx::{Connection, Transaction};
use tokio::sync::watch;

use crate::sql::{by, finish, finish_by, remaining};
use crate::{
    ops, BoundaryRecord, ChangeRecord, ClusterRecord, Editor, Guard, Lease, NamespaceRecord,
    NewResource, Page, PolicyHistoryEntry, PolicyRecord, PolicyStatusRecord, PolicyWrite,
    ResourceKey, ResourceQuery, ResourceRecord, Result, Store, StoreError, TokenRecord,
    WriteAction, INSTALLATION_KEY,
};

/// The advisory lock `bootstrap_admin_token` holds until its transaction ends (the key is
/// "palisade" in ASCII).
const BOOTSTRAP_LOCK: &str = "SELECT pg_advisory_xact_lock(8097872805151990885)";

/// How long an operation waits for a connection (the pool's default is 30 s): with the server
/// down, calls fail within this time instead of hanging. 2 s is the bound SPEC 2.4 gives
/// for reading the policies before a plan path answers 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// The LISTEN/NOTIFY channel of changes the reconciler acts on.
const CHANNEL: &str = "palisade_reconcile";

#[derive(Debug)]
pub struct PostgresStore {
    pool: PgPool,
}

/// On success, queues a notification on `CHANNEL` inside the transaction: PostgreSQL
/// delivers it to every listening replica when, and only if, the transaction commits.
async fn notify<T>(tx: &mut Transaction<'static, Postgres>, result: Result<T>) -> Result<T> {
    if result.is_ok() {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(CHANNEL)
            .execute(&mut **tx)
            .await?;
    }
    result
}

/// Forwards notifications to `changes` until every receiver is gone; each (re)connection
/// also bumps it, since changes may have been missed while the connection was down.
async fn listen(pool: PgPool, changes: watch::Sender<u64>) {
    let bump = |changes: &watch::Sender<u64>| changes.send_modify(|n| *n = n.wrapping_add(1));
    loop {
        let connected = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            () = changes.closed() => return,
            connected = connected => match connected {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for changes; retrying in 1 s");
                    tokio::select! {
                        () = changes.closed() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        bump(&changes);
        loop {
            let received = tokio::select! {
                () = changes.closed() => return,
                received = listener.try_recv() => received,
            };
            match received {
                Ok(Some(_)) => bump(&changes),
                // The connection was lost; the next call reconnects.
                Ok(None) => bump(&changes),
                Err(error) => {
                    tracing::warn!(%error, "lost the change listener; reconnecting");
                    break;
                }
            }
        }
    }
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

    /// A connection and `BEGIN`, by `deadline`.
    async fn begin_by(&self, deadline: Option<Instant>) -> Result<Transaction<'static, Postgres>> {
        by(deadline, async { Ok(self.pool.begin().await?) }).await
    }
}

/// Makes the server give up waiting for a lock (the boundary's row) at `deadline`, so that a
/// guarded write stuck behind a policy change neither outlives its request on the server nor
/// keeps its connection from the pool. Only lock waits are limited: never the commit.
async fn limit_lock_waits(
    tx: &mut Transaction<'static, Postgres>,
    deadline: Option<Instant>,
) -> Result<()> {
    let Some(deadline) = deadline else {
        return Ok(());
    };
    let left = remaining(deadline)?;
    sqlx::query("SELECT set_config('lock_timeout', $1, true)")
        .bind(format!("{}ms", left.as_millis().max(1)))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// A lock wait the server gave up (`lock_timeout`: 55P03) is the deadline passing.
fn timed_out<T>(result: Result<T>) -> Result<T> {
    match result {
        Err(StoreError::Database(error))
            if error
                .as_database_error()
                .and_then(|e| e.code())
                .is_some_and(|code| code == "55P03") =>
        {
            Err(StoreError::Timeout)
        }
        other => other,
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
        let result = notify(&mut tx, result).await;
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
        let result = notify(&mut tx, result).await;
        finish(tx, result).await
    }

    async fn apply_policies(
        &self,
        writes: Vec<PolicyWrite>,
        actor: &str,
    ) -> Result<Vec<(PolicyRecord, WriteAction)>> {
        let mut tx = self.pool.begin().await?;
        let result = ops::apply_policies(&mut *tx, &writes, actor).await;
        let result = notify(&mut tx, result).await;
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
        let result = notify(&mut tx, result).await;
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
        deadline: Option<Instant>,
    ) -> Result<(ResourceRecord, Vec<String>)> {
        let mut tx = self.begin_by(deadline).await?;
        let result = by(deadline, async {
            limit_lock_waits(&mut tx, deadline).await?;
            ops::create_resource(&mut *tx, resource, guard).await
        })
        .await;
        finish_by(tx, timed_out(result), deadline).await
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
        let mut tx = self.begin_by(deadline).await?;
        let result = by(deadline, async {
            limit_lock_waits(&mut tx, deadline).await?;
            ops::update_resource(&mut *tx, key, if_match, editor).await
        })
        .await;
        finish_by(tx, timed_out(result), deadline).await
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
        let result = notify(&mut tx, result).await;
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
        let result = notify(&mut tx, result).await;
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
        let result = notify(&mut tx, result).await;
        finish(tx, result).await
    }

    async fn detach_cluster(&self, boundary: &str, cluster: &str) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::detach_cluster(&mut *tx, boundary, cluster).await;
        let result = notify(&mut tx, result).await;
        finish(tx, result).await
    }

    async fn boundary_clusters(&self, boundary: &str) -> Result<Vec<ClusterRecord>> {
        ops::boundary_clusters(&mut *self.pool.acquire().await?, boundary).await
    }

    // ---- the reconciler's state ----

    async fn installation_id(&self, candidate: &str) -> Result<String> {
        let mut tx = self.pool.begin().await?;
        let result = ops::setting_or_insert(&mut *tx, INSTALLATION_KEY, candidate).await;
        finish(tx, result).await
    }

    async fn set_cluster_error(&self, name: &str, error: Option<&str>) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::set_cluster_error(&mut *tx, name, error).await;
        finish(tx, result).await
    }

    async fn put_namespace(&self, boundary: &str, cluster: &str, name: &str) -> Result<bool> {
        let mut tx = self.pool.begin().await?;
        let result = ops::put_namespace(&mut *tx, boundary, cluster, name).await;
        let result = notify(&mut tx, result).await;
        finish(tx, result).await
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
        let mut tx = self.pool.begin().await?;
        let result = ops::delete_namespace(&mut *tx, boundary, cluster, name).await;
        let result = notify(&mut tx, result).await;
        finish(tx, result).await
    }

    async fn replace_policy_statuses(
        &self,
        cluster: &str,
        boundary: &str,
        statuses: Vec<PolicyStatusRecord>,
    ) -> Result<()> {
        let mut tx = self.pool.begin().await?;
        let result = ops::replace_policy_statuses(&mut *tx, cluster, boundary, &statuses).await;
        finish(tx, result).await
    }

    async fn policy_statuses(&self, boundary: &str) -> Result<Vec<PolicyStatusRecord>> {
        ops::policy_statuses(&mut *self.pool.acquire().await?, boundary).await
    }

    async fn subscribe(&self) -> Result<watch::Receiver<u64>> {
        let (changes, receiver) = watch::channel(0);
        tokio::spawn(listen(self.pool.clone(), changes));
        Ok(receiver)
    }

    /// A session-level advisory lock on a connection of the lease's own: released when the
    /// lease is dropped or its connection is lost.
    async fn try_lease(&self, installation: &str) -> Result<Option<Lease>> {
        let options = self.pool.connect_options();
        let mut connection = sqlx::PgConnection::connect_with(&options).await?;
        let held: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
            .bind(format!("palisade-reconciler/{installation}"))
            .fetch_one(&mut connection)
            .await?;
        Ok(held.then(|| Lease::on(connection)))
    }
}
