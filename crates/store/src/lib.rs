//! The storage port of palisade: what the server needs from a database, as one trait
//! (`Store`), and the two backends that implement it (SQLite, the default, and PostgreSQL for
//! several replicas).
//!
//! Records keep their documents as JSON text: the store never interprets a policy. Decoding is
//! the caller's job, so a stored policy that cannot be decoded is noticed where the decision is
//! made (and answered with 503, never with "allow").
//!
//! Every write that must be checked against the boundary's policies (a resource create or a
//! plan move) runs its check *inside* the write's transaction, serialised against policy
//! changes of the same boundary: SQLite takes the database write lock up front
//! (`BEGIN IMMEDIATE`), PostgreSQL locks the boundary's row: exclusively on the policy path
//! (`SELECT ... FOR UPDATE`), shared on the resource path (`FOR SHARE`, so creates of one
//! boundary do not wait for each other). The check is a plain closure (`Guard`), so the store
//! stays ignorant of policy semantics.
//!
//! Layout: `sql_store` is the one implementation of `Store`, generic over a small
//! `SqlBackend` (what differs between the databases: how a write begins and locks, how a
//! committed change wakes the reconciler, the lease), which `sqlite` and `postgres`
//! implement; `ops::*` holds the operations by aggregate (`ops::policies::put` saves a
//! policy), on top of `sql` (the connection calls both databases share). `turns` shares what
//! the writes of one process wait for (SQLite's writer, PostgreSQL's connections for writes)
//! fairly between boundaries.

mod error;
mod group_commit;
mod lease;
mod ops;
pub mod postgres;
mod records;
mod sql;
mod sql_store;
pub mod sqlite;
mod turns;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

pub use error::{DatabaseError, DatabaseErrorKind, MigrationError, Result, StoreError, Veto};
pub use lease::{Fence, Lease, Lost, LEASE_CONFIRM_INTERVAL, LEASE_LIFETIME, LEASE_QUERY_TIMEOUT};
pub use ops::uploads::{counted as counted_upload_bytes, LEAST_COUNTED_UPLOAD_BYTES};
pub use records::{
    AuditRecord, BoundaryRecord, BoundarySnapshot, ChangeRecord, Check, ClusterRecord, Edit,
    Editor, ExceptionHistoryEntry, ExceptionInstall, ExceptionRecord, ExceptionWrite, Guard,
    NamespaceRecord, NewResource, NewUpload, Page, PlanGroup, PoliciesVersion, PolicyHistoryEntry,
    PolicyRecord, PolicyStatusRecord, PolicyWrite, ResourceKey, ResourceQuery, ResourceRecord,
    RolloutDecision, RolloutMove, Snapshot, TokenRecord, UploadRecord, WriteAction,
};

/// The storage port. Every method is one transaction; none leaves a partial write behind.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Backend name for logs and metrics: `sqlite` or `postgres`.
    fn backend(&self) -> &'static str;

    /// A cheap round trip (`/readyz`).
    async fn ping(&self) -> Result<()>;

    // ---- boundaries ----
    /// `Conflict` when the name is taken.
    async fn create_boundary(
        &self,
        name: &str,
        display_name: Option<&str>,
    ) -> Result<BoundaryRecord>;
    async fn get_boundary(&self, name: &str) -> Result<BoundaryRecord>;
    /// Every boundary, by name.
    async fn list_boundaries(&self) -> Result<Vec<BoundaryRecord>>;
    /// Every cluster and every boundary with its policies, attached clusters, namespaces and
    /// exceptions, read in one read transaction (the reconciler's desired state).
    async fn snapshot(&self) -> Result<Snapshot>;
    /// `Conflict` while the boundary has resources, policies or namespaces.
    async fn delete_boundary(&self, name: &str) -> Result<()>;

    // ---- policies ----
    /// The boundary's policies by name. `NotFound` when the boundary does not exist.
    async fn list_policies(&self, boundary: &str) -> Result<Vec<PolicyRecord>>;
    async fn get_policy(&self, boundary: &str, name: &str) -> Result<PolicyRecord>;
    /// Creates or replaces one policy (`NotFound`: boundary unknown; `PreconditionFailed`:
    /// `if_match` differs, or is set for a policy that does not exist). Records history and a
    /// change. Writing identical content is `Unchanged` and records nothing.
    async fn put_policy(
        &self,
        write: PolicyWrite,
        actor: &str,
    ) -> Result<(PolicyRecord, WriteAction)>;
    /// All or nothing: every write in one transaction (boundaries locked in name order).
    async fn apply_policies(
        &self,
        writes: Vec<PolicyWrite>,
        actor: &str,
    ) -> Result<Vec<(PolicyRecord, WriteAction)>>;
    async fn delete_policy(
        &self,
        boundary: &str,
        name: &str,
        if_match: Option<&str>,
        actor: &str,
    ) -> Result<()>;
    /// A page of the history, oldest first: at most `limit` entries after sequence number
    /// `after` (from the first without it), read as one page from the database. `NotFound`
    /// when the first page is empty (neither the policy nor any history of it exists).
    async fn policy_history(
        &self,
        boundary: &str,
        name: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<PolicyHistoryEntry>>;
    /// The spec version `version` of the policy saved, from its history; `None` when the
    /// history holds no such version (never made, or pruned).
    async fn policy_version_spec(
        &self,
        boundary: &str,
        name: &str,
        version: i64,
    ) -> Result<Option<String>>;

    /// Moves a policy's rollout (a promotion, a pause, an abort; SPEC 8) where it is still as
    /// read, and records a change, so that the clusters follow, and with an `event` an entry of
    /// the policy's history. `NotFound`: no such policy; `PreconditionFailed`: the policy is at
    /// another version now, or its rollout changed since it was read.
    async fn set_policy_rollout(
        &self,
        boundary: &str,
        name: &str,
        rollout: RolloutMove<'_>,
    ) -> Result<PolicyRecord>;

    /// Policies and exceptions of `POST /v1/apply` in one transaction: all or nothing.
    async fn apply_documents(
        &self,
        policies: Vec<PolicyWrite>,
        exceptions: Vec<ExceptionWrite>,
        actor: &str,
    ) -> Result<(
        Vec<(PolicyRecord, WriteAction)>,
        Vec<(ExceptionRecord, WriteAction)>,
    )>;

    // ---- exceptions (SPEC 7) ----
    /// The boundary's exceptions by name; `NotFound` when the boundary does not exist.
    async fn list_exceptions(&self, boundary: &str) -> Result<Vec<ExceptionRecord>>;
    async fn get_exception(&self, boundary: &str, name: &str) -> Result<ExceptionRecord>;
    /// Saves an exception (see `ExceptionWrite`); wakes the reconciler.
    async fn put_exception(
        &self,
        write: ExceptionWrite,
        actor: &str,
    ) -> Result<(ExceptionRecord, WriteAction)>;
    async fn delete_exception(
        &self,
        boundary: &str,
        name: &str,
        if_match: Option<&str>,
        actor: &str,
    ) -> Result<()>;
    /// A page of the history, oldest first, as [`Store::policy_history`] reads one. `NotFound`
    /// when the first page is empty (neither the exception nor any history of it exists).
    async fn exception_history(
        &self,
        boundary: &str,
        name: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<Vec<ExceptionHistoryEntry>>;
    /// Every approved exception of every boundary that has not expired at `now`.
    async fn exceptions_in_force(&self, now: &str) -> Result<Vec<ExceptionRecord>>;
    /// Replaces what is installed in `cluster` (the reconciler, after a successful pass).
    async fn replace_exception_installs(
        &self,
        cluster: &str,
        installs: Vec<ExceptionInstall>,
    ) -> Result<()>;
    /// Where the boundary's exceptions are installed.
    async fn exception_installs(&self, boundary: &str) -> Result<Vec<ExceptionInstall>>;
    /// What is installed in `cluster`.
    async fn exception_installs_in(&self, cluster: &str) -> Result<Vec<ExceptionInstall>>;

    // ---- resources ----
    /// Checks in order: boundary exists (`NotFound`), name free (`Conflict`), then, with a
    /// guard, reads every policy of the boundary (`PolicyUnavailable` if that fails) and runs
    /// the guard (`Vetoed`), then writes. Returns the record.
    ///
    /// With a `deadline`, everything before the commit (waiting for the write lock, a
    /// connection, the reads, the guard, the writes) must finish by then, and the deadline is
    /// checked once more just before the commit: `Timeout`, and nothing is written, when it
    /// has passed. The commit itself is not cut short: its outcome is the answer.
    async fn create_resource(
        &self,
        resource: NewResource,
        guard: Option<Guard>,
        deadline: Option<Instant>,
    ) -> Result<ResourceRecord>;
    async fn get_resource(&self, key: &ResourceKey) -> Result<ResourceRecord>;
    async fn list_resources(
        &self,
        boundary: &str,
        query: &ResourceQuery,
    ) -> Result<Page<ResourceRecord>>;
    /// How many of the boundary's resources name each set of plans, by type and plans, read
    /// from an index (not from the resources); `NotFound` without the boundary. With
    /// `ResourceQuery::plans`, a group's resources are then read a page at a time.
    async fn plan_groups(&self, boundary: &str) -> Result<Vec<PlanGroup>>;
    /// Reads the current record (`NotFound`), checks `if_match` (`PreconditionFailed`), runs
    /// the editor, and, if the edit carries a guard, reads the policies and runs it, all in
    /// one transaction serialised against policy changes of the boundary. `deadline` as for
    /// `create_resource`.
    async fn update_resource(
        &self,
        key: &ResourceKey,
        if_match: Option<&str>,
        editor: Editor,
        deadline: Option<Instant>,
    ) -> Result<ResourceRecord>;
    async fn delete_resource(&self, key: &ResourceKey, if_match: Option<&str>) -> Result<()>;
    /// Where the boundary's workloads can run, in one read: each attached cluster with each of
    /// the boundary's namespaces in it (`None` when it has none there). Empty for a boundary
    /// that does not exist.
    async fn placements(&self, boundary: &str) -> Result<Vec<(String, Option<String>)>>;
    /// Every workload placed in `cluster`, of every boundary (the reconciler's read).
    async fn resources_in_cluster(&self, cluster: &str) -> Result<Vec<ResourceRecord>>;
    /// Sets what the cluster says about a resource (written by the reconciler only; neither
    /// its etag nor its history changes). A resource that is gone is left alone. Answers
    /// whether the status changed.
    async fn set_resource_status(&self, key: &ResourceKey, status: &str) -> Result<bool>;

    // ---- uploaded code ----
    // An upload is written in chunks, each in a transaction of its own, and then stored (its
    // row, counted against the boundary's limit) in one more: only a stored upload exists.
    // Chunks of an upload that is not stored are invisible, and are deleted by
    // `discard_upload` (a failed upload) or `delete_orphan_upload_chunks` (the sweeper).
    /// Writes chunk `seq` (from 0) of upload `id` of the boundary (`Conflict` when that chunk
    /// is written, or the upload is stored, already).
    async fn put_upload_chunk(
        &self,
        boundary: &str,
        id: &str,
        seq: i64,
        content: &[u8],
    ) -> Result<()>;
    /// Stores an upload whose chunks are written, counting `counted_upload_bytes(size)`
    /// against the boundary's `limit`: `NotFound` without the boundary, `UploadQuota` when
    /// the boundary's uploads would count more than `limit`, `Conflict` when it is stored
    /// already, `Corrupt` when a chunk is missing; nothing is written on any of them.
    async fn store_upload(&self, upload: NewUpload, limit: u64) -> Result<()>;
    /// A stored upload (`NotFound` otherwise).
    async fn get_upload(&self, boundary: &str, id: &str) -> Result<UploadRecord>;
    /// Chunk `seq` of a stored upload; `None` past its last (and for an upload not stored).
    async fn upload_chunk(&self, boundary: &str, id: &str, seq: i64) -> Result<Option<Vec<u8>>>;
    /// What the boundary's stored uploads count against its limit, in bytes.
    async fn upload_usage(&self, boundary: &str) -> Result<u64>;
    /// Deletes at most `max` chunks of an upload that was never stored; how many (0 when none
    /// is left, or the upload is stored).
    async fn discard_upload(&self, boundary: &str, id: &str, max: usize) -> Result<u64>;
    /// Deletes at most `max` stored uploads that no resource names and that were made or
    /// last named (see `NewResource::upload`) before `named_before` (RFC 3339 UTC, as `now`
    /// writes it), taking them off their boundaries' usage; how many. Their chunks are left
    /// to `delete_orphan_upload_chunks`.
    async fn delete_unnamed_uploads(&self, named_before: &str, max: usize) -> Result<u64>;
    /// Deletes at most `max` chunks written before `written_before` that belong to no stored
    /// upload; how many.
    async fn delete_orphan_upload_chunks(&self, written_before: &str, max: usize) -> Result<u64>;

    // ---- committed history (all boundaries share one sequence) ----
    async fn list_changes(&self, boundary: &str) -> Result<Vec<ChangeRecord>>;
    /// History retention: deletes up to `batch` of the oldest policy-history rows, up to
    /// `batch` of the oldest exception-history rows and up to `batch` of the oldest change rows
    /// made before `before` (RFC 3339), each in a short transaction of its own; answers how
    /// many rows went (0: nothing older is left). The newest history entry of each policy and
    /// each exception always stays.
    async fn prune_history(&self, before: &str, batch: u32) -> Result<u64>;

    // ---- tokens ----
    async fn create_token(&self, token: TokenRecord) -> Result<()>;
    /// Creates `token` only if the store holds no token at all, under a database-wide lock so
    /// that two replicas starting together make one. `true` when it was created.
    async fn bootstrap_admin_token(&self, token: TokenRecord) -> Result<bool>;
    async fn token_by_secret_hash(&self, secret_sha256: &str) -> Result<TokenRecord>;
    /// All tokens, or those of one boundary; by creation time.
    async fn list_tokens(&self, boundary: Option<&str>) -> Result<Vec<TokenRecord>>;
    async fn get_token(&self, id: &str) -> Result<TokenRecord>;
    /// `Conflict` when `id` is the last admin token that has not expired: with none left, no
    /// one could manage tokens or clusters again.
    async fn delete_token(&self, id: &str) -> Result<()>;

    // ---- portal sessions ----
    /// Records that the portal session `id` ended (signed out) and is refused until it would
    /// have expired anyway at `expires_at` (RFC 3339, as [`now`] writes it); ended sessions
    /// past that are forgotten.
    async fn end_session(&self, id: &str, expires_at: &str) -> Result<()>;
    /// Whether the portal session `id` ended ([`Store::end_session`]).
    async fn session_ended(&self, id: &str) -> Result<bool>;

    // ---- clusters (platform-level) and their attachment to boundaries ----
    /// Creates or replaces the credentials; `true` when created.
    /// Creates the cluster or replaces its credentials; `reserved` (when given) replaces the
    /// names reserved besides `default` and `kube-*` (SPEC 3.4 v3.2). `true` when created.
    async fn put_cluster(
        &self,
        name: &str,
        kubeconfig_sealed: &[u8],
        reserved: Option<&[String]>,
    ) -> Result<bool>;
    async fn get_cluster(&self, name: &str) -> Result<ClusterRecord>;
    async fn list_clusters(&self) -> Result<Vec<ClusterRecord>>;
    async fn delete_cluster(&self, name: &str) -> Result<()>;
    async fn set_cluster_status(
        &self,
        name: &str,
        kubernetes_version: Option<&str>,
        admission_enforced: Option<bool>,
        admission_reason: Option<&str>,
    ) -> Result<()>;
    /// Counts `count` more API server starts noticed in the cluster, the last one now.
    async fn add_apiserver_restarts(&self, name: &str, count: i64) -> Result<()>;
    /// Counts one more repair in the cluster (something palisade owns, changed by someone else
    /// and put back); `what` says what, in words, and is kept as the last one.
    async fn record_repair(&self, name: &str, what: &str) -> Result<()>;
    /// Records the admission layout in use in the cluster (`per-policy`, `per-boundary`,
    /// `shared`) and why, in words (e.g. `212 boundaries`); the cluster's `updated_at` stays.
    /// `NotFound` when the cluster is unknown.
    async fn set_cluster_layout(&self, name: &str, layout: &str, reason: &str) -> Result<()>;
    /// `true` when newly attached. `NotFound` when the boundary or the cluster is unknown.
    async fn attach_cluster(&self, boundary: &str, cluster: &str) -> Result<bool>;
    async fn detach_cluster(&self, boundary: &str, cluster: &str) -> Result<()>;
    /// Clusters attached to the boundary, by name.
    async fn boundary_clusters(&self, boundary: &str) -> Result<Vec<ClusterRecord>>;

    // ---- the reconciler's state ----
    /// This installation's id: the one stored, or `candidate` when none is (stored for good).
    async fn installation_id(&self, candidate: &str) -> Result<String>;
    /// The check value of the encryption key the store's sealed values were sealed with: the
    /// one stored, or `record` when none is (stored for good); `None` when none is stored and
    /// none was given.
    async fn encryption_key_check(&self, record: Option<&str>) -> Result<Option<String>>;
    /// Records `value` as the encryption key's check value, in place of any other.
    async fn replace_encryption_key_check(&self, value: &str) -> Result<()>;
    /// Records (or, with `None`, clears) the reconciler's last error for the cluster.
    async fn set_cluster_error(&self, name: &str, error: Option<&str>) -> Result<()>;
    /// Records a namespace labelled for the boundary, with its uid in the cluster; `true` when
    /// new. `NotFound` when the boundary or cluster is unknown or the cluster is not attached to
    /// the boundary; `Conflict` when another boundary holds it.
    async fn put_namespace(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
        uid: Option<&str>,
    ) -> Result<bool>;
    /// Records the uid of a namespace recorded without one (SPEC 3.4 v3.2: learnt once from
    /// the cluster); `false` when there was nothing to learn.
    async fn learn_namespace_uid(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
        uid: &str,
    ) -> Result<bool>;
    /// Marks the namespace deleted in the cluster (or made again by someone else); `false`
    /// when it was already.
    async fn namespace_gone(&self, boundary: &str, cluster: &str, name: &str) -> Result<bool>;
    async fn get_namespace(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
    ) -> Result<NamespaceRecord>;
    /// The boundary's namespaces, by cluster and name.
    async fn list_namespaces(&self, boundary: &str) -> Result<Vec<NamespaceRecord>>;
    /// Every boundary's namespaces in the cluster.
    async fn cluster_namespaces(&self, cluster: &str) -> Result<Vec<NamespaceRecord>>;
    async fn delete_namespace(&self, boundary: &str, cluster: &str, name: &str) -> Result<()>;
    /// Replaces the statuses of the boundary's policies in the cluster.
    async fn replace_policy_statuses(
        &self,
        cluster: &str,
        boundary: &str,
        statuses: Vec<PolicyStatusRecord>,
    ) -> Result<()>;
    /// The boundary's policy statuses, by policy and cluster.
    async fn policy_statuses(&self, boundary: &str) -> Result<Vec<PolicyStatusRecord>>;
    /// Replaces the audit reports of the boundary's policies in the cluster.
    async fn replace_audit_reports(
        &self,
        cluster: &str,
        boundary: &str,
        reports: Vec<AuditRecord>,
    ) -> Result<()>;
    /// The audit reports of one policy, by cluster.
    async fn audit_reports(&self, boundary: &str, policy: &str) -> Result<Vec<AuditRecord>>;
    /// A counter bumped after every committed change the reconciler must act on (policies,
    /// clusters, attachments, namespaces, boundary deletions) and whenever changes may have
    /// been missed (PostgreSQL: the LISTEN connection was re-established). SQLite: an
    /// in-process channel; PostgreSQL: LISTEN/NOTIFY, so every replica hears every change.
    async fn subscribe(&self) -> Result<tokio::sync::watch::Receiver<u64>>;
    /// Joins the fleet of `installation`'s reconcilers as `replica` (see [`Lease`]); `None`
    /// while this replica may not reconcile (SQLite: another process serving the file does;
    /// PostgreSQL: a replica of an earlier version holds the installation's lease).
    async fn join_fleet(&self, installation: &str, replica: &str) -> Result<Option<Lease>>;
    /// Which replica reconciles each cluster of `installation` now, by cluster name; a
    /// cluster nobody holds is absent (SQLite: only what this process holds is known).
    async fn cluster_holders(
        &self,
        installation: &str,
    ) -> Result<std::collections::BTreeMap<String, String>>;
}

/// A store shared by the server's handlers.
pub type SharedStore = Arc<dyn Store>;

/// The backend a database URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Which backend `url` names: `postgres://` or `postgresql://` PostgreSQL; a `sqlite:` URL or
/// a plain path SQLite. Anything else that starts with a URL scheme (`<scheme>:`, two
/// characters at least, so that `C:` stays a path) is `UnsupportedUrl`, naming the scheme
/// only. Schemes compare case-insensitively.
pub fn backend_of(url: &str) -> Result<Backend> {
    let Some((scheme, rest)) = url.split_once(':') else {
        return Ok(Backend::Sqlite);
    };
    let is_scheme = scheme.len() >= 2
        && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !is_scheme {
        return Ok(Backend::Sqlite);
    }
    let scheme = scheme.to_ascii_lowercase();
    match scheme.as_str() {
        "sqlite" => Ok(Backend::Sqlite),
        "postgres" | "postgresql" if rest.starts_with("//") => Ok(Backend::Postgres),
        "postgres" | "postgresql" => Err(StoreError::UnsupportedUrl(format!("{scheme}:"))),
        _ => Err(StoreError::UnsupportedUrl(scheme)),
    }
}

/// Opens the store a database URL names (see `backend_of`) and applies its migrations:
/// `sqlite://PATH`, `sqlite:PATH` or a plain path (created when absent, mode 0600), or
/// `postgres://...`. An unsupported URL opens and creates nothing.
pub async fn connect(url: &str) -> Result<SharedStore> {
    match backend_of(url)? {
        Backend::Postgres => Ok(Arc::new(postgres::PostgresStore::connect(url).await?)),
        Backend::Sqlite => Ok(Arc::new(sqlite::SqliteStore::connect(url).await?)),
    }
}

/// The etag of a stored document: the first 16 hex digits of SHA-256 over its parts.
pub fn etag_of(parts: &[&str]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(&hasher.finalize()[..8])
}

/// Now, as RFC 3339 UTC with milliseconds (the format of every stored timestamp).
pub fn now() -> String {
    timestamp(std::time::SystemTime::now())
}

/// `time` as every stored timestamp is written (RFC 3339 UTC with milliseconds), so that
/// timestamps compare as text.
pub fn timestamp(time: std::time::SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(time).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Whether an `If-Match` value matches an etag: `*`, the bare etag, or the quoted etag
/// (with or without a `W/` prefix).
pub fn if_match_matches(if_match: &str, etag: &str) -> bool {
    if_match.split(',').map(str::trim).any(|candidate| {
        candidate == "*"
            || candidate == etag
            || candidate.trim_start_matches("W/").trim_matches('"') == etag
    })
}
