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
//! Passes run at start, after every change the store reports (an in-process channel on
//! SQLite, LISTEN/NOTIFY on PostgreSQL, which also reports reconnects), every five minutes,
//! and after a failure (or a status the store did not take) with exponential backoff. Only
//! the holder of the installation's lease runs passes; other replicas stand by and take over
//! when the lease frees. On shutdown the pass in progress may finish its cluster writes for
//! [`Settings::shutdown_grace`]; then the loop returns and the lease is released.
//!
//! Metrics: see [`crate::metrics`].

use palisade_api_types::view::InstallStatus;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use palisade_api_types::PolicySpec;
use palisade_policy::name::NameError;
use palisade_policy::{Catalog, Mode, Name, Policy};
use palisade_store::{
    ClusterRecord, Lease, NamespaceRecord, PolicyRecord, PolicyStatusRecord, SharedStore,
    StoreError,
};

use crate::audit::{self, AuditJob, Audits};
use crate::metrics::{self, Outcome};
use crate::probe::{Admission, EnforcementProbe};
use crate::statuses::StatusWatch;
use crate::workloads::{self, Target, Workloads};
use crate::{ClusterClient, ReconcileError};
use palisade_vap::{choose, Choice, ClusterFacts, Layout, LayoutChoice, Thresholds};

/// Turns a cluster's sealed kubeconfig back into its text.
pub type Unseal = Arc<dyn Fn(&[u8]) -> Result<String, String> + Send + Sync>;

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
    /// How often a cluster's API server start time is read (from its `/metrics`, about 1 MB)
    /// to notice restarts.
    pub apiserver_check_interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            resync: Duration::from_secs(300),
            cluster_timeout: Duration::from_secs(60),
            min_backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            lease_retry: Duration::from_secs(5),
            shutdown_grace: Duration::from_secs(10),
            audit_interval: Duration::from_secs(600),
            audit_timeout: Duration::from_secs(300),
            workloads: Workloads::default(),
            layout: LayoutChoice::default(),
            thresholds: Thresholds::default(),
            apiserver_check_interval: Duration::from_secs(60),
        }
    }
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
    /// Clusters with a status (the cluster's or its policies') that the store did not take:
    /// logged, counted, and retried with backoff like a failure.
    pub unrecorded: BTreeSet<String>,
}

impl PassReport {
    /// Whether the pass left something to retry with backoff.
    pub fn incomplete(&self) -> bool {
        !self.failed.is_empty() || !self.unrecorded.is_empty()
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

/// The status line `error: <reason>` of SPEC 3.4, the reason shortened.
pub fn status_error(reason: &str) -> String {
    InstallStatus::Error(short(reason)).to_string()
}

/// The status line `not enforced: <reason>` of SPEC 3.4, the reason shortened.
pub fn status_not_enforced(reason: &str) -> String {
    InstallStatus::NotEnforced(short(reason)).to_string()
}

/// One boundary as the store holds it, read once per pass.
#[derive(Debug)]
struct BoundaryState {
    name: Name,
    /// Every stored policy, decoded (or why it cannot be).
    policies: Vec<(PolicyRecord, Result<Policy, ControllerError>)>,
    clusters: BTreeSet<String>,
    namespaces: Vec<NamespaceRecord>,
}

/// A cluster's API server start times (milliseconds since the epoch) palisade has seen.
struct ApiServersSeen {
    /// Wall-clock time (seconds since the epoch) of palisade's first look.
    first_look: f64,
    starts: BTreeSet<u64>,
    read_at: Instant,
    /// The cluster failed a pass since the last reading (an API server that stops and starts
    /// again does): read its start time on the next pass, not only once the interval passed.
    suspect: bool,
}

/// A connection kept between passes, replaced when the credentials change.
#[derive(Clone)]
struct Connection {
    sealed: Vec<u8>,
    client: ClusterClient,
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
}

/// One cluster's part of a pass, as its task reports it.
#[derive(Debug)]
struct ClusterDone {
    name: String,
    result: Result<ClusterPass, ControllerError>,
    /// Every status write of the part (or of its failure) succeeded.
    recorded: bool,
}

/// One policy's part of a boundary's pass, for [`Controller::install`].
struct Install<'a> {
    cluster: &'a str,
    boundary: &'a Name,
    /// The boundary's other policies in the cluster (the probe complies with them).
    others: &'a [Policy],
    probe_namespace: Option<&'a str>,
    /// The boundary's policies were written together already, with this outcome.
    together: Option<&'a Result<(), String>>,
    /// The cluster is changing layout and the earlier layout's objects are still there.
    switching: bool,
}

/// How a lead (the loop while this replica holds the lease) ended.
enum LeadEnd {
    Shutdown,
    LostLease,
}

/// The reconciler of one installation.
pub struct Controller {
    store: SharedStore,
    catalog: Arc<Catalog>,
    unseal: Unseal,
    installation: String,
    settings: Settings,
    connections: Mutex<HashMap<String, Connection>>,
    /// Per cluster: the API server start times seen, and when palisade first and last looked.
    apiservers: Mutex<HashMap<String, ApiServersSeen>>,
    /// When a (cluster, boundary, policy, etag) was first seen applied but not enforcing.
    unconfirmed: Mutex<HashMap<(String, String, String, String), Instant>>,
    audits: Audits,
    /// The status watch of each cluster with workloads, with the credentials it was made from.
    watches: Mutex<HashMap<String, (Vec<u8>, StatusWatch)>>,
    /// Notified by a status watch when a build finished: the next pass deploys it.
    builds_done: Arc<tokio::sync::Notify>,
    /// Per cluster: its layout and how often its policies change.
    layouts: Mutex<HashMap<String, LayoutState>>,
}

/// What the controller knows of a cluster's layout between passes.
#[derive(Debug, Default)]
struct LayoutState {
    /// The layout every boundary's objects are in since the last pass that completed a switch
    /// (`None`: not known yet).
    current: Option<Layout>,
    /// The etag of each (boundary, policy) applied, to notice changes.
    etags: HashMap<(String, String), String>,
    /// When the changes of the last hour were seen.
    changes: std::collections::VecDeque<Instant>,
    last_change: Option<Instant>,
    /// What the cluster shows (layout, reason), as last recorded.
    shown: Option<(Layout, String)>,
}

impl LayoutState {
    /// Counts the policies whose etag changed since the last pass.
    fn observe(&mut self, policies: impl Iterator<Item = ((String, String), String)>) {
        let now = Instant::now();
        for (key, etag) in policies {
            if let Some(before) = self.etags.insert(key, etag.clone()) {
                if before != etag {
                    self.changes.push_back(now);
                    self.last_change = Some(now);
                }
            }
        }
        while self
            .changes
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(3600))
        {
            self.changes.pop_front();
        }
    }

    fn facts(&self, minor: u32, boundaries: usize) -> ClusterFacts {
        ClusterFacts {
            kubernetes_minor: minor,
            boundaries,
            policy_changes_last_hour: self.changes.len(),
            since_last_change: self.last_change.map(|t| t.elapsed()),
        }
    }
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
    pub fn new(
        store: SharedStore,
        catalog: Arc<Catalog>,
        unseal: Unseal,
        installation: String,
        settings: Settings,
    ) -> Arc<Self> {
        metrics::describe();
        Arc::new(Controller {
            store,
            catalog,
            unseal,
            installation,
            settings,
            connections: Mutex::new(HashMap::new()),
            apiservers: Mutex::new(HashMap::new()),
            unconfirmed: Mutex::new(HashMap::new()),
            audits: Audits::default(),
            watches: Mutex::new(HashMap::new()),
            builds_done: Arc::new(tokio::sync::Notify::new()),
            layouts: Mutex::new(HashMap::new()),
        })
    }

    pub fn installation(&self) -> &str {
        &self.installation
    }

    /// Runs until `shutdown` completes: waits for the lease, then reconciles on every change,
    /// every `resync`, and after failures with backoff. Gives the lease up when it is lost.
    ///
    /// When `shutdown` completes during a pass, the pass may go on for
    /// [`Settings::shutdown_grace`] to finish its cluster writes; whatever is still running
    /// then is abandoned. Returns at once otherwise. The lease is released on return.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut changes = loop {
            let subscribed = tokio::select! {
                () = &mut shutdown => return,
                subscribed = self.store.subscribe() => subscribed,
            };
            match subscribed {
                Ok(changes) => break changes,
                Err(error) => {
                    tracing::warn!(%error, "reconciler: cannot follow changes; retrying");
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(self.settings.min_backoff) => {}
                    }
                }
            }
        };
        let mut standing_by = false;
        loop {
            let taken = tokio::select! {
                () = &mut shutdown => return,
                taken = self.store.try_lease(&self.installation) => taken,
            };
            let lease = match taken {
                Ok(Some(lease)) => lease,
                Ok(None) => {
                    if !standing_by {
                        tracing::info!(
                            installation = %self.installation,
                            "reconciler standing by: another process holds this installation's lease (it takes over when that one stops)"
                        );
                        standing_by = true;
                    }
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(self.settings.lease_retry) => continue,
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "reconciler: cannot take the lease; retrying");
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(self.settings.lease_retry) => continue,
                    }
                }
            };
            standing_by = false;
            tracing::info!(installation = %self.installation, "reconciler active");
            metrics::active(true);
            let end = self.lead(&lease, &mut changes, shutdown.as_mut()).await;
            metrics::active(false);
            // Only the active replica writes workloads' statuses.
            if let Ok(mut watches) = self.watches.lock() {
                watches.clear();
            }
            drop(lease);
            match end {
                LeadEnd::Shutdown => {
                    tracing::info!(installation = %self.installation, "reconciler stopped; lease released");
                    return;
                }
                LeadEnd::LostLease => {
                    tracing::warn!("reconciler: lost the lease; standing by");
                }
            }
        }
    }

    /// Passes while `lease` holds, until `shutdown` completes or the change feed ends.
    async fn lead(
        self: &Arc<Self>,
        lease: &Lease,
        changes: &mut tokio::sync::watch::Receiver<u64>,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> LeadEnd {
        let mut backoff: Option<Duration> = None;
        loop {
            changes.borrow_and_update();
            let pass = self.reconcile_all();
            tokio::pin!(pass);
            let report = tokio::select! {
                report = &mut pass => report,
                () = &mut shutdown => {
                    self.finish_on_shutdown(pass).await;
                    return LeadEnd::Shutdown;
                }
            };
            let wait = if !report.incomplete() {
                backoff = None;
                if report.unconfirmed > 0 {
                    RECHECK
                } else {
                    self.settings.resync.min(self.settings.audit_interval)
                }
            } else {
                let next = backoff
                    .map_or(self.settings.min_backoff, |b| b * 2)
                    .min(self.settings.max_backoff);
                tracing::warn!(
                    failed = ?report.failed,
                    unrecorded = ?report.unrecorded,
                    retry_in = ?next,
                    "reconcile pass incomplete"
                );
                backoff = Some(next);
                next
            };
            tokio::select! {
                () = &mut shutdown => return LeadEnd::Shutdown,
                changed = changes.changed() => {
                    if changed.is_err() {
                        tracing::warn!("reconciler: the change feed ended");
                        return LeadEnd::Shutdown;
                    }
                }
                () = tokio::time::sleep(wait) => {}
                () = self.builds_done.notified() => {}
            }
            let held = tokio::select! {
                () = &mut shutdown => return LeadEnd::Shutdown,
                held = lease.held() => held,
            };
            if !held {
                return LeadEnd::LostLease;
            }
        }
    }

    /// Lets a pass that shutdown interrupted finish for at most `shutdown_grace`; past it, the
    /// pass is dropped, which aborts its cluster tasks.
    async fn finish_on_shutdown(&self, pass: Pin<&mut impl Future<Output = PassReport>>) {
        let grace = self.settings.shutdown_grace;
        tracing::info!(
            ?grace,
            "reconciler: stopping; the pass in progress may finish"
        );
        match tokio::time::timeout(grace, pass).await {
            Ok(report) if report.incomplete() => tracing::warn!(
                failed = ?report.failed,
                unrecorded = ?report.unrecorded,
                "reconciler: the last pass finished incomplete"
            ),
            Ok(_) => tracing::info!("reconciler: the last pass finished"),
            Err(_) => tracing::warn!(
                ?grace,
                "reconciler: the pass in progress did not finish in time; the rest of it is abandoned"
            ),
        }
    }

    /// One full pass over every cluster.
    pub async fn reconcile_all(self: &Arc<Self>) -> PassReport {
        let mut report = PassReport::default();
        let (clusters, boundaries) = match self.read_state().await {
            Ok(state) => state,
            Err(error) => {
                metrics::store_read_failed();
                report.failed.insert(
                    "*".to_owned(),
                    ControllerError::ReadStore(error).to_string(),
                );
                return report;
            }
        };
        let boundaries = Arc::new(boundaries);
        let mut tasks = tokio::task::JoinSet::new();
        for cluster in clusters {
            let this = Arc::clone(self);
            let boundaries = Arc::clone(&boundaries);
            tasks.spawn(async move { this.cluster_pass(&cluster, &boundaries).await });
        }
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(done) => {
                    if !done.recorded {
                        report.unrecorded.insert(done.name.clone());
                    }
                    match done.result {
                        Ok(pass) => {
                            for job in pass.audits {
                                let this = Arc::clone(self);
                                tokio::spawn(async move {
                                    let timeout = this.settings.audit_timeout;
                                    audit::run(
                                        &this.audits,
                                        &this.store,
                                        &this.installation,
                                        job,
                                        timeout,
                                    )
                                    .await;
                                });
                            }
                            report.unconfirmed += pass.unconfirmed;
                            if let Some(error) = pass.workloads_failed {
                                report.failed.insert(done.name.clone(), error);
                            }
                            report.reconciled.insert(done.name);
                        }
                        Err(error) => {
                            report.failed.insert(done.name, error.to_string());
                        }
                    }
                }
                Err(error) => {
                    report
                        .failed
                        .insert("*".to_owned(), ControllerError::Task(error).to_string());
                }
            }
        }
        report
    }

    /// One cluster's part of a pass, under `cluster_timeout`, measured and counted; a failure
    /// is recorded in the cluster's and its policies' statuses.
    async fn cluster_pass(
        &self,
        cluster: &ClusterRecord,
        boundaries: &[BoundaryState],
    ) -> ClusterDone {
        let started = Instant::now();
        let result = match tokio::time::timeout(
            self.settings.cluster_timeout,
            self.reconcile_cluster(cluster, boundaries),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(ControllerError::Timeout(self.settings.cluster_timeout)),
        };
        // A cluster deleted while its pass ran: what the pass wrote after the deletion's
        // sweeps (the guard, policies) would stay in a cluster nobody reconciles any more.
        if matches!(
            self.store.get_cluster(&cluster.name).await,
            Err(StoreError::NotFound)
        ) {
            if let Ok(connection) = self.connect(cluster).await {
                if let Err(error) = connection
                    .client
                    .remove_installation(&self.installation)
                    .await
                {
                    tracing::warn!(cluster = %cluster.name, %error, "objects of a cluster deleted during its pass not removed");
                }
            }
        }
        let outcome = match &result {
            Ok(pass) if pass.enforced => Outcome::Ok,
            Ok(_) => Outcome::NotEnforced,
            Err(_) => Outcome::Error,
        };
        metrics::pass(&cluster.name, outcome, started.elapsed());
        let recorded = match &result {
            Ok(pass) => pass.recorded,
            Err(error) => self.record_failure(cluster, boundaries, error).await,
        };
        ClusterDone {
            name: cluster.name.clone(),
            result,
            recorded,
        }
    }

    async fn read_state(&self) -> Result<(Vec<ClusterRecord>, Vec<BoundaryState>), StoreError> {
        let clusters = self.store.list_clusters().await?;
        let mut boundaries = Vec::new();
        for boundary in self.store.list_boundaries().await? {
            let Ok(name) = Name::parse(&boundary.name) else {
                tracing::warn!(boundary = %boundary.name, "skipped: not a valid boundary name");
                continue;
            };
            let policies = match self.store.list_policies(&boundary.name).await {
                Ok(policies) => policies,
                // Deleted since it was listed.
                Err(StoreError::NotFound) => continue,
                Err(other) => return Err(other),
            };
            let policies = policies
                .into_iter()
                .map(|record| {
                    let decoded = decode(&record, &self.catalog);
                    (record, decoded)
                })
                .collect();
            let clusters = match self.store.boundary_clusters(&boundary.name).await {
                Ok(clusters) => clusters.into_iter().map(|c| c.name).collect(),
                Err(StoreError::NotFound) => continue,
                Err(other) => return Err(other),
            };
            let namespaces = match self.store.list_namespaces(&boundary.name).await {
                Ok(namespaces) => namespaces,
                Err(StoreError::NotFound) => continue,
                Err(other) => return Err(other),
            };
            boundaries.push(BoundaryState {
                name,
                policies,
                clusters,
                namespaces,
            });
        }
        Ok((clusters, boundaries))
    }

    /// The cached connection to `cluster`, or a new one when its credentials changed.
    async fn connect(&self, cluster: &ClusterRecord) -> Result<Connection, ControllerError> {
        let cached = self
            .connections
            .lock()
            .ok()
            .and_then(|c| c.get(&cluster.name).cloned())
            .filter(|c| c.sealed == cluster.kubeconfig_sealed);
        if let Some(connection) = cached {
            return Ok(connection);
        }
        let kubeconfig =
            (self.unseal)(&cluster.kubeconfig_sealed).map_err(ControllerError::Credentials)?;
        let client = ClusterClient::from_kubeconfig(&kubeconfig).await?;
        let connection = Connection {
            sealed: cluster.kubeconfig_sealed.clone(),
            client,
            identity: None,
        };
        if let Ok(mut connections) = self.connections.lock() {
            connections.insert(cluster.name.clone(), connection.clone());
        }
        Ok(connection)
    }

    /// Reads (at most every `apiserver_check_interval`) when the cluster's API server started;
    /// one that started after palisade first looked, and was not seen before, is a restart (or
    /// an instance added): counted on the cluster (`api_server_restarts`) and on `/metrics`.
    /// Behind a load balancer each read may reach another instance; instances that started
    /// before the first look are never counted. A cluster whose role lacks `get` on `/metrics`
    /// is simply not watched for restarts.
    async fn notice_restarts(&self, cluster: &str, client: &ClusterClient) {
        let due = self.apiservers.lock().is_ok_and(|seen| {
            seen.get(cluster).is_none_or(|s| {
                s.suspect || s.read_at.elapsed() >= self.settings.apiserver_check_interval
            })
        });
        if !due {
            return;
        }
        let started = match client.apiserver_started_at().await {
            Ok(started) => started,
            Err(error) => {
                tracing::debug!(cluster, %error, "the API server's start time was not read");
                return;
            }
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let restarted = match self.apiservers.lock() {
            Ok(mut seen) => {
                let seen = seen
                    .entry(cluster.to_owned())
                    .or_insert_with(|| ApiServersSeen {
                        first_look: now,
                        starts: BTreeSet::new(),
                        read_at: Instant::now(),
                        suspect: false,
                    });
                seen.read_at = Instant::now();
                seen.suspect = false;
                let key = (started * 1000.0).round() as u64;
                seen.starts.insert(key) && started > seen.first_look
            }
            Err(_) => false,
        };
        if restarted {
            tracing::warn!(
                cluster,
                started_at = started,
                "an API server of the cluster restarted (or was added): it compiles every admission policy again"
            );
            metrics::apiserver_restarted(cluster);
            let result = self
                .store
                .add_apiserver_restarts(cluster, 1)
                .await
                .map_err(ControllerError::ClusterStatus);
            self.recorded(cluster, "an API server restart", result);
        }
    }

    /// Learns (once per connection) the user palisade acts as in the cluster.
    async fn identity(
        &self,
        cluster: &str,
        connection: &mut Connection,
    ) -> Result<String, ControllerError> {
        if let Some(identity) = &connection.identity {
            return Ok(identity.clone());
        }
        let identity = connection.client.whoami().await?;
        connection.identity = Some(identity.clone());
        if let Ok(mut connections) = self.connections.lock() {
            if let Some(cached) = connections.get_mut(cluster) {
                cached.identity = Some(identity.clone());
            }
        }
        Ok(identity)
    }

    /// Reconciles one cluster.
    async fn reconcile_cluster(
        &self,
        cluster: &ClusterRecord,
        boundaries: &[BoundaryState],
    ) -> Result<ClusterPass, ControllerError> {
        let mut unconfirmed = 0;
        let mut connection = self.connect(cluster).await?;
        let cluster_name = Name::parse(&cluster.name).map_err(ControllerError::ClusterName)?;
        let probe = connection.client.probe().await?;
        self.notice_restarts(&cluster.name, &connection.client)
            .await;
        let (enforced, reason) = match &probe.admission {
            Admission::Enforced => (true, None),
            Admission::NotEnforced(reason) => (false, Some(reason.as_str())),
        };
        self.store
            .set_cluster_status(
                &cluster.name,
                Some(&probe.kubernetes_version),
                Some(enforced),
                reason,
            )
            .await
            .map_err(ControllerError::ClusterStatus)?;
        let attached: Vec<&BoundaryState> = boundaries
            .iter()
            .filter(|b| b.clusters.contains(&cluster.name))
            .collect();

        if let Admission::NotEnforced(reason) = &probe.admission {
            // Nothing is written to a cluster that cannot enforce; every policy says why.
            for boundary in &attached {
                let statuses = wanted(boundary, &cluster_name)
                    .map(|(record, _)| {
                        status_record(boundary, record, &cluster.name, status_not_enforced(reason))
                    })
                    .collect();
                self.write_statuses(&cluster.name, boundary, statuses)
                    .await?;
            }
            let reason = format!(
                "cluster '{}' cannot enforce admission rules: {reason}",
                cluster.name
            );
            self.not_deployed(&cluster.name, &reason).await?;
            let recorded = self.clear_error(&cluster.name).await;
            return Ok(ClusterPass {
                unconfirmed: 0,
                enforced: false,
                recorded,
                audits: Vec::new(),
                workloads_failed: None,
            });
        }

        let choice = self.choose_layout(cluster, probe.minor, &attached, &cluster_name);
        let client = connection.client.clone().with_layout(choice.layout);
        let identity = self.identity(&cluster.name, &mut connection).await?;
        client
            .install_boundary_label_guard(&self.installation, &identity)
            .await
            .map_err(ControllerError::Guard)?;
        if choice.layout == Layout::Shared {
            // Every pass: objects changed or deleted by others come back.
            client
                .install_shared(&self.installation)
                .await
                .map_err(ControllerError::Shared)?;
            client
                .install_parameters_guard(&self.installation, &identity)
                .await
                .map_err(ControllerError::Guard)?;
        }

        self.restore_labels(&client, &cluster.name, &attached)
            .await?;

        let mut attached_names = BTreeSet::new();
        let mut audits = Vec::new();
        let mut switches_left = 0usize;
        let mut shared_left = false;
        for boundary in &attached {
            attached_names.insert(boundary.name.to_string());
            let probe_namespace = boundary
                .namespaces
                .iter()
                .find(|n| n.cluster == cluster.name)
                .map(|n| n.name.clone());
            let mut keep = Vec::new();
            let mut statuses = Vec::new();
            let in_cluster: Vec<Policy> = wanted(boundary, &cluster_name)
                .filter_map(|(_, decoded)| decoded.as_ref().ok().cloned())
                .collect();
            let present = client
                .layouts_present(&self.installation, &boundary.name)
                .await?;
            let switching = present.iter().any(|l| *l != choice.layout);
            let together = self
                .apply_together(&client, boundary, &cluster_name, &in_cluster, switching)
                .await;
            // Every probe of the boundary saw the new layout's objects at work.
            let mut confirmed = !boundary.policies.iter().any(|(_, d)| d.is_err());
            for (record, decoded) in wanted(boundary, &cluster_name) {
                let status = match decoded {
                    Err(reason) => status_error(&reason.to_string()),
                    Ok(policy) => {
                        keep.push(policy.name().clone());
                        let install = Install {
                            cluster: &cluster.name,
                            boundary: &boundary.name,
                            others: &in_cluster,
                            probe_namespace: probe_namespace.as_deref(),
                            together: together.as_ref(),
                            switching,
                        };
                        let (status, in_new_layout) = self.install(&client, policy, install).await;
                        confirmed &= in_new_layout;
                        let key = (
                            cluster.name.clone(),
                            boundary.name.to_string(),
                            record.name.clone(),
                            record.etag.clone(),
                        );
                        self.within_grace(key, status, &mut unconfirmed)
                    }
                };
                statuses.push(status_record(boundary, record, &cluster.name, status));
            }
            // Policies that cannot be decoded keep whatever they had installed.
            keep.extend(
                boundary
                    .policies
                    .iter()
                    .filter(|(_, d)| d.is_err())
                    .filter_map(|(r, _)| Name::parse(&r.name).ok()),
            );
            // During a switch, the earlier layout's objects stay until the new layout's are
            // confirmed (SPEC 3.4: no gap).
            let kept = crate::plan::keep(&present, choice.layout, confirmed);
            let still_switching = kept.switch_bindings;
            let removed = client
                .garbage_collect_keeping(
                    &self.installation,
                    &boundary.name,
                    &keep,
                    &kept.layouts,
                    kept.switch_bindings,
                )
                .await
                .map_err(ControllerError::RemovePolicies)?;
            metrics::removed(&cluster.name, removed.len());
            if still_switching {
                switches_left += 1;
                shared_left |= present.contains(&Layout::Shared);
            }
            self.write_statuses(&cluster.name, boundary, statuses)
                .await?;
            audits.extend(self.audit_due(&client, &cluster.name, &cluster_name, boundary));
        }
        if choice.layout != Layout::Shared && !shared_left {
            // Left by the shared layout before a switch: inert once the boundaries' parameters
            // are gone (above), but every request would still pay for looking them up.
            client
                .remove_shared_once(&self.installation)
                .await
                .map_err(ControllerError::RemoveShared)?;
        }
        if choice.layout == Layout::Shared && switches_left == 0 {
            client
                .remove_shared_switch(&self.installation)
                .await
                .map_err(ControllerError::RemoveShared)?;
        }
        self.record_layout(&cluster.name, &choice, switches_left)
            .await;
        // A failure here (e.g. a role without the workloads' verbs) is the cluster's error,
        // not the policies': they are installed and confirmed above.
        let workloads = self
            .deploy_workloads(&connection, &cluster.name, &attached)
            .await;
        // Boundaries detached from this cluster, or deleted: their objects go.
        let installed = client.installed_boundaries(&self.installation).await?;
        for stale in installed.difference(&attached_names) {
            let Ok(boundary) = Name::parse(stale) else {
                continue;
            };
            let removed = client
                .garbage_collect(&self.installation, &boundary, &[])
                .await
                .map_err(|error| ControllerError::RemoveBoundary {
                    boundary: stale.clone(),
                    error,
                })?;
            metrics::removed(&cluster.name, removed.len());
            if client.serves_reports().await.unwrap_or(false) {
                client
                    .sync_reports(&self.installation, &boundary, &[])
                    .await
                    .map_err(|error| ControllerError::RemoveBoundary {
                        boundary: stale.clone(),
                        error,
                    })?;
            }
        }
        let (recorded, workloads_failed) = match workloads {
            Ok(()) => (self.clear_error(&cluster.name).await, None),
            Err(error) => {
                let text = error.to_string();
                tracing::warn!(cluster = %cluster.name, error = %text, "workloads not deployed");
                let result = self
                    .store
                    .set_cluster_error(&cluster.name, Some(&text))
                    .await
                    .map_err(ControllerError::ClusterStatus);
                (
                    self.recorded(&cluster.name, "the cluster's last error", result),
                    Some(text),
                )
            }
        };
        Ok(ClusterPass {
            unconfirmed,
            enforced: true,
            recorded,
            audits,
            workloads_failed,
        })
    }

    /// Puts each boundary namespace's `palisade.dev/boundary` label back where someone removed
    /// or changed it (the guard stops everyone but palisade; a cluster admin may still delete
    /// the guard), before anything is probed: a namespace without its label is judged by none
    /// of the boundary's policies. Each repair is counted and recorded on the cluster.
    async fn restore_labels(
        &self,
        client: &ClusterClient,
        cluster: &str,
        attached: &[&BoundaryState],
    ) -> Result<(), ControllerError> {
        for boundary in attached {
            for namespace in boundary.namespaces.iter().filter(|n| n.cluster == cluster) {
                if !self
                    .still_registered(&boundary.name, cluster, &namespace.name)
                    .await
                {
                    continue;
                }
                let Some(tampering) = client
                    .restore_boundary_label(&boundary.name, &namespace.name)
                    .await
                    .map_err(ControllerError::RestoreLabel)?
                else {
                    continue;
                };
                let repair = tampering.repair(&namespace.name);
                tracing::warn!(cluster, boundary = %boundary.name, repair, "boundary label repaired");
                metrics::repaired(cluster, "namespace_label");
                let result = self
                    .store
                    .record_repair(cluster, &repair)
                    .await
                    .map_err(ControllerError::ClusterStatus);
                self.recorded(cluster, "a repair", result);
            }
        }
        Ok(())
    }

    /// Whether `namespace` is still registered for `boundary` in the store, read again before a
    /// missing label is put back: a release (which removes the label, then the record) may have
    /// run since the pass read its state; its label must stay removed. A store that cannot be
    /// read counts as registered (the label is put back; a release removes it again).
    async fn still_registered(&self, boundary: &Name, cluster: &str, namespace: &str) -> bool {
        !matches!(
            self.store
                .get_namespace(boundary.as_str(), cluster, namespace)
                .await,
            Err(StoreError::NotFound)
        )
    }

    /// Applies the workloads placed in the cluster (SPEC 5) and hands their outcomes to the
    /// cluster's status watch (started here, and stopped when no workload is left).
    async fn deploy_workloads(
        &self,
        connection: &Connection,
        cluster: &str,
        attached: &[&BoundaryState],
    ) -> Result<(), ControllerError> {
        let records = self
            .store
            .resources_in_cluster(cluster)
            .await
            .map_err(ControllerError::ReadWorkloads)?;
        let namespaces: BTreeMap<String, Vec<NamespaceRecord>> = attached
            .iter()
            .map(|b| {
                let in_cluster = b
                    .namespaces
                    .iter()
                    .filter(|n| n.cluster == cluster)
                    .cloned()
                    .collect();
                (b.name.to_string(), in_cluster)
            })
            .collect();
        let targets = workloads::sync(
            &connection.client,
            &self.installation,
            &records,
            &namespaces,
            &self.catalog,
            &self.settings.workloads,
        )
        .await
        .map_err(ControllerError::Workloads)?;
        self.follow_statuses(cluster, connection, targets);
        Ok(())
    }

    fn follow_statuses(&self, cluster: &str, connection: &Connection, targets: Vec<Target>) {
        let Ok(mut watches) = self.watches.lock() else {
            return;
        };
        if targets.is_empty() {
            watches.remove(cluster);
            return;
        }
        if let Some((sealed, watch)) = watches.get(cluster) {
            if *sealed == connection.sealed && watch.is_running() {
                watch.update(targets);
                return;
            }
        }
        let watch = StatusWatch::start(
            connection.client.client().clone(),
            &self.installation,
            self.store.clone(),
            targets,
            self.builds_done.clone(),
        );
        watches.insert(cluster.to_owned(), (connection.sealed.clone(), watch));
    }

    /// Every workload placed in a cluster that nothing is written to says why.
    async fn not_deployed(&self, cluster: &str, reason: &str) -> Result<(), ControllerError> {
        let records = self
            .store
            .resources_in_cluster(cluster)
            .await
            .map_err(ControllerError::ReadWorkloads)?;
        if let Ok(mut watches) = self.watches.lock() {
            watches.remove(cluster);
        }
        let status = format!("not deployed: {reason}");
        for record in records {
            let key = palisade_store::ResourceKey {
                boundary: record.boundary,
                resource_type: record.resource_type,
                name: record.name,
            };
            self.store
                .set_resource_status(&key, &status)
                .await
                .map_err(ControllerError::Statuses)?;
        }
        Ok(())
    }

    /// The boundary's audit in the cluster when it is due (no other runs until it ends; a
    /// change seen meanwhile is queued behind it).
    fn audit_due(
        &self,
        client: &ClusterClient,
        cluster: &str,
        cluster_name: &Name,
        boundary: &BoundaryState,
    ) -> Option<AuditJob> {
        let policies: Vec<(String, Policy)> = wanted(boundary, cluster_name)
            .filter_map(|(record, decoded)| {
                decoded
                    .as_ref()
                    .ok()
                    .map(|policy| (record.etag.clone(), policy.clone()))
            })
            .collect();
        let namespaces: Vec<&str> = boundary
            .namespaces
            .iter()
            .filter(|n| n.cluster == cluster)
            .map(|n| n.name.as_str())
            .collect();
        let fingerprint = audit::fingerprint(&policies, &namespaces);
        let job = AuditJob {
            cluster: cluster.to_owned(),
            client: client.clone(),
            boundary: boundary.name.clone(),
            policies,
        };
        self.audits
            .offer(job, fingerprint, self.settings.audit_interval)
    }

    /// A probe that did not confirm a version first seen less than `ACTIVATION_GRACE` ago
    /// (admitted, or refused by the version it replaces) is still `pending`: the API server
    /// has not activated it yet. Counted as unconfirmed, so a pass follows shortly.
    fn within_grace(
        &self,
        key: (String, String, String, String),
        status: String,
        unconfirmed: &mut usize,
    ) -> String {
        let Ok(mut seen) = self.unconfirmed.lock() else {
            return status;
        };
        seen.retain(|_, first| first.elapsed() < ACTIVATION_GRACE * 10);
        let settling = matches!(status.parse(), Ok(InstallStatus::NotEnforced(_)))
            || status.starts_with(&status_error(crate::probe::PROBE_REFUSED));
        if !settling {
            seen.remove(&key);
            return status;
        }
        let first = *seen.entry(key).or_insert_with(Instant::now);
        if first.elapsed() < ACTIVATION_GRACE {
            *unconfirmed += 1;
            InstallStatus::Pending.to_string()
        } else {
            status
        }
    }

    /// Writes the boundary's policies in the cluster together, before any is probed: in the
    /// per-boundary layout (whose objects hold several policies), and during a switch of layout
    /// (followed by the switch bindings, which must come after the objects they prove). `None`
    /// otherwise: each policy is applied by [`Self::install`]. A per-boundary boundary with a
    /// policy that cannot be decoded is not written: its objects hold that policy's rules with
    /// the others', and writing without them would drop them.
    async fn apply_together(
        &self,
        client: &ClusterClient,
        boundary: &BoundaryState,
        cluster: &Name,
        in_cluster: &[Policy],
        switching: bool,
    ) -> Option<Result<(), String>> {
        if client.layout() != Layout::PerBoundary && !switching {
            return None;
        }
        if client.layout() == Layout::PerBoundary {
            if let Some((record, _)) = wanted(boundary, cluster).find(|(_, d)| d.is_err()) {
                return Some(Err(format!(
                    "not applied: policy '{}' of the boundary cannot be decoded, and the boundary's \
                     admission objects hold its rules with this policy's; they are left as they were",
                    record.name
                )));
            }
        }
        let mut result = client
            .apply_boundary(&self.installation, &boundary.name, in_cluster)
            .await;
        if switching && result.is_ok() {
            result = client
                .apply_switch_bindings(&self.installation, &boundary.name, in_cluster)
                .await;
        }
        Some(result.map_err(|error| error.to_string()))
    }

    /// Applies one policy (unless the boundary's policies were applied `together`) and reads
    /// back what it enforces. The flag: the policy is confirmed in the client's layout (or
    /// there is nothing to probe), so a switch may remove the earlier layout's objects.
    async fn install(
        &self,
        client: &ClusterClient,
        policy: &Policy,
        install: Install<'_>,
    ) -> (String, bool) {
        let Install {
            cluster,
            boundary,
            others,
            probe_namespace,
            together,
            switching,
        } = install;
        let applied = match together {
            Some(result) => result.clone(),
            None => client
                .apply_policy(&self.installation, boundary, policy)
                .await
                .map_err(|error| error.to_string()),
        };
        if let Err(error) = applied {
            return (status_error(&error), false);
        }
        metrics::applied(cluster);
        let Some(namespace) = probe_namespace else {
            // No namespace of the boundary: nothing is judged by either layout yet.
            return (InstallStatus::Installed.to_string(), true);
        };
        let probe = if switching {
            client
                .probe_during_switch(&self.installation, boundary, policy, others, namespace)
                .await
        } else {
            client
                .probe_enforcement_among(&self.installation, boundary, policy, others, namespace)
                .await
        };
        let enforced = || match policy.mode() {
            Mode::Enforce => InstallStatus::Enforced.to_string(),
            // Confirmed, but it denies nothing: never shown as `enforced`.
            Mode::Audit => InstallStatus::AuditActive.to_string(),
        };
        match probe {
            Ok(EnforcementProbe::Enforced) => (enforced(), true),
            Ok(EnforcementProbe::EnforcedByEarlierLayout) => (enforced(), false),
            Ok(EnforcementProbe::NotEnforced(reason)) => (status_not_enforced(&reason), false),
            Ok(EnforcementProbe::Inconclusive(reason)) => (status_error(&reason), false),
            Err(ReconcileError::Kube(kube::Error::Api(status))) if status.code == 404 => {
                // The namespace is gone from the cluster: installed, but not probed.
                (InstallStatus::Installed.to_string(), true)
            }
            Err(error) => (status_error(&error.to_string()), false),
        }
    }

    /// The layout of `cluster` for this pass, from `--admission-layout` or, for `auto`, from
    /// its version, its boundaries and how often its policies changed.
    fn choose_layout(
        &self,
        cluster: &ClusterRecord,
        minor: u32,
        attached: &[&BoundaryState],
        cluster_name: &Name,
    ) -> Choice {
        let Ok(mut layouts) = self.layouts.lock() else {
            return choose(
                self.settings.layout,
                &LayoutState::default().facts(minor, attached.len()),
                None,
                &self.settings.thresholds,
            );
        };
        let state = layouts
            .entry(cluster.name.clone())
            .or_insert_with(|| LayoutState {
                // What an earlier process recorded: the layout the cluster's objects are in.
                current: cluster
                    .admission_layout
                    .as_deref()
                    .and_then(|l| l.parse().ok()),
                ..LayoutState::default()
            });
        state.observe(attached.iter().flat_map(|boundary| {
            wanted(boundary, cluster_name).map(|(record, _)| {
                (
                    (boundary.name.to_string(), record.name.clone()),
                    record.etag.clone(),
                )
            })
        }));
        choose(
            self.settings.layout,
            &state.facts(minor, attached.len()),
            state.current,
            &self.settings.thresholds,
        )
    }

    /// Remembers the layout once no boundary is still switching, and shows it on the cluster
    /// (`GET /v1/clusters/{c}`, `palisade get clusters`) when it changed.
    async fn record_layout(&self, cluster: &str, choice: &Choice, switches_left: usize) {
        let changed = {
            let Ok(mut layouts) = self.layouts.lock() else {
                return;
            };
            let state = layouts.entry(cluster.to_owned()).or_default();
            if switches_left == 0 {
                state.current = Some(choice.layout);
            }
            let shown = match state.current {
                Some(layout) if layout != choice.layout => (
                    layout,
                    format!("switching to {}: {}", choice.layout, choice.reason),
                ),
                _ => (choice.layout, choice.reason.clone()),
            };
            (state.shown.as_ref() != Some(&shown)).then(|| {
                state.shown = Some(shown.clone());
                shown
            })
        };
        let Some(shown) = changed else {
            return;
        };
        let (layout, reason) = shown;
        tracing::info!(cluster, layout = %layout, reason, "admission layout");
        metrics::layout(cluster, layout);
        let result = self
            .store
            .set_cluster_layout(cluster, layout.as_str(), &reason)
            .await
            .map_err(ControllerError::ClusterStatus);
        if !self.recorded(cluster, "the admission layout", result) {
            if let Ok(mut layouts) = self.layouts.lock() {
                if let Some(state) = layouts.get_mut(cluster) {
                    state.shown = None;
                }
            }
        }
    }

    async fn write_statuses(
        &self,
        cluster: &str,
        boundary: &BoundaryState,
        statuses: Vec<PolicyStatusRecord>,
    ) -> Result<(), ControllerError> {
        self.store
            .replace_policy_statuses(cluster, boundary.name.as_str(), statuses)
            .await
            .map_err(ControllerError::Statuses)
    }

    /// A status write whose failure ends nothing else: logged with its cause and counted.
    /// `true` when written, or when the cluster is gone from the store (nothing to record).
    fn recorded(&self, cluster: &str, what: &str, result: Result<(), ControllerError>) -> bool {
        match result {
            Ok(()) => true,
            Err(ControllerError::ClusterStatus(StoreError::NotFound)) => {
                tracing::debug!(cluster, what, "not recorded: the cluster is gone");
                true
            }
            Err(error) => {
                tracing::warn!(cluster, what, %error, "status not recorded; the pass will be retried");
                metrics::status_write_failed(cluster);
                false
            }
        }
    }

    /// Clears the cluster's `last_error` after a part that completed; `false` if the store
    /// did not take it.
    async fn clear_error(&self, cluster: &str) -> bool {
        let result = self
            .store
            .set_cluster_error(cluster, None)
            .await
            .map_err(ControllerError::ClusterStatus);
        self.recorded(cluster, "the cluster's last error (cleared)", result)
    }

    /// A cluster's part failed: the cluster and each policy that should be there say why.
    /// `false` when one of those statuses could not be recorded.
    async fn record_failure(
        &self,
        cluster: &ClusterRecord,
        boundaries: &[BoundaryState],
        reason: &ControllerError,
    ) -> bool {
        let reason = reason.to_string();
        tracing::warn!(cluster = %cluster.name, reason, "cluster not reconciled");
        if let Ok(mut seen) = self.apiservers.lock() {
            if let Some(seen) = seen.get_mut(&cluster.name) {
                seen.suspect = true;
            }
        }
        let result = self
            .store
            .set_cluster_error(&cluster.name, Some(&reason))
            .await
            .map_err(ControllerError::ClusterStatus);
        let mut recorded = self.recorded(&cluster.name, "the cluster's last error", result);
        let Ok(cluster_name) = Name::parse(&cluster.name) else {
            return recorded;
        };
        for boundary in boundaries
            .iter()
            .filter(|b| b.clusters.contains(&cluster.name))
        {
            let statuses = wanted(boundary, &cluster_name)
                .map(|(record, _)| {
                    status_record(boundary, record, &cluster.name, status_error(&reason))
                })
                .collect();
            let result = self.write_statuses(&cluster.name, boundary, statuses).await;
            let what = format!("the policy statuses of boundary '{}'", boundary.name);
            recorded &= self.recorded(&cluster.name, &what, result);
        }
        recorded
    }
}

/// The boundary's policies that belong in `cluster`: with admission rules and in scope, or
/// not decodable (whose status then says so).
fn wanted<'a>(
    boundary: &'a BoundaryState,
    cluster: &'a Name,
) -> impl Iterator<Item = (&'a PolicyRecord, &'a Result<Policy, ControllerError>)> + 'a {
    boundary
        .policies
        .iter()
        .filter(move |(_, decoded)| match decoded {
            Ok(policy) => policy.has_admission_rules() && policy.scope().includes(cluster),
            Err(_) => true,
        })
        .map(|(record, decoded)| (record, decoded))
}

fn status_record(
    boundary: &BoundaryState,
    record: &PolicyRecord,
    cluster: &str,
    status: String,
) -> PolicyStatusRecord {
    PolicyStatusRecord {
        boundary: boundary.name.to_string(),
        policy: record.name.clone(),
        cluster: cluster.to_owned(),
        policy_etag: record.etag.clone(),
        status,
        updated_at: palisade_store::now(),
    }
}

/// Decodes a stored policy (the same validation as the API's).
pub fn decode(record: &PolicyRecord, catalog: &Catalog) -> Result<Policy, ControllerError> {
    let unreadable = |why: String| ControllerError::Undecodable(why);
    let name = Name::parse(&record.name).map_err(|e| unreadable(e.to_string()))?;
    let spec = PolicySpec::from_json(record.spec_json.as_bytes())
        .map_err(|e| unreadable(e.to_string()))?;
    let (policy, _warnings) = spec
        .validate(name, catalog)
        .map_err(|e| unreadable(e.to_string()))?;
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_reasons_are_cut_at_a_character_boundary() {
        assert_eq!(status_error("unreachable"), "error: unreachable");
        let long = "é".repeat(MAX_REASON_BYTES);
        let status = status_not_enforced(&long);
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
