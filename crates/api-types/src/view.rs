//! The bodies of the API's answers (SPEC 4.1), one type each, shared by the server (which
//! serialises them), the portal (which renders them) and the CLI (which deserialises them).
//! With the `openapi` feature they also describe themselves for the OpenAPI document.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// What a policy is in one cluster (SPEC 3.4). On the wire: `pending`, `installed`,
/// `enforced`, `active (audit)`, `error: <reason>` or `not enforced: <reason>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstallStatus {
    /// The reconciler has not recorded the policy's current version in the cluster yet.
    Pending,
    /// Installed, with no namespace of the boundary to confirm enforcement in.
    Installed,
    /// Installed and confirmed by a server-side dry-run in a namespace of the boundary: the
    /// violating object was denied with the policy's message.
    Enforced,
    /// An audit-mode policy, installed and confirmed by a server-side dry-run: the violating
    /// object was admitted with the policy's warning. It denies nothing, so it is not
    /// `enforced`.
    AuditActive,
    /// Installing or confirming failed; palisade retries.
    Error(String),
    /// The cluster cannot enforce it (e.g. too old, or the API is not served).
    NotEnforced(String),
}

impl InstallStatus {
    /// Whether the status is one of the two failures.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            InstallStatus::Error(_) | InstallStatus::NotEnforced(_)
        )
    }
}

impl fmt::Display for InstallStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallStatus::Pending => f.write_str("pending"),
            InstallStatus::Installed => f.write_str("installed"),
            InstallStatus::Enforced => f.write_str("enforced"),
            InstallStatus::AuditActive => f.write_str("active (audit)"),
            InstallStatus::Error(reason) => write!(f, "error: {reason}"),
            InstallStatus::NotEnforced(reason) => write!(f, "not enforced: {reason}"),
        }
    }
}

/// A text that is no install status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not an install status (pending, installed, enforced, active (audit), error: ..., not enforced: ...)"
)]
pub struct UnknownInstallStatus(pub String);

impl FromStr for InstallStatus {
    type Err = UnknownInstallStatus;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "pending" => Ok(InstallStatus::Pending),
            "installed" => Ok(InstallStatus::Installed),
            "enforced" => Ok(InstallStatus::Enforced),
            "active (audit)" => Ok(InstallStatus::AuditActive),
            _ => {
                if let Some(reason) = text.strip_prefix("error: ") {
                    Ok(InstallStatus::Error(reason.to_owned()))
                } else if let Some(reason) = text.strip_prefix("not enforced: ") {
                    Ok(InstallStatus::NotEnforced(reason.to_owned()))
                } else {
                    Err(UnknownInstallStatus(text.to_owned()))
                }
            }
        }
    }
}

impl Serialize for InstallStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for InstallStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// What a workload is in its cluster (SPEC 5). On the wire: `deploying`, `running`,
/// `rejected: <message>`, `degraded: <n>/<m> replicas; pods rejected: <message>`,
/// `build rejected: <message>`, `build failed: <reason>` or `not deployed: <reason>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorkloadStatus {
    /// Written to its cluster (or about to be), not yet running as asked.
    Deploying,
    /// Every replica asked for is available and up to date.
    Running,
    /// Kubernetes denied the workload object itself, with this message.
    Rejected(String),
    /// The workload was admitted but Kubernetes denies its pods (the owner's `FailedCreate`
    /// events): `available` of `desired` replicas run.
    Degraded {
        available: i32,
        desired: i32,
        message: String,
    },
    /// Kubernetes denied the build Job, or its pods, with this message.
    BuildRejected(String),
    /// The build Job failed, for this reason.
    BuildFailed(String),
    /// palisade did not deploy it, for this reason (e.g. nowhere to run it).
    NotDeployed(String),
}

/// How a workload status reads at a glance: what a colour or a symbol shows beside its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tone {
    /// Running as asked.
    Ok,
    /// On its way: nothing is wrong yet.
    Moving,
    /// Running, but short of what was asked.
    Degraded,
    /// Denied or failed: it will not run until something changes.
    Failed,
}

impl WorkloadStatus {
    pub fn tone(&self) -> Tone {
        match self {
            WorkloadStatus::Running => Tone::Ok,
            WorkloadStatus::Deploying => Tone::Moving,
            WorkloadStatus::Degraded { .. } => Tone::Degraded,
            WorkloadStatus::Rejected(_)
            | WorkloadStatus::BuildRejected(_)
            | WorkloadStatus::BuildFailed(_)
            | WorkloadStatus::NotDeployed(_) => Tone::Failed,
        }
    }
}

const DEGRADED: &str = "degraded: ";
const PODS_REJECTED: &str = " replicas; pods rejected: ";

impl fmt::Display for WorkloadStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkloadStatus::Deploying => f.write_str("deploying"),
            WorkloadStatus::Running => f.write_str("running"),
            WorkloadStatus::Rejected(message) => write!(f, "rejected: {message}"),
            WorkloadStatus::Degraded {
                available,
                desired,
                message,
            } => write!(f, "{DEGRADED}{available}/{desired}{PODS_REJECTED}{message}"),
            WorkloadStatus::BuildRejected(message) => write!(f, "build rejected: {message}"),
            WorkloadStatus::BuildFailed(reason) => write!(f, "build failed: {reason}"),
            WorkloadStatus::NotDeployed(reason) => write!(f, "not deployed: {reason}"),
        }
    }
}

/// A text that is no workload status.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "'{0}' is not a workload status (deploying, running, rejected: ..., degraded: <n>/<m> replicas; pods rejected: ..., build rejected: ..., build failed: ..., not deployed: ...)"
)]
pub struct UnknownWorkloadStatus(pub String);

impl FromStr for WorkloadStatus {
    type Err = UnknownWorkloadStatus;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let unknown = || UnknownWorkloadStatus(text.to_owned());
        let with = |prefix: &str| text.strip_prefix(prefix).map(str::to_owned);
        match text {
            "deploying" => return Ok(WorkloadStatus::Deploying),
            "running" => return Ok(WorkloadStatus::Running),
            _ => {}
        }
        if let Some(message) = with("rejected: ") {
            return Ok(WorkloadStatus::Rejected(message));
        }
        if let Some(message) = with("build rejected: ") {
            return Ok(WorkloadStatus::BuildRejected(message));
        }
        if let Some(reason) = with("build failed: ") {
            return Ok(WorkloadStatus::BuildFailed(reason));
        }
        if let Some(reason) = with("not deployed: ") {
            return Ok(WorkloadStatus::NotDeployed(reason));
        }
        let rest = text.strip_prefix(DEGRADED).ok_or_else(unknown)?;
        let (available, rest) = rest.split_once('/').ok_or_else(unknown)?;
        let (desired, message) = rest.split_once(PODS_REJECTED).ok_or_else(unknown)?;
        Ok(WorkloadStatus::Degraded {
            available: available.parse().map_err(|_| unknown())?,
            desired: desired.parse().map_err(|_| unknown())?,
            message: message.to_owned(),
        })
    }
}

impl Serialize for WorkloadStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for WorkloadStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// The server's version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Boundary {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    pub created_at: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewBoundary {
    /// A DNS label.
    #[cfg_attr(
        feature = "openapi",
        schema(
            pattern = "^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$",
            min_length = 1,
            max_length = 63
        )
    )]
    pub name: String,
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(max_length = 256))]
    pub display_name: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BoundaryList {
    pub items: Vec<Boundary>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// A stored policy as the API shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyView {
    pub boundary: String,
    pub name: String,
    /// The document's `spec`, as saved (normalised).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub spec: serde_json::Value,
    /// `labels` and `annotations` of the document's metadata.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub metadata: serde_json::Value,
    pub etag: String,
    /// 1, 2, …: every change of the policy makes a new version (SPEC 8).
    pub version: i64,
    pub created_at: String,
    pub updated_at: String,
    pub updated_by: String,
    /// Where the policy is installed and what it enforces there.
    pub status: PolicyStatus,
    /// The staged rollout of its current version (SPEC 8); absent when it had none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutView>,
    /// Save warnings (only in the answer to a save).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
}

/// How far the staged rollout of a policy's version has come (SPEC 8).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RolloutView {
    /// The version being rolled out.
    pub version: u64,
    /// The last version that had reached everywhere: what applies where the stage has not
    /// reached, and what an abort puts back. Absent for a new policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_version: Option<u64>,
    /// `running`, `paused`, `done` or `aborted`.
    pub state: String,
    /// The stage in force, from 1; stages are cumulative.
    pub stage: u64,
    /// How many stages there are, the implied last one (everywhere) included.
    pub stages: u64,
    pub started_at: String,
    pub stage_started_at: String,
    /// The requests the new version denied in the reached scope during this stage.
    pub denials: u64,
    /// When the stage is promoted if it denies no more than it may (`promote: auto`, running).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_promotion_at: Option<String>,
    /// Why it is paused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyList {
    pub items: Vec<PolicyView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// A stored exception as the API shows it (SPEC 7).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExceptionView {
    pub boundary: String,
    pub name: String,
    /// The document's `spec`, as saved (normalised).
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub spec: serde_json::Value,
    /// `requested` (applies nothing until approved), `active` or `expired`.
    pub status: String,
    /// When it ends (RFC 3339 UTC).
    pub expires_at: String,
    pub requested_by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at: Option<String>,
    pub etag: String,
    pub created_at: String,
    pub updated_at: String,
    pub updated_by: String,
    /// Save warnings (only in the answer to a save or an approval).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warnings: Option<Vec<String>>,
    /// Per cluster of the boundary in the exception's scope, for exceptions to admission
    /// rules: while active, as a policy's (`enforced` once a dry-run create of an object it
    /// matches was admitted, `pending`, `not enforced: ...`, `error: ...`, or `installed` where
    /// nothing it matches can be probed); after the end, `removing`, or the clusters it could
    /// not be removed from yet (`still installed: <why>`). Absent for compute-plan exceptions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ExceptionClusterStatus>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExceptionClusterStatus {
    pub cluster: String,
    pub status: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExceptionList {
    pub items: Vec<ExceptionView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// A policy's install status (SPEC 3.4).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyStatus {
    /// One entry per attached cluster in the policy's scope, by cluster name; empty for a
    /// policy without admission rules (nothing of it is installed in clusters).
    pub clusters: Vec<ClusterStatus>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterStatus {
    pub cluster: String,
    /// `pending`, `installed` (no namespace of the boundary to confirm it in), `enforced`,
    /// `error: <reason>` or `not enforced: <reason>`.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub status: InstallStatus,
    /// When the reconciler recorded it; absent while `pending`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// While the policy is rolled out (SPEC 8), which version is in force where in the
    /// cluster: `v4 in 2 of 5 namespaces; v3 elsewhere`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_force: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HistoryEntry {
    pub actor: String,
    pub at: String,
    /// Exceptions: `put`, `approve` or `delete`. Policies: `rollback to version N` for a
    /// rollback (SPEC 8), a staged rollout's move (`rollout of version 4 promoted to stage
    /// 2/3`, `... paused: ...`, `... done: ...`, `... aborted: ...`; the spec unchanged); absent
    /// for any other change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// Policies only: the version the change saved (SPEC 8); absent for a deletion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<i64>,
    /// The spec before the change; absent for a creation.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub before: Option<serde_json::Value>,
    /// The spec after the change; absent for a deletion.
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub after: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct History {
    /// Oldest first.
    pub items: Vec<HistoryEntry>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApplyResult {
    /// `BoundaryException` for an exception; absent (a `BoundaryPolicy`) otherwise, so that a
    /// policy's result is the body SPEC 4.1 names.
    #[serde(default = "policy_kind", skip_serializing_if = "is_policy_kind")]
    pub kind: String,
    pub boundary: String,
    pub name: String,
    /// `created`, `configured` or `unchanged`.
    pub action: String,
    pub warnings: Vec<String>,
}

fn policy_kind() -> String {
    crate::document::KIND.to_owned()
}

fn is_policy_kind(kind: &str) -> bool {
    kind == crate::document::KIND
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApplyResults {
    pub results: Vec<ApplyResult>,
}

/// A resource as the API shows it: its body plus what the server adds.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResourceView {
    #[serde(flatten)]
    #[cfg_attr(feature = "openapi", schema(inline, value_type = Object))]
    pub body: serde_json::Value,
    pub boundary: String,
    pub etag: String,
    pub created_at: String,
    pub updated_at: String,
    /// Workloads (SPEC 5): what the cluster says about it, e.g. `deploying`, `running`,
    /// `rejected: <message>`, `degraded: 2/3 replicas; pods rejected: <message>`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<String>))]
    pub status: Option<WorkloadStatus>,
    /// Only in `?grandfathered=true` lists: the policies that now disallow its plan.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denied_by: Option<Vec<String>>,
}

/// What a cluster holds for one workload resource, read live when asked
/// (`GET /v1/boundaries/{b}/resources/{type}/{name}/workload`): its Deployment's replicas, its
/// pods, its build Job, and the latest Kubernetes events about them, denials included.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WorkloadDetail {
    pub cluster: String,
    pub namespace: String,
    /// The Deployment palisade renders; absent while it does not exist (denied, or waiting
    /// for its build).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentState>,
    /// The resource's pods (its build's too), by name.
    pub pods: Vec<PodState>,
    /// The build Job of the resource's current source; absent when it runs from an image or
    /// the Job does not exist.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildState>,
    /// The latest events of the Deployment, its ReplicaSets, its pods and its build Job,
    /// newest first, at most [`WORKLOAD_EVENTS`].
    pub events: Vec<EventView>,
}

/// How many events a [`WorkloadDetail`] carries at most.
pub const WORKLOAD_EVENTS: usize = 20;

/// A Deployment's replicas, as its status counts them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DeploymentState {
    pub name: String,
    /// `spec.replicas`.
    pub desired: i32,
    pub ready: i32,
    pub available: i32,
    pub updated: i32,
}

/// One pod.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PodState {
    pub name: String,
    /// `Pending`, `Running`, `Succeeded`, `Failed` or `Unknown`.
    pub phase: String,
    /// Every container ready.
    pub ready: bool,
    /// Container restarts, summed.
    pub restarts: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// A build Job's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BuildState {
    pub name: String,
    /// `running`, `succeeded` or `failed`.
    pub state: String,
    /// Why it failed, as the Job's condition says.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One Kubernetes event, as the API server recorded it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventView {
    /// When it last happened (RFC 3339), when recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub event_type: String,
    pub reason: String,
    /// `<Kind>/<name>` of the object it is about.
    pub object: String,
    pub message: String,
    /// How many times it happened.
    pub count: i32,
}

/// Code uploaded for a build: what a resource's `upload` names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UploadView {
    pub id: String,
    /// Hex SHA-256 of the content.
    pub sha256: String,
    /// Bytes.
    pub size: u64,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResourceList {
    pub items: Vec<ResourceView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PickerPlan {
    pub name: String,
    /// vCPU.
    pub cpu: f64,
    /// e.g. `4 GiB`.
    pub memory: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit_warning: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Picker {
    #[serde(rename = "type")]
    pub resource_type: String,
    /// False for functions: the API does not enforce their plans.
    pub enforced: bool,
    pub plans: Vec<PickerPlan>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NewToken {
    /// `admin`, `boundary-admin` or `developer`.
    #[cfg_attr(
        feature = "openapi",
        schema(pattern = "^(admin|boundary-admin|developer)$")
    )]
    pub role: String,
    /// Required for `boundary-admin` and `developer`; absent for `admin`.
    #[serde(default)]
    pub boundary: Option<String>,
    /// 1-3650; absent: the token does not expire.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 3650))]
    pub expires_in_days: Option<u32>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenView {
    pub id: String,
    pub role: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub boundary: Option<String>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
    pub created_by: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreatedToken {
    #[serde(flatten)]
    pub token: TokenView,
    /// The secret: shown once, stored only as a hash.
    pub secret: String,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenList {
    pub items: Vec<TokenView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ClusterCredentials {
    /// A kubeconfig with one cluster, user and context, an https server and inline
    /// credentials.
    #[cfg_attr(feature = "openapi", schema(min_length = 1))]
    pub kubeconfig: String,
    /// Namespace names that no boundary may hold in this cluster, besides `default` and every
    /// `kube-*` name (SPEC 3.4 v3.2). Omitted: unchanged (none for a new cluster); `[]` clears.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_namespaces: Option<Vec<String>>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Admission {
    /// Whether admission rules are enforced in this cluster.
    pub enforced: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterView {
    pub name: String,
    /// As observed by `/version`; absent until palisade has reached the cluster.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    pub admission: Admission,
    /// Why palisade's last attempt to reconcile the cluster failed (e.g. unreachable); absent
    /// after a success. palisade retries with backoff.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// How many times palisade saw an API server of the cluster that had started since it
    /// first looked (a restart, or an instance added): each recompiles every admission policy.
    pub api_server_restarts: u64,
    /// When palisade saw the last of them (RFC 3339); absent if never.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_server_restarted_at: Option<String>,
    /// How many times palisade found something it owns in the cluster changed by someone else
    /// (e.g. a namespace's boundary label removed) and put it back.
    #[serde(default)]
    pub repairs: u64,
    /// The last of those repairs; absent if none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_repair: Option<Repair>,
    /// The admission layout palisade uses in the cluster and why; absent until palisade has
    /// chosen one there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layout: Option<ClusterLayout>,
    /// Namespace names no boundary may hold here besides `default` and `kube-*` (SPEC 3.4
    /// v3.2).
    #[serde(default)]
    pub reserved_namespaces: Vec<String>,
    /// The replica that reconciles the cluster now (its `--replica` name); absent while none
    /// does (no reconciler runs, or a cluster is being handed over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reconciled_by: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

/// The admission layout in use in a cluster (SPEC 3.4).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterLayout {
    /// `per-policy`, `per-boundary` or `shared`.
    pub name: String,
    /// Why this one, e.g. `212 boundaries` (chosen by `auto` for the cluster's number of
    /// boundaries) or `chosen by --admission-layout`.
    pub reason: String,
}

/// A repair palisade made in a cluster.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Repair {
    /// What was found and put back, e.g. `namespace web lost its boundary label; restored`.
    pub message: String,
    /// When (RFC 3339).
    pub at: String,
}

/// A page of clusters (`{"items": [...], "continue": "..."?}`, by name).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterList {
    pub items: Vec<ClusterView>,
    /// Pass as `?continue=` for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// The body of `POST /v1/boundaries/{b}/policies/{p}/rollback` (SPEC 8).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RollbackRequest {
    /// The version whose spec becomes the current one, as a new version.
    pub version: i64,
    /// `true`: roll it out by the policy's stages instead of at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<bool>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct NamespaceRequest {
    /// `true`: label the namespace when it exists and carries no boundary label. Without it,
    /// an existing namespace is a 409 (palisade does not take over namespaces by accident).
    #[serde(default)]
    pub adopt: Option<bool>,
}

fn active() -> String {
    "active".into()
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NamespaceView {
    pub boundary: String,
    pub cluster: String,
    pub name: String,
    pub created_at: String,
    /// The uid of the namespace palisade created or adopted (SPEC 3.4 v3.2): its label is
    /// restored on that namespace only. Absent until learnt, in a record from an older store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// `active`; `gone: namespace 'web' was deleted in c1; a namespace of that name made since
    /// is not the boundary's (adopt it to take it)`; or `reserved: ...` for a namespace held
    /// from before its name was reserved (release it).
    #[serde(default = "active")]
    pub status: String,
    /// In the answer to a `PUT`: `created`, `adopted` or `unchanged`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct NamespaceList {
    pub items: Vec<NamespaceView>,
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none")]
    pub continue_token: Option<String>,
}

/// One object a policy rejects, with where it comes from (SPEC 3; preview and audit).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Finding {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// The object's owners, from its controller up to the top-level workload
    /// (Pod → ReplicaSet → Deployment); empty for an object nobody owns.
    pub owners: Vec<FindingOwner>,
    /// The top of the owner chain (the object itself when it has no owner).
    pub workload: FindingWorkload,
    /// `RequiredLabels`, `AllowedRegistries` or `DisallowLatestTag`.
    pub rule: String,
    /// The exact message the API server gives after `denied request: `.
    pub message: String,
    /// When the previewed version has a `rollout` (SPEC 8): the stage (from 1) that first
    /// reaches the object's namespace in its cluster, where the version meets it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FindingOwner {
    pub kind: String,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct FindingWorkload {
    pub kind: String,
    pub name: String,
    /// Its current replicas (`status`, else `spec`): what a denial of its pods puts at risk.
    pub replicas: u64,
}

/// An object the previewed version would deny, and whether that is new.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Denial {
    #[serde(flatten)]
    pub finding: Finding,
    /// Whether the denial is new: `false` when the saved version (enforce mode, this cluster
    /// in its scope) already denies this object or another object of the same workload, whose
    /// replicas are then at risk already; `true` for every denial when nothing is saved.
    pub new: bool,
}

/// What previewing a policy found in one cluster of its scope.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterPreview {
    pub cluster: String,
    /// Why the cluster could not be read; absent when it was. A cluster that cannot be read is
    /// reported, never left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The boundary's namespaces in the cluster (labelled `palisade.dev/boundary`).
    pub namespaces: Vec<String>,
    /// Checked objects read (Pods, Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs,
    /// CronJobs; terminating ones excluded).
    pub checked: u64,
    /// Objects the previewed version would deny (enforce mode).
    pub denied: Vec<Denial>,
    /// Objects the previewed version would warn about (audit mode: it denies nothing).
    pub warned: Vec<Finding>,
    /// Objects the saved version denies and the previewed one would allow.
    pub loosened: Vec<Finding>,
    /// Objects the previewed version would deny but for an exception in force (SPEC 7), with
    /// its name; at most 100, not paged. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub excepted: Vec<ExceptedFinding>,
    /// Time spent listing (the API server's share).
    pub list_ms: u64,
    /// Time spent evaluating (palisade's share).
    pub evaluate_ms: u64,
}

/// An object an exception lets past the previewed policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ExceptedFinding {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub exception: String,
}

/// A platform resource whose plan the previewed version disallows: it keeps running
/// (grandfathered) but could not be created or moved to that plan again.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct GrandfatheredResource {
    #[serde(rename = "type")]
    pub resource_type: String,
    pub name: String,
    /// The plans of it the version disallows (a container instance has one per component).
    pub plans: Vec<String>,
    /// The 422 message a create with that plan would get.
    pub message: String,
}

/// Counts over every cluster of the preview.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PreviewSummary {
    /// Objects that would be denied.
    pub objects: u64,
    /// Distinct top-level workloads among them.
    pub workloads: u64,
    /// The sum of those workloads' current replicas.
    pub replicas_at_risk: u64,
    /// Of `objects`, the denials that are new (`new`): what saving this version adds to what
    /// the saved version already denies.
    pub new_objects: u64,
    /// Distinct top-level workloads among the new denials.
    pub new_workloads: u64,
    /// The sum of those workloads' current replicas: the replicas saving this version puts at
    /// risk.
    pub new_replicas_at_risk: u64,
    /// Objects that would be warned about (audit mode).
    pub warned: u64,
    /// Objects the saved version denies that this one would allow.
    pub loosened: u64,
    /// Platform resources whose plan this version disallows.
    pub resources_grandfathered: u64,
    /// Clusters in scope that could not be read.
    pub clusters_unreadable: u64,
}

/// The answer of `POST /v1/boundaries/{b}/policies/{p}/preview`: one page of it. The summary
/// and every cluster's entry are whole on every page; the findings (each cluster's `denied`,
/// `warned` and `loosened`, then `grandfathered`) are paged together like a list, at most
/// `limit` of them per page, in that order (clusters by name, objects by namespace, kind and
/// name, resources by type and name).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Preview {
    pub boundary: String,
    pub policy: String,
    /// `enforce` or `audit`: the previewed version's mode.
    pub mode: String,
    /// Whether a saved version exists (and `loosened` compares with it).
    pub saved: bool,
    /// Counts over the whole preview, the same on every page.
    pub summary: PreviewSummary,
    /// One entry per attached cluster in the previewed version's scope, by name; its lists
    /// hold this page's findings.
    pub clusters: Vec<ClusterPreview>,
    /// This page's grandfathered resources.
    pub grandfathered: Vec<GrandfatheredResource>,
    /// Pass as `?continue=` (with the same body) for the next page; absent on the last.
    #[serde(rename = "continue", skip_serializing_if = "Option::is_none", default)]
    pub continue_token: Option<String>,
}

/// What the last audit of a policy found in one cluster.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ClusterReport {
    pub cluster: String,
    /// When the audit read the cluster; absent until the first audit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub taken_at: Option<String>,
    /// Whether the report is of the policy's current version (`false`: an audit of the new
    /// version is under way).
    pub current: bool,
    /// Why the audit could not read the cluster; absent when it could.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub checked: u64,
    /// How many objects violate the policy.
    pub violations: u64,
    pub findings: Vec<Finding>,
}

/// The answer of `GET /v1/boundaries/{b}/policies/{p}/report`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PolicyReport {
    pub boundary: String,
    pub policy: String,
    /// `enforce` or `audit`.
    pub mode: String,
    /// One entry per attached cluster in the policy's scope, by name.
    pub clusters: Vec<ClusterReport>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_statuses_read_back_what_they_write() {
        for text in [
            "pending",
            "installed",
            "enforced",
            "active (audit)",
            "error: the API server answered 403 Forbidden",
            "not enforced: Kubernetes 1.29 is older than 1.30",
        ] {
            let status: InstallStatus = text.parse().unwrap_or(InstallStatus::Pending);
            assert_eq!(status.to_string(), text);
        }
        assert!("enforcing".parse::<InstallStatus>().is_err());
    }

    #[test]
    fn workload_statuses_read_back_what_they_write() {
        let table = [
            ("deploying", WorkloadStatus::Deploying, Tone::Moving),
            ("running", WorkloadStatus::Running, Tone::Ok),
            (
                "rejected: ValidatingAdmissionPolicy 'p' denied request: no",
                WorkloadStatus::Rejected("ValidatingAdmissionPolicy 'p' denied request: no".into()),
                Tone::Failed,
            ),
            (
                "degraded: 0/3 replicas; pods rejected: pods \"a\" is forbidden: x/y",
                WorkloadStatus::Degraded {
                    available: 0,
                    desired: 3,
                    message: "pods \"a\" is forbidden: x/y".into(),
                },
                Tone::Degraded,
            ),
            (
                "build rejected: jobs \"b\" is forbidden",
                WorkloadStatus::BuildRejected("jobs \"b\" is forbidden".into()),
                Tone::Failed,
            ),
            (
                "build failed: BackoffLimitExceeded",
                WorkloadStatus::BuildFailed("BackoffLimitExceeded".into()),
                Tone::Failed,
            ),
            (
                "not deployed: no cluster given",
                WorkloadStatus::NotDeployed("no cluster given".into()),
                Tone::Failed,
            ),
        ];
        for (text, status, tone) in table {
            assert_eq!(
                text.parse::<WorkloadStatus>().as_ref(),
                Ok(&status),
                "{text}"
            );
            assert_eq!(status.to_string(), text);
            assert_eq!(status.tone(), tone, "{text}");
            let json = serde_json::to_string(&status).unwrap_or_default();
            assert_eq!(
                serde_json::from_str::<WorkloadStatus>(&json).ok(),
                Some(status)
            );
        }
        for text in [
            "Running",
            "degraded: two/3 replicas; pods rejected: x",
            "degraded: 2/3 replicas",
            "rejected",
        ] {
            assert_eq!(
                text.parse::<WorkloadStatus>(),
                Err(UnknownWorkloadStatus(text.to_owned()))
            );
        }
    }
}
