//! The records the store reads and writes, and the closures that check a write inside its
//! transaction. Records keep their documents as JSON text: the store never interprets them.

use crate::Veto;

/// A check run inside a write's transaction against every policy of the boundary, as stored:
/// it allows the write or vetoes it. What else it learns for its caller (e.g. audit-mode
/// would-be denials) it keeps to itself: the store does not interpret it.
pub type Guard = Box<dyn Check>;

/// What a [`Guard`] does. The store reads the boundary's [`PoliciesVersion`] with its lock and
/// first asks [`Check::known`]; only when that has no answer does it read the policies and
/// call [`Check::check`]. A closure over the policies is a `Check` that never knows ahead.
pub trait Check: Send {
    /// The answer for the policies the boundary had when its version was `version`, if this
    /// check has seen them before (it then must not need them again).
    fn known(&self, _boundary: &str, _version: PoliciesVersion) -> Option<Result<(), Veto>> {
        None
    }

    /// The version of `boundary`'s policies this check last saw, if any: a store that can
    /// write only if the boundary is still at that version (PostgreSQL's one-statement
    /// create) asks [`Check::known`] for it first and, when that allows, skips the read.
    fn latest(&self, _boundary: &str) -> Option<PoliciesVersion> {
        None
    }

    /// The answer for `policies` and `exceptions`, every policy and exception of `boundary`
    /// as stored at `version` (exceptions change the version too).
    fn check(
        self: Box<Self>,
        boundary: &str,
        version: PoliciesVersion,
        policies: &[PolicyRecord],
        exceptions: &[ExceptionRecord],
    ) -> Result<(), Veto>;
}

impl<F> Check for F
where
    F: FnOnce(&[PolicyRecord]) -> Result<(), Veto> + Send,
{
    fn check(
        self: Box<Self>,
        _boundary: &str,
        _version: PoliciesVersion,
        policies: &[PolicyRecord],
        _exceptions: &[ExceptionRecord],
    ) -> Result<(), Veto> {
        (*self)(policies)
    }
}

/// A number the database changes with every write to a boundary's policies (a trigger on the
/// policies table, so a row written by any means changes it too). Two reads of one boundary
/// that see the same version saw the same policies; a boundary created anew under an old name
/// starts at a random number, so it does not meet the numbers of the one before.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PoliciesVersion(pub i64);

/// Computes the new state of a resource from its current state, inside the transaction.
/// `Edit::guard` is `Some` when the change moves a plan and must be checked.
pub type Editor = Box<dyn FnOnce(&ResourceRecord) -> Result<Edit, Veto> + Send>;

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
    /// 1, 2, …: every change of the policy makes a new one (SPEC 8).
    pub version: i64,
    /// How far the staged rollout of this version has come (SPEC 8), as the application
    /// wrote it; `None`: no rollout, this version is in force everywhere.
    pub rollout_json: Option<String>,
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
    /// The earlier version this write restores (a rollback, SPEC 8), for its history entry.
    pub restores: Option<i64>,
    /// Decides the saved version's rollout (`rollout_json`) from the policy as stored before,
    /// inside the write's transaction; `None`: the saved version has no rollout.
    pub rollout: Option<RolloutDecision>,
    /// A write of the content stored already makes a new version all the same (a rollback to
    /// the current spec while another version is in force somewhere, SPEC 8); otherwise it is
    /// `Unchanged`.
    pub rewrite_identical: bool,
}

/// What a save's rollout becomes, decided by the application from the policy as stored before
/// the save (`None` for a new one) and the version the save makes: the saved `rollout_json`.
/// Run inside the write's transaction, so that two saves cannot both start from the same
/// stored rollout.
#[derive(Clone)]
pub struct RolloutDecision(pub std::sync::Arc<DecideRollout>);

/// A move of a policy's staged rollout (SPEC 8: a promotion, a pause, an abort, the counters
/// a stage starts from), made only where the policy is still at `version` and its rollout still
/// `expected` (the `rollout_json` read).
#[derive(Clone, Copy, Debug)]
pub struct RolloutMove<'a> {
    pub version: i64,
    pub expected: Option<&'a str>,
    /// The rollout after the move.
    pub rollout_json: Option<&'a str>,
    /// What happened, in words, for the policy's history; `None`: no entry.
    pub event: Option<&'a str>,
    /// Who moved it, for the history.
    pub actor: &'a str,
}

/// The function of a [`RolloutDecision`].
pub type DecideRollout = dyn Fn(Option<&PolicyRecord>, i64) -> Option<String> + Send + Sync;

impl std::fmt::Debug for RolloutDecision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RolloutDecision")
    }
}

impl PolicyWrite {
    /// A write with no precondition that restores nothing: what loading a set of policies
    /// (a seed, a benchmark's fill) makes of each one.
    pub fn unconditional(
        boundary: impl Into<String>,
        name: impl Into<String>,
        spec_json: impl Into<String>,
        metadata_json: impl Into<String>,
    ) -> Self {
        Self {
            boundary: boundary.into(),
            name: name.into(),
            spec_json: spec_json.into(),
            metadata_json: metadata_json.into(),
            if_match: None,
            create_only: false,
            restores: None,
            rollout: None,
            rewrite_identical: false,
        }
    }
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
    /// The version the change saved; `None` for a deletion.
    pub version: Option<i64>,
    /// The earlier version a rollback restored; `None` for any other change.
    pub restored_version: Option<i64>,
    /// A move of the version's staged rollout (SPEC 8), in words: `rollout promoted to stage
    /// 2/3`; `None` for a save or a deletion.
    pub event: Option<String>,
    pub before_json: Option<String>,
    pub after_json: Option<String>,
}

/// A stored exception (SPEC 7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptionRecord {
    pub boundary: String,
    pub name: String,
    /// The policy it excepts (also inside `spec_json`; a column for lookups).
    pub policy: String,
    /// The document's `spec`, as JSON text (canonical: written by the server).
    pub spec_json: String,
    /// When it ends: RFC 3339 UTC with milliseconds, as every stored time.
    pub expires_at: String,
    pub etag: String,
    /// `requested` (applies nothing) or `approved`.
    pub state: String,
    pub requested_by: String,
    pub approved_by: Option<String>,
    pub approved_at: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub updated_by: String,
}

/// What an exception write saves.
#[derive(Clone, Debug)]
pub struct ExceptionWrite {
    pub boundary: String,
    pub name: String,
    pub policy: String,
    pub spec_json: String,
    pub expires_at: String,
    /// Approved by the writer (an admin or boundary-admin), or a request (a developer).
    pub approve: bool,
    pub if_match: Option<String>,
    /// Create only: an exception of that name is `Conflict` (nothing is replaced).
    pub create_only: bool,
    /// The most approved exceptions the boundary may hold; one more is `Conflict`.
    pub max_per_boundary: usize,
    /// The most pending requests the boundary may hold, apart from `max_per_boundary`; one
    /// more is `Conflict`.
    pub max_requests_per_boundary: usize,
}

/// Everything a reconcile pass works from, read at one moment ([`crate::Store::snapshot`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub clusters: Vec<ClusterRecord>,
    /// Every boundary, by name.
    pub boundaries: Vec<BoundarySnapshot>,
}

/// One boundary in a [`Snapshot`]: its policies, attached clusters (by name), namespaces and
/// exceptions, each in the order their own lists give.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BoundarySnapshot {
    pub boundary: BoundaryRecord,
    pub policies: Vec<PolicyRecord>,
    pub clusters: Vec<String>,
    pub namespaces: Vec<NamespaceRecord>,
    pub exceptions: Vec<ExceptionRecord>,
    /// The sequence number of the boundary's latest entry in the change log (a policy, an
    /// exception or a resource written), 0 before the first: a resource placed in a cluster
    /// changes it, so the reconciler can tell that the cluster's workloads need a pass.
    pub last_change: i64,
}

/// An exception to admission rules installed in a cluster, as the reconciler last wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptionInstall {
    pub cluster: String,
    pub boundary: String,
    pub exception: String,
    /// The exception's end when it was installed.
    pub expires_at: String,
    pub installed_at: String,
    /// What its probe found in the cluster, as an install status reads (`enforced`,
    /// `pending`, `not enforced: ...`, `error: ...`), or `installed` when nothing it matches
    /// could be probed there.
    pub status: String,
}

/// One entry of an exception's history: `put`, `approve` or `delete`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptionHistoryEntry {
    pub seq: i64,
    pub actor: String,
    pub at: String,
    pub action: String,
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
    /// The cluster a workload is placed in (SPEC 5); `None` for the other types.
    pub cluster: Option<String>,
    /// What that cluster last said about it (`deploying`, `running`, `rejected: ...`), written
    /// by the reconciler; `None` until it has acted.
    pub status: Option<String>,
}

#[derive(Clone, Debug)]
pub struct NewResource {
    pub boundary: String,
    pub resource_type: String,
    pub name: String,
    pub body_json: String,
    /// The cluster a workload is placed in: a write that has one (before or after) wakes the
    /// reconciler.
    pub cluster: Option<String>,
    /// The upload the body names (`upload`): it must be stored, and it is marked named now.
    pub upload: Option<String>,
}

impl NewResource {
    /// A resource placed in no cluster and naming no upload: what filling a boundary with
    /// plain bodies (a seed, a test, a benchmark) creates.
    pub fn unplaced(
        boundary: impl Into<String>,
        resource_type: impl Into<String>,
        name: impl Into<String>,
        body_json: impl Into<String>,
    ) -> Self {
        Self {
            boundary: boundary.into(),
            resource_type: resource_type.into(),
            name: name.into(),
            body_json: body_json.into(),
            cluster: None,
            upload: None,
        }
    }
}

/// The result of an `Editor`: the resource's new body and, for a plan move, the check.
pub struct Edit {
    pub body_json: String,
    pub guard: Option<Guard>,
    /// The cluster the edited workload is placed in (see `NewResource::cluster`).
    pub cluster: Option<String>,
    /// The upload the new body names (see `NewResource::upload`).
    pub upload: Option<String>,
}

/// Code uploaded for a build, as stored: what it is. Its content is read chunk by chunk
/// (`Store::upload_chunk`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UploadRecord {
    pub boundary: String,
    /// Opaque, made by the application.
    pub id: String,
    /// Hex SHA-256 of the content.
    pub sha256: String,
    /// The content's length in bytes.
    pub size: u64,
    pub created_at: String,
    /// When a resource last named it (a create or an update writing `upload`); `None` before.
    pub named_at: Option<String>,
}

/// An upload whose chunks (`0..chunks`) are written, to be stored (`Store::store_upload`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewUpload {
    pub boundary: String,
    pub id: String,
    /// Hex SHA-256 of the content.
    pub sha256: String,
    /// The content's length in bytes.
    pub size: u64,
    /// How many chunks were written.
    pub chunks: i64,
    pub created_at: String,
}

impl std::fmt::Debug for Edit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edit")
            .field("body_json", &self.body_json)
            .field("guarded", &self.guard.is_some())
            .field("cluster", &self.cluster)
            .field("upload", &self.upload)
            .finish()
    }
}

/// The identity of a resource inside a boundary.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
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
    /// Only the resources whose body names exactly these plans (a [`PlanGroup`]'s). With a
    /// `resource_type`, a page is one range of an index: it reads its own rows only.
    pub plans: Option<Vec<String>>,
}

/// How many of a boundary's resources of one type name one set of plans: each component's
/// when the body has a list of components, else its `plan`; distinct, in byte order (empty:
/// the body names none). A boundary's groups are counted without reading its resources.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanGroup {
    pub resource_type: String,
    pub plans: Vec<String>,
    pub resources: u64,
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
    /// API server starts the reconciler noticed, and when it saw the last.
    pub apiserver_restarts: i64,
    pub apiserver_restarted_at: Option<String>,
    /// Repairs the reconciler made in the cluster (what palisade owns there, changed by
    /// someone else and put back), the last one in words, and when.
    pub repairs: i64,
    pub last_repair: Option<String>,
    pub last_repair_at: Option<String>,
    /// The admission layout the reconciler uses in the cluster (`per-policy`, `per-boundary`,
    /// `shared`) and why, in words (e.g. `212 boundaries`); `None` until it has said.
    pub admission_layout: Option<String>,
    pub admission_layout_reason: Option<String>,
    /// Namespace names reserved in the cluster besides `default` and `kube-*` (SPEC 3.4 v3.2).
    pub reserved_namespaces: Vec<String>,
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
    /// The uid of the namespace palisade created or adopted (SPEC 3.4 v3.2); `None` in a record
    /// made before uids were recorded, until the reconciler learns it.
    pub uid: Option<String>,
    /// When the reconciler found it deleted in the cluster (or made again by someone else).
    pub gone_at: Option<String>,
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

/// What the last audit of a policy found in a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AuditRecord {
    pub boundary: String,
    pub policy: String,
    pub cluster: String,
    pub policy_etag: String,
    pub taken_at: String,
    /// Why the cluster could not be read; the counts are then 0.
    pub error: Option<String>,
    pub checked: i64,
    pub violations: i64,
    /// The findings as the JSON list the API answers (the store does not read it).
    pub findings_json: String,
}
