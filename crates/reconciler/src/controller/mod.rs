//! The reconcile loop `palisade serve` runs: it makes every managed cluster hold what the store
//! says (SPEC 3.4, 4.3) and writes back what it saw.
//!
//! One pass reads the whole desired state (boundaries, their decoded policies, attachments and
//! namespaces), then works on every cluster at once, each under a time limit, so an
//! unreachable cluster delays nobody else. Per cluster: read `/version` and discovery; when
//! the cluster can enforce, install the boundary-label guard, server-side apply each in-scope
//! policy with admission rules, remove this installation's objects that are no longer wanted
//! (bindings first; only objects labelled as this installation's), and confirm enforcement
//! with a dry-run where the boundary has a namespace. Statuses go to the store.
//!
//! Rounds start at once at start, after every change the store reports (an in-process channel
//! on SQLite, LISTEN/NOTIFY on PostgreSQL, which also reports reconnects), every five
//! minutes, and after a failure (or a status the store did not take) with exponential
//! backoff. Each cluster is its own worker (`workers`): a round starts the part of every
//! cluster it concerns whose part is not running, and runs the others again once their parts
//! end, so a silent cluster delays nobody else. The replicas on one PostgreSQL database share
//! the clusters out (see `fleet`): each cluster is reconciled by the one replica holding its
//! lock, and a round covers the clusters this replica holds; one is never given up while its
//! part runs. On shutdown the parts in progress may finish their cluster writes for
//! [`Settings::shutdown_grace`]; then the loop returns and the lease is released.
//!
//! Metrics: see [`crate::metrics`].

mod confirm;
mod deploy;
mod drift;
#[cfg(test)]
mod fence;
mod fleet;
mod install;
mod labels;
mod layout;
mod lead;
mod memory;
mod pass;
mod rollouts;
mod settle;
mod workers;

use crate::fence::{Fence, Fenced};
use install::Part;
use layout::LayoutState;
use memory::Memories;

use palisade_api_types::view::{InstallStatus, WorkloadStatus};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use palisade_app::ports::Records;
use palisade_app::reconcile::{
    BoundaryState, ClusterRecord, Lease, NamespaceRecord, PolicyInstall, PolicyRecord, StoreError,
};
use palisade_app::App;
use palisade_policy::name::NameError;
use palisade_policy::{Mode, Name, Policy};

use crate::audit::{self, AuditJob, Audits};
use crate::cluster::Keep;
use crate::metrics::{self, Outcome};
use crate::plan::wanted;
use crate::probe::{Admission, EnforcementProbe};
use crate::scope::Fingerprint;
use crate::statuses::StatusWatch;
use crate::workloads::{self, Target, Workloads};
use crate::{ClusterClient, InLayout, ReconcileError};
use palisade_vap::{choose, Choice, ClusterFacts, Layout, LayoutChoice, Thresholds};

/// Timing of the loop.
#[derive(Clone, Debug)]
pub struct Settings {
    /// A full pass at least this often, changes or not (SPEC 4.3: 5 minutes).
    pub resync: Duration,
    /// How long one cluster's part of a pass may take.
    pub cluster_timeout: Duration,
    /// The first retry after a failed pass; doubled up to `max_backoff`.
    pub min_backoff: Duration,
    pub max_backoff: Duration,
    /// How often a standby replica tries to take the lease.
    pub lease_retry: Duration,
    /// This replica's name among the installation's reconcilers (`--replica`), shown as the
    /// holder of the clusters it reconciles.
    pub replica: String,
    /// How often a replica looks at who else reconciles the installation's clusters, and
    /// takes or gives up clusters accordingly.
    pub fleet_check: Duration,
    /// On shutdown, how long the pass in progress may go on finishing its cluster writes
    /// before the rest of it is abandoned.
    pub shutdown_grace: Duration,
    /// The audit of a boundary in a cluster runs after every change of its policies or
    /// namespaces there, and at least this often (default 10 minutes).
    pub audit_interval: Duration,
    /// How long one audit may read a cluster.
    pub audit_timeout: Duration,
    /// The workload half (SPEC 5): builder and file-server images, how builds fetch uploads.
    pub workloads: Workloads,
    /// How policies become admission objects in the clusters (`--admission-layout`): one
    /// layout for all, or `auto` (per cluster, [`palisade_vap::choose`]).
    pub layout: LayoutChoice,
    /// Where `auto` changes layout.
    pub thresholds: Thresholds,
    /// How often a cluster's API servers' identity Leases are read (about 1.7 KB for one API
    /// server) to notice restarts; the start time on `/metrics` (about 2 MB) is read only
    /// after a failure or a new identity (`restarts`).
    pub apiserver_check_interval: Duration,
    /// How many changes of one object within a minute are repaired at once; the next ones
    /// wait 2 s, doubling to 60 s (default 5).
    pub free_repairs: usize,
    /// How many clusters' parts run at once (default 32); the others wait for a turn, and
    /// their time limit starts with it.
    pub parallel_clusters: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            resync: Duration::from_secs(300),
            cluster_timeout: Duration::from_secs(60),
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            lease_retry: Duration::from_secs(5),
            replica: default_replica(),
            fleet_check: Duration::from_secs(1),
            shutdown_grace: Duration::from_secs(10),
            audit_interval: Duration::from_secs(600),
            audit_timeout: Duration::from_secs(300),
            workloads: Workloads::default(),
            layout: LayoutChoice::default(),
            thresholds: Thresholds::default(),
            apiserver_check_interval: Duration::from_secs(60),
            free_repairs: 5,
            parallel_clusters: 32,
        }
    }
}

/// The name a replica goes by unless told otherwise: the host's name (a Pod's name in
/// Kubernetes), or `palisade` when it cannot be read.
pub fn default_replica() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "palisade".to_owned())
}

/// Why a cluster's part of a pass, or a whole pass, failed. The text is the whole reason, as
/// statuses keep it (`error: <text>`, a cluster's `last_error`). No variant also returns its
/// cause from `source()`: whoever prints the chain reads each cause once.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The desired state could not be read: nothing was done.
    #[error("cannot read the store: {0}")]
    ReadStore(StoreError),
    /// The cluster's sealed kubeconfig could not be opened.
    #[error("the stored credentials cannot be read: {0}")]
    Credentials(String),
    /// A stored cluster name that is not a DNS label.
    #[error("{0}")]
    ClusterName(NameError),
    /// A request to the cluster failed.
    #[error("{0}")]
    Cluster(ReconcileError),
    #[error("cannot record the cluster's status: {0}")]
    ClusterStatus(StoreError),
    #[error("cannot record statuses: {0}")]
    Statuses(StoreError),
    #[error("cannot install the boundary-label guard: {0}")]
    Guard(ReconcileError),
    #[error("cannot install the shared admission policy: {0}")]
    Shared(ReconcileError),
    #[error("cannot remove the shared admission policy of the earlier layout: {0}")]
    RemoveShared(ReconcileError),
    #[error("cannot restore a namespace's boundary label: {0}")]
    RestoreLabel(ReconcileError),
    #[error("cannot deploy workloads: {0}")]
    Workloads(ReconcileError),
    #[error("cannot read the workloads: {0}")]
    ReadWorkloads(StoreError),
    #[error("cannot remove objects of deleted policies: {0}")]
    RemovePolicies(ReconcileError),
    #[error("cannot remove objects of boundary '{boundary}': {error}")]
    RemoveBoundary {
        boundary: String,
        error: ReconcileError,
    },
    /// The cluster's part took longer than [`Settings::cluster_timeout`].
    #[error("no answer within {} s", .0.as_secs())]
    Timeout(Duration),
    /// A stored policy that does not decode (its cause in words).
    #[error("the stored policy cannot be decoded: {0}")]
    Undecodable(String),
    /// A cluster's task ended without an answer (it panicked).
    #[error("{0}")]
    Task(tokio::task::JoinError),
    /// This replica no longer holds the cluster's lease, or cannot confirm it (SPEC 4.3
    /// v3.2): nothing more is written there, and nothing is recorded of the cluster.
    #[error("this replica no longer holds the cluster's lease: {0}")]
    Fenced(StoreError),
}

impl From<Fenced> for ControllerError {
    fn from(Fenced(error): Fenced) -> Self {
        ControllerError::Fenced(error)
    }
}

impl From<ReconcileError> for ControllerError {
    fn from(error: ReconcileError) -> Self {
        ControllerError::Cluster(error)
    }
}

/// What a pass did, for logs and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassReport {
    /// Clusters whose part failed, with the reason.
    pub failed: BTreeMap<String, String>,
    /// Clusters whose part completed.
    pub reconciled: BTreeSet<String>,
    /// Policies applied but not yet seen enforcing (the API server activates a new policy
    /// within about a second): another pass follows shortly.
    pub unconfirmed: usize,
    /// The clusters of those policies: the pass that follows shortly looks at them only.
    pub unconfirmed_in: BTreeSet<String>,
    /// Clusters with a status (the cluster's or its policies') that the store did not take:
    /// logged, counted, and retried with backoff like a failure.
    pub unrecorded: BTreeSet<String>,
    /// When the first exception in force ends (stored form): a pass follows at that moment.
    pub next_expiry: Option<String>,
}

impl PassReport {
    /// Whether the pass left something to retry with backoff.
    pub fn incomplete(&self) -> bool {
        !self.failed.is_empty() || !self.unrecorded.is_empty()
    }

    /// Adds a cluster's part that completed; answers the audits it found due.
    fn completed(&mut self, cluster: String, pass: ClusterPass) -> Vec<AuditJob> {
        self.unconfirmed += pass.unconfirmed;
        if pass.unconfirmed > 0 {
            self.unconfirmed_in.insert(cluster.clone());
        }
        if let Some(error) = pass.workloads_failed {
            self.failed.insert(cluster.clone(), error);
        }
        self.reconciled.insert(cluster);
        pass.audits
    }
}

/// How long after palisade first sees a policy version admit its violating probe it keeps
/// the status `pending` and looks again, before it reports `not enforced`.
pub const ACTIVATION_GRACE: Duration = Duration::from_secs(30);
/// How soon a pass follows one that left policies unconfirmed.
const RECHECK: Duration = Duration::from_millis(250);

/// The longest reason a status keeps; longer ones (an evaluation error quotes the whole CEL
/// expression, tens of KB) are cut at a character boundary and end with `…`.
pub const MAX_REASON_BYTES: usize = 1024;

fn short(reason: &str) -> String {
    if reason.len() <= MAX_REASON_BYTES {
        return reason.to_owned();
    }
    let mut end = MAX_REASON_BYTES;
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &reason[..end])
}

/// The status `error: <reason>` of SPEC 3.4, the reason shortened.
pub fn status_error(reason: &str) -> InstallStatus {
    InstallStatus::Error(short(reason))
}

/// The status `not enforced: <reason>` of SPEC 3.4, the reason shortened.
pub fn status_not_enforced(reason: &str) -> InstallStatus {
    InstallStatus::NotEnforced(short(reason))
}

/// A cluster's API server start times (milliseconds since the epoch) palisade has seen.
struct ApiServersSeen {
    servers: crate::restarts::ApiServers,
    read_at: Instant,
    /// The cluster failed a pass since the last reading (an API server that stops and starts
    /// again does): read its start time on the next pass, not only once the interval passed.
    suspect: bool,
}

/// A connection kept between passes, replaced when the credentials change.
#[derive(Clone)]
struct Connection {
    sealed: Vec<u8>,
    /// The cluster in the layout its last part chose (a part takes it in its own), and what
    /// was written there once.
    client: InLayout,
    identity: Option<String>,
}

/// What a cluster's part of a pass that completed found.
#[derive(Debug)]
struct ClusterPass {
    /// Policies applied but not yet confirmed.
    unconfirmed: usize,
    /// `false`: the cluster cannot enforce admission rules; nothing was written to it.
    enforced: bool,
    /// Every status write of the part succeeded.
    recorded: bool,
    /// Audits that came due, to be started once the part is done.
    audits: Vec<AuditJob>,
    /// The workloads could not all be deployed (the cluster's last error says why); the
    /// policies' part is unaffected, and the pass is retried with backoff.
    workloads_failed: Option<String>,
    /// What each exception's probe found, by (boundary, exception) (SPEC 7).
    exceptions: BTreeMap<(String, String), InstallStatus>,
}

/// One cluster's part of a pass, as its task reports it.
#[derive(Debug)]
struct ClusterDone {
    name: String,
    result: Result<ClusterPass, ControllerError>,
    /// Every status write of the part (or of its failure) succeeded.
    recorded: bool,
}

/// Which clusters held a pass runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum PassScope {
    /// Every one (the first pass, resyncs, timers, drifts, builds, returning clusters).
    All,
    /// Those whose inputs changed since their last part that left nothing to do (after a
    /// change of the store).
    Changed,
    /// These (a look again at the clusters a pass left policies unconfirmed in).
    Only(BTreeSet<String>),
}

/// How a lead (the loop while this replica is a member of the fleet) ended.
enum LeadEnd {
    Shutdown,
    LostLease,
}

/// The reconciler of one installation.
pub struct Controller {
    /// The use cases it asks for the desired state and credentials.
    app: App,
    /// What it reads and records of the store besides (the application's narrow port).
    records: Arc<dyn Records>,
    installation: String,
    settings: Settings,
    /// What this replica remembers of each cluster: lent to the cluster's worker while its
    /// part runs, kept here between parts (`memory`).
    memory: Memories,
    audits: Audits,
    /// Notified by a status watch when a build finished: the next pass deploys it.
    builds_done: Arc<tokio::sync::Notify>,
    /// Where each cluster's drift watches report.
    drift_sender: tokio::sync::mpsc::Sender<crate::drift::Seen>,
    /// What they reported, read by the loop while it leads.
    drift_queue: tokio::sync::Mutex<tokio::sync::mpsc::Receiver<crate::drift::Seen>>,
    /// Drifts not yet repaired and confirmed.
    open_drifts: drift::OpenDrifts,
    /// Every cluster of the installation at the latest pass (the fleet shares them out).
    known: Mutex<BTreeSet<String>>,
    /// Turns for the clusters' parts ([`Settings::parallel_clusters`]).
    turns: Arc<tokio::sync::Semaphore>,
    /// The rollouts on `/metrics` as running or paused, by (boundary, policy).
    rollouts_shown: Mutex<BTreeSet<(String, String)>>,
}

impl fmt::Debug for Controller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Controller")
            .field("installation", &self.installation)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Controller {
    /// A controller; its metrics are described to the recorder installed by then.
    pub fn new(app: App, installation: String, settings: Settings) -> Arc<Self> {
        metrics::describe();
        let (drift_sender, drift_queue) = tokio::sync::mpsc::channel(drift::QUEUE);
        let settings_turns = settings.parallel_clusters.max(1);
        Arc::new(Controller {
            records: app.records(),
            app,
            installation,
            settings,
            memory: Memories::default(),
            audits: Audits::default(),
            builds_done: Arc::new(tokio::sync::Notify::new()),
            drift_sender,
            drift_queue: tokio::sync::Mutex::new(drift_queue),
            open_drifts: drift::OpenDrifts::default(),
            known: Mutex::new(BTreeSet::new()),
            turns: Arc::new(tokio::sync::Semaphore::new(settings_turns)),
            rollouts_shown: Mutex::default(),
        })
    }

    pub fn installation(&self) -> &str {
        &self.installation
    }
}

/// Every status of the boundary's policies in `cluster` set to `status`.
fn every_status(
    boundary: &BoundaryState,
    cluster: &Name,
    status: &InstallStatus,
) -> Vec<PolicyInstall> {
    wanted(boundary, cluster)
        .map(|(record, _)| status_record(boundary, record, cluster.as_str(), status.clone()))
        .collect()
}

fn status_record(
    boundary: &BoundaryState,
    record: &PolicyRecord,
    cluster: &str,
    status: InstallStatus,
) -> PolicyInstall {
    PolicyInstall {
        boundary: boundary.name.to_string(),
        policy: record.name.clone(),
        cluster: cluster.to_owned(),
        policy_etag: record.etag.clone(),
        // Typed to the application, which writes it through the one codec.
        status,
        updated_at: palisade_app::reconcile::now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        assert_eq!(
            status_error("unreachable").to_string(),
            "error: unreachable"
        );
        let long = "é".repeat(MAX_REASON_BYTES);
        let status = status_not_enforced(&long).to_string();
        assert!(status.ends_with('…'));
        assert!(status.len() <= "not enforced: ".len() + MAX_REASON_BYTES + '…'.len_utf8());
    }

    /// The texts statuses keep, which the API shows and tests assert.
    #[test]
    fn error_texts_are_the_reasons_statuses_keep() {
        use std::error::Error;
        let cases = [
            (
                ControllerError::ReadStore(StoreError::Timeout),
                "cannot read the store: the store did not answer before the deadline; nothing was written",
            ),
            (
                ControllerError::Statuses(StoreError::NotFound),
                "cannot record statuses: not found",
            ),
            (
                ControllerError::ClusterStatus(StoreError::NotFound),
                "cannot record the cluster's status: not found",
            ),
            (
                ControllerError::Credentials("bad key".into()),
                "the stored credentials cannot be read: bad key",
            ),
            (
                ControllerError::Timeout(Duration::from_secs(60)),
                "no answer within 60 s",
            ),
            (
                ControllerError::Guard(ReconcileError::Unexpected("x".into())),
                "cannot install the boundary-label guard: unexpected answer: x",
            ),
            (
                ControllerError::RemoveBoundary {
                    boundary: "shop".into(),
                    error: ReconcileError::Unexpected("x".into()),
                },
                "cannot remove objects of boundary 'shop': unexpected answer: x",
            ),
            (
                ControllerError::Cluster(ReconcileError::Unexpected("x".into())),
                "unexpected answer: x",
            ),
        ];
        for (error, text) in cases {
            assert_eq!(error.to_string(), text);
            // The cause is in the text, so it is not a source as well.
            assert!(error.source().is_none(), "{error}");
        }
    }

    #[test]
    fn a_kube_error_is_stated_once() {
        use std::error::Error;
        let mut status = kube::core::Status::failure("gone", "NotFound");
        status.code = 404;
        let error = ReconcileError::from(kube::Error::Api(Box::new(status)));
        assert_eq!(
            error.to_string(),
            "the API server answered 404 Not Found: gone"
        );
        assert!(error.source().is_none());
    }
}
