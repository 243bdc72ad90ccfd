//! The one implementation of `Store`: `SqlStore<B>`, generic over `SqlBackend`, which says
//! what differs between the databases. Everything else is said once, here: which writes wake
//! the reconciler (`Wake`), how a write's deadline is kept and checked before `COMMIT`, and
//! how a write ends (`Write::finish`).

use std::time::Instant;

use async_trait::async_trait;
use sqlx::pool::PoolConnection;
use sqlx::Pool;
use tokio::sync::watch;

use crate::error::db;
use crate::group_commit::Op;
use crate::ops::documents::{self, DocumentKind};
use crate::ops::exceptions::{self, Exceptions};
use crate::ops::policies::{self, Policies};
use crate::ops::{
    audits, boundaries, changes, clusters, namespaces, resources, sessions, settings, statuses,
    tokens, uploads,
};
use crate::sql::{by, remaining, Conn, DbResult};
use crate::turns::{class_of, Class};
use crate::{
    AuditRecord, BoundaryRecord, ChangeRecord, ClusterRecord, DatabaseError, Editor,
    ExceptionHistoryEntry, ExceptionInstall, ExceptionRecord, ExceptionWrite, Guard, Lease,
    NamespaceRecord, NewResource, NewUpload, Page, PolicyHistoryEntry, PolicyRecord,
    PolicyStatusRecord, PolicyWrite, ResourceKey, ResourceQuery, ResourceRecord, Result,
    RolloutMove, Snapshot, Store, StoreError, TokenRecord, UploadRecord, WriteAction,
};

/// What differs between SQLite and PostgreSQL below the operations: how a write transaction
/// begins (and what it waits for), how a committed change wakes the reconciler, the lease.
/// The SQL dialect differences the operations meet are constants of `Conn`.
#[async_trait]
pub trait SqlBackend: Send + Sync + std::fmt::Debug + Sized + 'static {
    /// `Store::backend`: `sqlite` or `postgres`.
    const NAME: &'static str;
    /// The driver's database.
    type Db: sqlx::Database<Connection = Self::Conn>;
    /// Its connection, on which the operations run.
    type Conn: Conn + sqlx::Connection<Database = Self::Db>;
    /// Begins a read transaction that sees one moment of the database.
    const BEGIN_READ: &'static str;

    /// This process's writes take turns here, fairly between boundaries (`turns`): a write
    /// of `class` waits for its turn, held until its transaction ends (`None`: no turn).
    async fn take_turn(&self, _class: Class) -> Option<Box<dyn Send + '_>> {
        None
    }

    /// Runs `op`, a resource write of `class`, grouped with others into one commit (SQLite,
    /// see `group_commit`), answering once that commit has ended; `Err(op)` hands it back to
    /// run in a transaction of its own. `wakes` says whether a committed result wakes the
    /// reconciler.
    async fn grouped<T: Send + 'static>(
        &self,
        _class: Class,
        _deadline: Option<Instant>,
        op: Op<Self::Conn, T>,
        _wakes: for<'v> fn(&'v T) -> bool,
    ) -> std::result::Result<Result<T>, Op<Self::Conn, T>> {
        Err(op)
    }

    /// Begins a write transaction on `conn`, waiting for the database only until `deadline`
    /// (`Timeout` past it).
    async fn begin(&self, conn: &mut Self::Conn, deadline: Option<Instant>) -> Result<()>;

    /// Whether an error is the database giving up waiting for a lock at the deadline the
    /// write's `begin` set (it is then `Timeout`).
    fn gave_up_waiting(_error: &DatabaseError) -> bool {
        false
    }

    /// Inside a waking write's transaction, just before `COMMIT`: queues the wake-up, if the
    /// database delivers it on commit (PostgreSQL's `NOTIFY`).
    async fn wake_in_transaction(_conn: &mut Self::Conn) -> DbResult<()> {
        Ok(())
    }

    /// After a waking write has committed: wakes the subscribers this process knows of
    /// (SQLite's channel).
    fn wake_after_commit(&self) {}

    /// Whether a resource create may run as one statement (`resources::create_in_one_statement`,
    /// PostgreSQL), and the channel that statement notifies to wake the reconciler. `None`:
    /// every create runs in a transaction (or a group commit).
    const ONE_STATEMENT_CREATE: Option<&'static str> = None;

    /// `Store::subscribe`.
    async fn subscribe(&self, pool: &Pool<Self::Db>) -> Result<watch::Receiver<u64>>;

    /// `Store::join_fleet`.
    async fn join_fleet(
        &self,
        pool: &Pool<Self::Db>,
        installation: &str,
        replica: &str,
    ) -> Result<Option<Lease>>;

    /// `Store::cluster_holders`.
    async fn cluster_holders(
        &self,
        pool: &Pool<Self::Db>,
        installation: &str,
    ) -> Result<std::collections::BTreeMap<String, String>>;
}

/// The store: a connection pool and a backend.
#[derive(Debug)]
pub struct SqlStore<B: SqlBackend> {
    pool: Pool<B::Db>,
    backend: B,
}

/// Whether a committed write wakes the reconciler: it does for the changes it acts on
/// (policies, clusters, attachments, namespaces, boundary deletions, workloads placed in a
/// cluster), not for the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wake {
    Reconciler,
    Nobody,
}

/// A resource write wakes the reconciler when the resource is a workload placed in a cluster:
/// the cluster must be told.
fn wakes(record: &ResourceRecord) -> bool {
    record.cluster.is_some()
}

/// The boundary of writes that all name the same one; `None` (the installation's own class)
/// when they name several, or none.
fn one_boundary<'w>(mut boundaries: impl Iterator<Item = &'w str>) -> Option<&'w str> {
    let first = boundaries.next()?;
    boundaries.all(|b| b == first).then_some(first)
}

/// An open write transaction on a pooled connection of its own, with the backend's writer
/// turn. Its connection is closed, not reused, unless a `COMMIT` or `ROLLBACK` is seen to
/// succeed: a write dropped half-way (its request cancelled) or whose ending failed never
/// hands a connection still inside a transaction (or holding a lock) to the next user.
/// (The transaction is plain `BEGIN` ... `COMMIT` on that connection rather than the driver's
/// `Transaction`, which could not own a connection SQLite's `begin` prepared first.)
struct Write<'s, B: SqlBackend> {
    backend: &'s B,
    conn: PoolConnection<B::Db>,
    deadline: Option<Instant>,
    _turn: Option<Box<dyn Send + 's>>,
    ended: bool,
}

impl<B: SqlBackend> SqlStore<B> {
    pub(crate) fn new(pool: Pool<B::Db>, backend: B) -> Self {
        SqlStore { pool, backend }
    }

    /// Deletes a versioned document in its boundary's write transaction.
    async fn delete_document<K: DocumentKind>(
        &self,
        boundary: &str,
        name: &str,
        if_match: Option<&str>,
        actor: &str,
    ) -> Result<()> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = documents::delete::<K, _>(tx.conn(), boundary, name, if_match, actor).await;
        tx.finish(result, Wake::Reconciler).await
    }

    /// A pooled connection for a read.
    async fn read(&self) -> Result<PoolConnection<B::Db>> {
        self.pool.acquire().await.map_err(db)
    }

    /// Opens a write transaction of `boundary` (`None`: the installation's own write; see
    /// `turns`). With a `deadline`, waiting for the writer turn, for a connection and for
    /// the database's lock all end by then (`Timeout`).
    async fn begin(
        &self,
        boundary: Option<&str>,
        deadline: Option<Instant>,
    ) -> Result<Write<'_, B>> {
        let class = class_of(boundary);
        let turn = by(deadline, async { Ok(self.backend.take_turn(class).await) }).await?;
        let conn = by(deadline, self.read()).await?;
        let mut write = Write {
            backend: &self.backend,
            conn,
            deadline,
            _turn: turn,
            ended: false,
        };
        self.backend.begin(&mut write.conn, deadline).await?;
        Ok(write)
    }

    /// `Store::create_resource` as a resource write (see `write_resource`).
    async fn create_in_transaction(
        &self,
        resource: NewResource,
        guard: Option<Guard>,
        deadline: Option<Instant>,
    ) -> Result<ResourceRecord> {
        let boundary = resource.boundary.clone();
        let op: Op<B::Conn, _> = Box::new(move |c| Box::pin(resources::create(c, resource, guard)));
        self.write_resource(&boundary, deadline, op, wakes).await
    }

    /// A resource write of `boundary`: grouped with others if the backend groups them, else
    /// in a transaction of its own, run by `deadline` (see `Write::finish`).
    async fn write_resource<T: Send + 'static>(
        &self,
        boundary: &str,
        deadline: Option<Instant>,
        op: Op<B::Conn, T>,
        wakes: for<'v> fn(&'v T) -> bool,
    ) -> Result<T> {
        let class = class_of(Some(boundary));
        let op = match self.backend.grouped(class, deadline, op, wakes).await {
            Ok(result) => return result,
            Err(op) => op,
        };
        let mut tx = self.begin(Some(boundary), deadline).await?;
        let result = by(deadline, op(tx.conn())).await;
        let wake = match &result {
            Ok(value) if wakes(value) => Wake::Reconciler,
            _ => Wake::Nobody,
        };
        tx.finish(result, wake).await
    }
}

impl<B: SqlBackend> Write<'_, B> {
    fn conn(&mut self) -> &mut B::Conn {
        &mut self.conn
    }

    /// Ends the write: commits a success, rolls back a failure. With a deadline, a success
    /// is rolled back as `Timeout` when the deadline has passed before `COMMIT`; the commit
    /// itself runs without a time limit, so its outcome, not a timer, decides the answer.
    async fn finish<T>(mut self, result: Result<T>, wake: Wake) -> Result<T> {
        let result = match result {
            Ok(value) if wake == Wake::Reconciler => B::wake_in_transaction(&mut self.conn)
                .await
                .map(|()| value)
                .map_err(StoreError::from),
            other => other,
        };
        let result = match (result, self.deadline) {
            (Ok(value), Some(deadline)) => remaining(deadline).map(|_| value),
            (Err(StoreError::Database(error)), Some(_)) if B::gave_up_waiting(&error) => {
                Err(StoreError::Timeout)
            }
            (result, _) => result,
        };
        match result {
            Ok(value) => {
                self.conn.run("COMMIT").await?;
                self.ended = true;
                if wake == Wake::Reconciler {
                    self.backend.wake_after_commit();
                }
                Ok(value)
            }
            Err(error) => {
                match self.conn.run("ROLLBACK").await {
                    Ok(()) => self.ended = true,
                    Err(rollback) => tracing::warn!(error = %rollback, "rollback failed"),
                }
                Err(error)
            }
        }
    }
}

impl<B: SqlBackend> Drop for Write<'_, B> {
    fn drop(&mut self) {
        if !self.ended {
            self.conn.close_on_drop();
        }
    }
}

#[async_trait]
impl<B: SqlBackend> Store for SqlStore<B> {
    fn backend(&self) -> &'static str {
        B::NAME
    }

    async fn ping(&self) -> Result<()> {
        crate::ops::ping(&mut *self.read().await?).await
    }

    // ---- writes: each one transaction, and whether its commit wakes the reconciler ----

    async fn create_boundary(
        &self,
        name: &str,
        display_name: Option<&str>,
    ) -> Result<BoundaryRecord> {
        let mut tx = self.begin(Some(name), None).await?;
        let result = boundaries::create(tx.conn(), name, display_name).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn delete_boundary(&self, name: &str) -> Result<()> {
        let mut tx = self.begin(Some(name), None).await?;
        let result = boundaries::delete(tx.conn(), name).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn put_policy(
        &self,
        write: PolicyWrite,
        actor: &str,
    ) -> Result<(PolicyRecord, WriteAction)> {
        let mut tx = self.begin(Some(&write.boundary), None).await?;
        let result = policies::put(tx.conn(), &write, actor).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn set_policy_rollout(
        &self,
        boundary: &str,
        name: &str,
        rollout: RolloutMove<'_>,
    ) -> Result<PolicyRecord> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let at = crate::now();
        let result = policies::set_rollout(tx.conn(), boundary, name, rollout, &at).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn apply_policies(
        &self,
        writes: Vec<PolicyWrite>,
        actor: &str,
    ) -> Result<Vec<(PolicyRecord, WriteAction)>> {
        let mut tx = self
            .begin(
                one_boundary(writes.iter().map(|w| w.boundary.as_str())),
                None,
            )
            .await?;
        let result = policies::apply(tx.conn(), &writes, actor).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn delete_policy(
        &self,
        boundary: &str,
        name: &str,
        if_match: Option<&str>,
        actor: &str,
    ) -> Result<()> {
        self.delete_document::<Policies>(boundary, name, if_match, actor)
            .await
    }

    async fn create_resource(
        &self,
        resource: NewResource,
        guard: Option<Guard>,
        deadline: Option<Instant>,
    ) -> Result<ResourceRecord> {
        let Some(channel) = B::ONE_STATEMENT_CREATE else {
            return self.create_in_transaction(resource, guard, deadline).await;
        };
        // Naming an upload writes its row too (`uploads::name`): not one statement.
        if resource.upload.is_some() {
            return self.create_in_transaction(resource, guard, deadline).await;
        }
        // The version the guard last saw, when it allowed there: the create then runs as one
        // statement that writes only if the boundary is still at that version.
        let allowed_at = match &guard {
            None => Some(None),
            Some(guard) => guard.latest(&resource.boundary).and_then(|version| {
                match guard.known(&resource.boundary, version) {
                    Some(Ok(())) => Some(Some(version)),
                    _ => None,
                }
            }),
        };
        let Some(version) = allowed_at else {
            return self.create_in_transaction(resource, guard, deadline).await;
        };
        if let Some(deadline) = deadline {
            remaining(deadline)?;
        }
        // A write like the others: it takes its boundary's turn (`turns`).
        let class = class_of(Some(&resource.boundary));
        let turn = by(deadline, async { Ok(self.backend.take_turn(class).await) }).await?;
        let mut conn = by(deadline, self.read()).await?;
        let outcome =
            resources::create_in_one_statement(&mut *conn, &resource, version, deadline, channel)
                .await;
        // Back to the pool, and the turn given back, before a fallback takes its own.
        drop(conn);
        drop(turn);
        match outcome {
            Ok(Some(record)) => Ok(record),
            Ok(None) => self.create_in_transaction(resource, guard, deadline).await,
            Err(StoreError::Database(error)) if B::gave_up_waiting(&error) => {
                Err(StoreError::Timeout)
            }
            Err(other) => Err(other),
        }
    }

    async fn update_resource(
        &self,
        key: &ResourceKey,
        if_match: Option<&str>,
        editor: Editor,
        deadline: Option<Instant>,
    ) -> Result<ResourceRecord> {
        let (key, if_match) = (key.clone(), if_match.map(str::to_owned));
        let boundary = key.boundary.clone();
        let op: Op<B::Conn, _> = Box::new(move |c| {
            Box::pin(async move { resources::update(c, &key, if_match.as_deref(), editor).await })
        });
        self.write_resource(&boundary, deadline, op, wakes).await
    }

    async fn delete_resource(&self, key: &ResourceKey, if_match: Option<&str>) -> Result<()> {
        let (key, if_match) = (key.clone(), if_match.map(str::to_owned));
        let boundary = key.boundary.clone();
        let op: Op<B::Conn, _> = Box::new(move |c| {
            Box::pin(async move { resources::delete(c, &key, if_match.as_deref()).await })
        });
        self.write_resource(&boundary, None, op, wakes)
            .await
            .map(|_| ())
    }

    async fn placements(&self, boundary: &str) -> Result<Vec<(String, Option<String>)>> {
        clusters::placements(&mut *self.read().await?, boundary).await
    }

    async fn resources_in_cluster(&self, cluster: &str) -> Result<Vec<ResourceRecord>> {
        resources::in_cluster(&mut *self.read().await?, cluster).await
    }

    async fn set_resource_status(&self, key: &ResourceKey, status: &str) -> Result<bool> {
        let mut tx = self.begin(Some(&key.boundary), None).await?;
        let result = resources::set_status(tx.conn(), key, status).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn put_upload_chunk(
        &self,
        boundary: &str,
        id: &str,
        seq: i64,
        content: &[u8],
    ) -> Result<()> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = uploads::put_chunk(tx.conn(), boundary, id, seq, content).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn store_upload(&self, upload: NewUpload, limit: u64) -> Result<()> {
        let mut tx = self.begin(Some(&upload.boundary), None).await?;
        let result = uploads::store(tx.conn(), &upload, limit).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn get_upload(&self, boundary: &str, id: &str) -> Result<UploadRecord> {
        uploads::get(&mut *self.read().await?, boundary, id).await
    }

    async fn upload_chunk(&self, boundary: &str, id: &str, seq: i64) -> Result<Option<Vec<u8>>> {
        uploads::chunk(&mut *self.read().await?, boundary, id, seq).await
    }

    async fn upload_usage(&self, boundary: &str) -> Result<u64> {
        uploads::usage(&mut *self.read().await?, boundary).await
    }

    async fn discard_upload(&self, boundary: &str, id: &str, max: usize) -> Result<u64> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = uploads::discard(tx.conn(), boundary, id, max).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn delete_unnamed_uploads(&self, named_before: &str, max: usize) -> Result<u64> {
        let mut tx = self.begin(None, None).await?;
        let result = uploads::delete_unnamed(tx.conn(), named_before, max).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn delete_orphan_upload_chunks(&self, written_before: &str, max: usize) -> Result<u64> {
        let mut tx = self.begin(None, None).await?;
        let result = uploads::delete_orphan_chunks(tx.conn(), written_before, max).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn create_token(&self, token: TokenRecord) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = tokens::create(tx.conn(), &token).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn bootstrap_admin_token(&self, token: TokenRecord) -> Result<bool> {
        let mut tx = self.begin(None, None).await?;
        let result = tokens::bootstrap_admin(tx.conn(), &token).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn delete_token(&self, id: &str) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = tokens::delete(tx.conn(), id).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn end_session(&self, id: &str, expires_at: &str) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = sessions::end(tx.conn(), id, expires_at).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn put_cluster(
        &self,
        name: &str,
        kubeconfig_sealed: &[u8],
        reserved: Option<&[String]>,
    ) -> Result<bool> {
        let mut tx = self.begin(None, None).await?;
        let result = clusters::put(tx.conn(), name, kubeconfig_sealed, reserved).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn add_apiserver_restarts(&self, name: &str, count: i64) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = clusters::add_restarts(tx.conn(), name, count).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn record_repair(&self, name: &str, what: &str) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = clusters::add_repair(tx.conn(), name, what).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn set_cluster_layout(&self, name: &str, layout: &str, reason: &str) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = clusters::set_layout(tx.conn(), name, layout, reason).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn set_cluster_status(
        &self,
        name: &str,
        kubernetes_version: Option<&str>,
        admission_enforced: Option<bool>,
        admission_reason: Option<&str>,
    ) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = clusters::set_status(
            tx.conn(),
            name,
            kubernetes_version,
            admission_enforced,
            admission_reason,
        )
        .await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn set_cluster_error(&self, name: &str, error: Option<&str>) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = clusters::set_error(tx.conn(), name, error).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn attach_cluster(&self, boundary: &str, cluster: &str) -> Result<bool> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = clusters::attach(tx.conn(), boundary, cluster).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn detach_cluster(&self, boundary: &str, cluster: &str) -> Result<()> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = clusters::detach(tx.conn(), boundary, cluster).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn delete_cluster(&self, name: &str) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = clusters::delete(tx.conn(), name).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn put_namespace(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<bool> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = namespaces::put(tx.conn(), boundary, cluster, name, uid).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn learn_namespace_uid(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
        uid: &str,
    ) -> Result<bool> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = namespaces::learn_uid(tx.conn(), boundary, cluster, name, uid).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn namespace_gone(&self, boundary: &str, cluster: &str, name: &str) -> Result<bool> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = namespaces::gone(tx.conn(), boundary, cluster, name).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn delete_namespace(&self, boundary: &str, cluster: &str, name: &str) -> Result<()> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = namespaces::delete(tx.conn(), boundary, cluster, name).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn replace_policy_statuses(
        &self,
        cluster: &str,
        boundary: &str,
        statuses: Vec<PolicyStatusRecord>,
    ) -> Result<()> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = statuses::replace(tx.conn(), cluster, boundary, &statuses).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn installation_id(&self, candidate: &str) -> Result<String> {
        let mut tx = self.begin(None, None).await?;
        let result = settings::installation_id(tx.conn(), candidate).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn replace_encryption_key_check(&self, value: &str) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = settings::replace_encryption_key_check(tx.conn(), value).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn encryption_key_check(&self, record: Option<&str>) -> Result<Option<String>> {
        let Some(candidate) = record else {
            return settings::stored_encryption_key_check(&mut *self.read().await?).await;
        };
        let mut tx = self.begin(None, None).await?;
        let result = settings::encryption_key_check(tx.conn(), candidate).await;
        tx.finish(result.map(Some), Wake::Nobody).await
    }

    // ---- reads: each on a pooled connection ----

    async fn get_boundary(&self, name: &str) -> Result<BoundaryRecord> {
        boundaries::get(&mut *self.read().await?, name).await
    }

    async fn list_boundaries(&self) -> Result<Vec<BoundaryRecord>> {
        boundaries::list(&mut *self.read().await?).await
    }

    async fn snapshot(&self) -> Result<Snapshot> {
        let mut c = self.read().await?;
        c.run(B::BEGIN_READ).await.map_err(StoreError::from)?;
        let snapshot = crate::ops::snapshot::read(&mut *c).await;
        // A read transaction changes nothing: ending it cannot lose anything.
        if let Err(error) = c.run("ROLLBACK").await {
            tracing::warn!(%error, "store: a read transaction did not end cleanly");
        }
        snapshot
    }

    async fn list_policies(&self, boundary: &str) -> Result<Vec<PolicyRecord>> {
        documents::list::<Policies, _>(&mut *self.read().await?, boundary).await
    }

    async fn get_policy(&self, boundary: &str, name: &str) -> Result<PolicyRecord> {
        documents::get::<Policies, _>(&mut *self.read().await?, boundary, name).await
    }

    async fn policy_history(
        &self,
        boundary: &str,
        name: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<PolicyHistoryEntry>> {
        documents::history::<Policies, _>(&mut *self.read().await?, boundary, name, after, limit)
            .await
    }

    async fn policy_version_spec(
        &self,
        boundary: &str,
        name: &str,
        version: i64,
    ) -> Result<Option<String>> {
        policies::version_spec(&mut *self.read().await?, boundary, name, version).await
    }

    async fn apply_documents(
        &self,
        policies: Vec<PolicyWrite>,
        exceptions: Vec<ExceptionWrite>,
        actor: &str,
    ) -> Result<(
        Vec<(PolicyRecord, WriteAction)>,
        Vec<(ExceptionRecord, WriteAction)>,
    )> {
        let mut tx = self
            .begin(
                one_boundary(
                    policies
                        .iter()
                        .map(|w| w.boundary.as_str())
                        .chain(exceptions.iter().map(|w| w.boundary.as_str())),
                ),
                None,
            )
            .await?;
        let result = async {
            let saved = policies::apply(tx.conn(), &policies, actor).await?;
            let mut excepted = Vec::with_capacity(exceptions.len());
            for write in &exceptions {
                excepted.push(exceptions::put(tx.conn(), write, actor).await?);
            }
            Ok((saved, excepted))
        }
        .await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn list_exceptions(&self, boundary: &str) -> Result<Vec<ExceptionRecord>> {
        documents::list::<Exceptions, _>(&mut *self.read().await?, boundary).await
    }

    async fn get_exception(&self, boundary: &str, name: &str) -> Result<ExceptionRecord> {
        documents::get::<Exceptions, _>(&mut *self.read().await?, boundary, name).await
    }

    async fn put_exception(
        &self,
        write: ExceptionWrite,
        actor: &str,
    ) -> Result<(ExceptionRecord, WriteAction)> {
        let mut tx = self.begin(Some(&write.boundary), None).await?;
        let result = exceptions::put(tx.conn(), &write, actor).await;
        tx.finish(result, Wake::Reconciler).await
    }

    async fn delete_exception(
        &self,
        boundary: &str,
        name: &str,
        if_match: Option<&str>,
        actor: &str,
    ) -> Result<()> {
        self.delete_document::<Exceptions>(boundary, name, if_match, actor)
            .await
    }

    async fn exception_history(
        &self,
        boundary: &str,
        name: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<ExceptionHistoryEntry>> {
        documents::history::<Exceptions, _>(&mut *self.read().await?, boundary, name, after, limit)
            .await
    }

    async fn exceptions_in_force(&self, now: &str) -> Result<Vec<ExceptionRecord>> {
        exceptions::read_in_force(&mut *self.read().await?, now).await
    }

    async fn replace_exception_installs(
        &self,
        cluster: &str,
        installs: Vec<ExceptionInstall>,
    ) -> Result<()> {
        let mut tx = self.begin(None, None).await?;
        let result = exceptions::replace_installs(tx.conn(), cluster, &installs).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn exception_installs(&self, boundary: &str) -> Result<Vec<ExceptionInstall>> {
        exceptions::installs_of(&mut *self.read().await?, boundary).await
    }

    async fn exception_installs_in(&self, cluster: &str) -> Result<Vec<ExceptionInstall>> {
        exceptions::installs_in(&mut *self.read().await?, cluster).await
    }

    async fn get_resource(&self, key: &ResourceKey) -> Result<ResourceRecord> {
        resources::get(&mut *self.read().await?, key).await
    }

    async fn list_resources(
        &self,
        boundary: &str,
        query: &ResourceQuery,
    ) -> Result<Page<ResourceRecord>> {
        resources::list(&mut *self.read().await?, boundary, query).await
    }

    async fn plan_groups(&self, boundary: &str) -> Result<Vec<crate::PlanGroup>> {
        resources::plan_groups(&mut *self.read().await?, boundary).await
    }

    async fn list_changes(&self, boundary: &str) -> Result<Vec<ChangeRecord>> {
        changes::list(&mut *self.read().await?, boundary).await
    }

    async fn prune_history(&self, before: &str, batch: u32) -> Result<u64> {
        let mut deleted = 0;
        for table in [
            changes::HistoryTable::PolicyHistory,
            changes::HistoryTable::ExceptionHistory,
            changes::HistoryTable::Changes,
        ] {
            let mut tx = self.begin(None, None).await?;
            let result = changes::prune(tx.conn(), table, before, i64::from(batch)).await;
            deleted += tx.finish(result, Wake::Nobody).await?;
        }
        Ok(deleted)
    }

    async fn token_by_secret_hash(&self, secret_sha256: &str) -> Result<TokenRecord> {
        tokens::by_secret_hash(&mut *self.read().await?, secret_sha256).await
    }

    async fn list_tokens(&self, boundary: Option<&str>) -> Result<Vec<TokenRecord>> {
        tokens::list(&mut *self.read().await?, boundary).await
    }

    async fn get_token(&self, id: &str) -> Result<TokenRecord> {
        tokens::get(&mut *self.read().await?, id).await
    }

    async fn session_ended(&self, id: &str) -> Result<bool> {
        sessions::ended(&mut *self.read().await?, id).await
    }

    async fn get_cluster(&self, name: &str) -> Result<ClusterRecord> {
        clusters::get(&mut *self.read().await?, name).await
    }

    async fn list_clusters(&self) -> Result<Vec<ClusterRecord>> {
        clusters::list(&mut *self.read().await?).await
    }

    async fn boundary_clusters(&self, boundary: &str) -> Result<Vec<ClusterRecord>> {
        clusters::of_boundary(&mut *self.read().await?, boundary).await
    }

    async fn get_namespace(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
    ) -> Result<NamespaceRecord> {
        namespaces::get(&mut *self.read().await?, boundary, cluster, name).await
    }

    async fn list_namespaces(&self, boundary: &str) -> Result<Vec<NamespaceRecord>> {
        namespaces::of_boundary(&mut *self.read().await?, boundary).await
    }

    async fn cluster_namespaces(&self, cluster: &str) -> Result<Vec<NamespaceRecord>> {
        namespaces::of_cluster(&mut *self.read().await?, cluster).await
    }

    async fn policy_statuses(&self, boundary: &str) -> Result<Vec<PolicyStatusRecord>> {
        statuses::of_boundary(&mut *self.read().await?, boundary).await
    }

    async fn replace_audit_reports(
        &self,
        cluster: &str,
        boundary: &str,
        reports: Vec<AuditRecord>,
    ) -> Result<()> {
        let mut tx = self.begin(Some(boundary), None).await?;
        let result = audits::replace(tx.conn(), cluster, boundary, &reports).await;
        tx.finish(result, Wake::Nobody).await
    }

    async fn audit_reports(&self, boundary: &str, policy: &str) -> Result<Vec<AuditRecord>> {
        audits::of_policy(&mut *self.read().await?, boundary, policy).await
    }

    // ---- the reconciler's wake-ups and lease ----

    async fn subscribe(&self) -> Result<watch::Receiver<u64>> {
        self.backend.subscribe(&self.pool).await
    }

    async fn join_fleet(&self, installation: &str, replica: &str) -> Result<Option<Lease>> {
        self.backend
            .join_fleet(&self.pool, installation, replica)
            .await
    }

    async fn cluster_holders(
        &self,
        installation: &str,
    ) -> Result<std::collections::BTreeMap<String, String>> {
        self.backend.cluster_holders(&self.pool, installation).await
    }
}
