//! palisade's Kubernetes adapter: installs a policy's rendered `ValidatingAdmissionPolicy` and
//! binding into a cluster with server-side apply (policy first, binding deleted first), removes
//! them (only palisade's, of the caller's installation and boundary), installs the
//! boundary-label guard, labels namespaces for a boundary, reads what a cluster can enforce
//! (`/version` and discovery) and confirms enforcement with a server-side dry-run.
//!
//! Decisions stay pure elsewhere: `palisade-vap` renders, `palisade-policy` decides messages;
//! this crate talks to API servers, and keeps its own decisions in pure modules.
//!
//! Its modules:
//! - The loop: `controller` (lease, fleet, pass, install, confirm, drift, fencing, staged
//!   rollouts' automatic promotion), with its pure decisions in `plan` (what a pass keeps, what
//!   a rollout's stage reached), `denials` (what a version being rolled out denied), `scope`
//!   (which clusters a change concerns),
//!   `placement` (which replica holds which cluster) and `restarts` (when an API server
//!   restarted).
//! - Talking to one cluster: `cluster` (`ClusterClient`, the thin client: apply, delete exact,
//!   dry-run, list installed, discovery, whoami; it knows no layout), `in_layout` (`InLayout`:
//!   the client in one layout, writing what the layout renders and probing what it judges),
//!   `verdict` (a probe decided and its answer judged, without the cluster), `kubeconfig` (the client library's
//!   reading of it), `answer` (what a dry-run write was told), `cause` (why a request failed,
//!   in words), `probe` (whether the cluster can enforce), `rbac` (the role it needs).
//! - Admission objects: `admission` (the layouts behind one trait; they render and judge,
//!   and take no client), `installed` (what a cluster holds of this installation, judged in
//!   memory), `per_boundary` and `shared` (the deletions and reads of those layouts' objects),
//!   `switch` (changing layout without a gap), `violating` and `excepted` (the Pods that
//!   confirm a policy and an exception).
//! - Watching: `drift` (changes palisade did not make), `statuses` (workloads' status).
//! - Reading what runs: `scan` (previews and audits), `audit` and `reports` (the continuous
//!   audit and its OpenReports), `detail` (one workload, live).
//! - `workloads` (platform workloads, SPEC 5), `metrics` (the loop's counters), `port` (the
//!   application's clusters port).

mod admission;
pub mod answer;
mod audit;
pub mod cause;
pub mod cluster;
pub mod controller;
mod deletions;
pub mod denials;
mod detail;
pub mod drift;
pub mod excepted;
mod fence;
pub mod in_layout;
mod installed;
pub mod kubeconfig;
pub mod metrics;
#[cfg(test)]
mod module_graph;
mod per_boundary;
mod placement;
mod plan;
pub mod port;
pub mod probe;
mod promotion;
pub mod rbac;
pub mod reports;
pub mod restarts;
pub mod scan;
pub mod scope;
mod shared;
pub mod statuses;
mod switch;
mod verdict;
pub mod violating;
pub mod workloads;

pub use answer::AdmissionAnswer;
pub use cluster::{ClusterClient, LabelOutcome, LabelTampering, NamespaceSeen};
pub use controller::{default_replica, Controller, ControllerError, PassReport, Settings};
pub use in_layout::InLayout;
pub use palisade_vap::{Layout, LayoutChoice, Thresholds};
pub use port::KubeClusters;
pub use probe::{Admission, ClusterProbe, EnforcementProbe, OLDEST_MINOR};

/// Why a cluster operation failed. The text states the cause; no variant also returns it
/// from `source()`, so a printed chain states it once.
#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the kubeconfig cannot be used: {0}")]
    Kubeconfig(String),
    /// kube-rs' error, in words ([`cause::describe`]).
    #[error("{}", crate::cause::describe(.0))]
    Kube(kube::Error),
    #[error("the API server reported a version palisade cannot read: {0}")]
    Version(String),
    #[error("the installation id '{0}' is not a Kubernetes label value")]
    InvalidInstallation(String),
    #[error("policy '{0}' has no admission rules: nothing is installed, nothing can be probed")]
    NoAdmissionRules(String),
    /// `apply_policy` in the per-boundary layout, whose objects hold several policies.
    #[error("the per-boundary layout writes a boundary's policies together: apply the boundary, not policy '{0}' alone")]
    WholeBoundary(String),
    #[error("{name} belongs to palisade installation '{installation}'; it is left alone")]
    OtherInstallation { name: String, installation: String },
    #[error("the namespace is labelled for boundary '{0}'")]
    LabelledForOtherBoundary(String),
    #[error("namespace '{0}' exists and is not labelled for the boundary; adopt it to label it")]
    NamespaceExists(String),
    #[error("the API server does not serve {0}")]
    UnknownKind(String),
    #[error("cannot encode the request: {0}")]
    Json(serde_json::Error),
    #[error("unexpected answer: {0}")]
    Unexpected(String),
    /// A create the API server refused other than by an admission rule (e.g. 403).
    #[error("the API server answered {code}: {message}")]
    Refused { code: u16, message: String },
}

impl From<kube::Error> for ReconcileError {
    fn from(error: kube::Error) -> Self {
        ReconcileError::Kube(error)
    }
}

pub type Result<T, E = ReconcileError> = std::result::Result<T, E>;
