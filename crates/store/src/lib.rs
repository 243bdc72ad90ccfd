//! The storage port of palisade: what the server needs from a database, as one trait, and the
//! two backends that implement it (SQLite, the default, and PostgreSQL for several replicas).
//!
//! Records keep their documents as JSON text: the store never interprets a policy. Decoding is
//! the caller's job, so a stored policy that cannot be decoded is noticed where the decision is
//! made (and answered with 503, never with "allow").
//!
//! Every write that must be checked against the boundary's policies (a resource create or a
//! plan move) runs its check *inside* the write's transaction, serialised against policy
//! changes of the same boundary: SQLite takes the database write lock up front
//! (`BEGIN IMMEDIATE`), PostgreSQL locks the boundary's row (`SELECT ... FOR UPDATE`) on both
//! the resource path and the policy path. The check is a plain closure (`Guard`), so the store
//! stays ignorant of policy semantics.

mod ops;
pub mod postgres;
mod sql;
pub mod sqlite;

use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

/// Why a guard refused a write; the caller downcasts it back to its own error type.
pub type Veto = Box<dyn std::error::Error + Send + Sync>;

/// A check run inside a write's transaction with every policy of the boundary, as stored.
/// `Ok` carries warnings to hand back to the caller (e.g. audit-mode would-be denials).
pub type Guard = Box<dyn FnOnce(&[PolicyRecord]) -> Result<Vec<String>, Veto> + Send>;

/// Computes the new state of a resource from its current state, inside the transaction.
/// `Edit::guard` is `Some` when the change moves a plan and must be checked.
pub type Editor = Box<dyn FnOnce(&ResourceRecord) -> Result<Edit, Veto> + Send>;

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
    PolicyUnavailable(#[source] sqlx::Error),
    /// A guarded write's deadline passed before its commit began. Nothing was written (once a
    /// commit is under way, its outcome is the answer, however late).
    #[error("the store did not answer before the deadline; nothing was written")]
    Timeout,
    /// A guard or editor refused the write. Nothing was written.
    #[error("refused")]
    Vetoed(Veto),
    /// The database failed or is unreachable.
    #[error("database error")]
    Database(#[from] sqlx::Error),
    #[error("migration failed")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A database URL that names no supported store (the scheme only: never the URL, which
    /// may hold a password).
    #[error("unsupported scheme '{0}' (use postgres://, postgresql://, sqlite: or a file path)")]
    UnsupportedUrl(String),
    /// A stored row holds something the store cannot read back (e.g. a bad timestamp).
    #[error("corrupt row: {0}")]
    Corrupt(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundaryRecord {
    pub name: String,
    pub display_name: Option<String>,
    /// RFC 3339, UTC.
    pub created_at: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyRecord {
    pub boundary: String,
    pub name: String,
    /// The policy document's `spec`, as JSON text (canonical: written by the server).
    pub spec_json: String,
    /// The policy document's `metadata.labels` and `annotations`, as a JSON object text
    /// `{"labels": {...}, "annotations": {...}}` (kept for GitOps tools).
    pub metadata_json: String,
    /// Opaque version: a hash of `spec_json` and `metadata_json`.
    pub etag: String,
    pub created_at: String,
    pub updated_at: String,
    pub updated_by: String,
}

/// A policy to write. `if_match`: the etag the caller saw (412 otherwise).
#[derive(Clone, Debug)]
pub struct PolicyWrite {
    pub boundary: String,
    pub name: String,
    pub spec_json: String,
    pub metadata_json: String,
    pub if_match: Option<String>,
    /// `If-None-Match: *`: create only; an existing policy is `PreconditionFailed`.
    pub create_only: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteAction {
    Created,
    Configured,
    Unchanged,
}

impl WriteAction {
    pub fn as_str(self) -> &'static str {
        match self {
            WriteAction::Created => "created",
            WriteAction::Configured => "configured",
            WriteAction::Unchanged => "unchanged",
        }
    }
}

/// One entry of a policy's history: who changed it, when, and the spec before and after
/// (`None` before its creation and after its deletion).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyHistoryEntry {
    pub seq: i64,
    pub actor: String,
    pub at: String,
    pub before_json: Option<String>,
    pub after_json: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceRecord {
    pub boundary: String,
    pub resource_type: String,
    pub name: String,
    /// The resource as the API shows it (type, name, plan or components, image, labels, ...).
    pub body_json: String,
    pub etag: String,
    pub created_at: String,
    pub updated_at: String,
}

#[derive(Clone, Debug)]
pub struct NewResource {
    pub boundary: String,
    pub resource_type: String,
    pub name: String,
    pub body_json: String,
}

/// The result of an `Editor`: the resource's new body and, for a plan move, the check.
pub struct Edit {
    pub body_json: String,
    pub guard: Option<Guard>,
}

impl std::fmt::Debug for Edit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edit")
            .field("body_json", &self.body_json)
            .field("guarded", &self.guard.is_some())
            .finish()
    }
}

/// The identity of a resource inside a boundary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceKey {
    pub boundary: String,
    pub resource_type: String,
    pub name: String,
}

/// A page of a list: `next` is the opaque continue token when more items follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next: Option<String>,
}

#[derive(Clone, Debug, Default)]
pub struct ResourceQuery {
    pub resource_type: Option<String>,
    /// At most this many items (the server caps it).
    pub limit: usize,
    /// The continue token of the previous page.
    pub after: Option<String>,
}

/// An API token. Only the SHA-256 of the secret is stored (hex).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenRecord {
    pub id: String,
    pub secret_sha256: String,
    /// `admin`, `boundary-admin` or `developer`.
    pub role: String,
    pub boundary: Option<String>,
    pub created_at: String,
    pub expires_at: Option<String>,
    pub created_by: String,
}

/// A committed change in a boundary, in commit order (one sequence per store). The server's
/// race test replays these to prove that no create or plan move committed past a policy that
/// disallowed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChangeRecord {
    pub seq: i64,
    pub boundary: String,
    /// `policy.put`, `policy.delete`, `resource.create`, `resource.update`, `resource.delete`.
    pub kind: String,
    /// Policy name, or `<type>/<name>` for a resource.
    pub subject: String,
    /// The policy spec or resource body after the change (`None` for deletes).
    pub body_json: Option<String>,
    pub at: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterRecord {
    pub name: String,
    /// Encrypted by the server; the store never sees the plain kubeconfig.
    pub kubeconfig_sealed: Vec<u8>,
    pub kubernetes_version: Option<String>,
    pub admission_enforced: Option<bool>,
    pub admission_reason: Option<String>,
    /// Why the reconciler's last attempt at this cluster failed (`None` after a success).
    pub last_error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// A namespace palisade labelled for a boundary (`palisade.dev/boundary`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceRecord {
    pub cluster: String,
    pub name: String,
    pub boundary: String,
    pub created_at: String,
}

/// A policy's install status in one cluster, as the reconciler last saw it (SPEC 3.4):
/// `installed`, `enforced`, `error: <reason>` or `not enforced: <reason>`; `policy_etag` is
/// the version it is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyStatusRecord {
    pub boundary: String,
    pub policy: String,
    pub cluster: String,
    pub policy_etag: String,
    pub status: String,
    pub updated_at: String,
}

/// The right to run this installation's reconciler. PostgreSQL: a session-level advisory lock
/// held on a connection of its own, lost when that connection is; SQLite: always held (one
/// process owns the file).
#[derive(Debug)]
pub struct Lease {
    connection: Option<tokio::sync::Mutex<sqlx::PgConnection>>,
}

impl Lease {
    pub(crate) fn local() -> Self {
        Lease { connection: None }
    }

    pub(crate) fn on(connection: sqlx::PgConnection) -> Self {
        Lease {
            connection: Some(tokio::sync::Mutex::new(connection)),
        }
    }

    /// Whether the lease still holds (PostgreSQL: its connection answers within 5 s).
    pub async fn held(&self) -> bool {
        use sqlx::Connection;
        let Some(connection) = &self.connection else {
            return true;
        };
        let mut connection = connection.lock().await;
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(5), connection.ping()).await,
            Ok(Ok(()))
        )
    }
}

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
    /// Oldest first. `NotFound` when neither the policy nor any history of it exists.
    async fn policy_history(&self, boundary: &str, name: &str) -> Result<Vec<PolicyHistoryEntry>>;

    // ---- resources ----
    /// Checks in order: boundary exists (`NotFound`), name free (`Conflict`), then, with a
    /// guard, reads every policy of the boundary (`PolicyUnavailable` if that fails) and runs
    /// the guard (`Vetoed`), then writes. Returns the record and the guard's warnings.
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
    ) -> Result<(ResourceRecord, Vec<String>)>;
    async fn get_resource(&self, key: &ResourceKey) -> Result<ResourceRecord>;
    async fn list_resources(
        &self,
        boundary: &str,
        query: &ResourceQuery,
    ) -> Result<Page<ResourceRecord>>;
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
    ) -> Result<(ResourceRecord, Vec<String>)>;
    async fn delete_resource(&self, key: &ResourceKey, if_match: Option<&str>) -> Result<()>;

    // ---- committed history (all boundaries share one sequence) ----
    async fn list_changes(&self, boundary: &str) -> Result<Vec<ChangeRecord>>;

    // ---- tokens ----
    async fn create_token(&self, token: TokenRecord) -> Result<()>;
    /// Creates `token` only if the store holds no token at all, under a database-wide lock so
    /// that two replicas starting together make one. `true` when it was created.
    async fn bootstrap_admin_token(&self, token: TokenRecord) -> Result<bool>;
    async fn token_by_secret_hash(&self, secret_sha256: &str) -> Result<TokenRecord>;
    /// All tokens, or those of one boundary; by creation time.
    async fn list_tokens(&self, boundary: Option<&str>) -> Result<Vec<TokenRecord>>;
    async fn get_token(&self, id: &str) -> Result<TokenRecord>;
    async fn delete_token(&self, id: &str) -> Result<()>;

    // ---- clusters (platform-level) and their attachment to boundaries ----
    /// Creates or replaces the credentials; `true` when created.
    async fn put_cluster(&self, name: &str, kubeconfig_sealed: &[u8]) -> Result<bool>;
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
    /// `true` when newly attached. `NotFound` when the boundary or the cluster is unknown.
    async fn attach_cluster(&self, boundary: &str, cluster: &str) -> Result<bool>;
    async fn detach_cluster(&self, boundary: &str, cluster: &str) -> Result<()>;
    /// Clusters attached to the boundary, by name.
    async fn boundary_clusters(&self, boundary: &str) -> Result<Vec<ClusterRecord>>;

    // ---- the reconciler's state ----
    /// This installation's id: the one stored, or `candidate` when none is (stored for good).
    async fn installation_id(&self, candidate: &str) -> Result<String>;
    /// Records (or, with `None`, clears) the reconciler's last error for the cluster.
    async fn set_cluster_error(&self, name: &str, error: Option<&str>) -> Result<()>;
    /// Records a namespace labelled for the boundary; `true` when new. `NotFound` when the
    /// boundary or cluster is unknown or the cluster is not attached to the boundary;
    /// `Conflict` when another boundary holds it.
    async fn put_namespace(&self, boundary: &str, cluster: &str, name: &str) -> Result<bool>;
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
    /// A counter bumped after every committed change the reconciler must act on (policies,
    /// clusters, attachments, namespaces, boundary deletions) and whenever changes may have
    /// been missed (PostgreSQL: the LISTEN connection was re-established). SQLite: an
    /// in-process channel; PostgreSQL: LISTEN/NOTIFY, so every replica hears every change.
    async fn subscribe(&self) -> Result<tokio::sync::watch::Receiver<u64>>;
    /// Tries to take the reconciler lease of `installation`; `None` while another replica
    /// holds it.
    async fn try_lease(&self, installation: &str) -> Result<Option<Lease>>;
}

/// The `settings` key of the installation id.
pub(crate) const INSTALLATION_KEY: &str = "installation_id";

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
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
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
