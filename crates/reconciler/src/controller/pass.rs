//! A pass: the desired state read once, every cluster at once under its time limit, connections
//! and API server restarts, and what a cluster's failure records.

use super::fleet::Membership;
use super::memory::ClusterMemory;
use super::workers::{Ended, Workers};
use super::*;

/// The start of a cluster's admission reason while its pass fails.
pub use palisade_policy::reason::UNCONFIRMED;

impl Controller {
    /// One full pass over every cluster (without a lease: every cluster), each cluster's part
    /// once, all at once: what they did.
    pub async fn reconcile_all(self: &Arc<Self>) -> PassReport {
        let mut workers = Workers::default();
        if let Err(report) = self.start_round(None, PassScope::All, &mut workers).await {
            return report;
        }
        while let Some(ended) = workers.next().await {
            self.ended(ended, None, &mut workers);
        }
        workers.take_report()
    }

    /// A round: reads the desired state, takes and gives up clusters as the replicas share
    /// them out (never one whose part runs), and starts the part of each cluster `scope` runs
    /// (one whose part runs already runs again after it). An error, with nothing started,
    /// when the store or the fleet cannot be read.
    pub(super) async fn start_round(
        self: &Arc<Self>,
        lease: Option<&Lease>,
        scope: PassScope,
        workers: &mut Workers,
    ) -> Result<(), PassReport> {
        let mut report = PassReport::default();
        let (mut clusters, boundaries) = match self.app.desired_state().await {
            Ok(state) => (state.clusters, state.boundaries),
            Err(error) => {
                metrics::store_read_failed();
                report.failed.insert(
                    "*".to_owned(),
                    ControllerError::ReadStore(error).to_string(),
                );
                return Err(report);
            }
        };
        // Rollouts move on before any part writes: a stage's counters are read before its
        // reach widens.
        let rollout_due = self.step_rollouts(&clusters, &boundaries).await.map(|at| {
            chrono::DateTime::from_timestamp(at, 0)
                .unwrap_or_default()
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        });
        workers.set_next_expiry(
            boundaries
                .iter()
                .flat_map(|b| b.exceptions.iter().map(|x| x.expires_at.clone()))
                .chain(rollout_due)
                .min(),
        );
        if let Some(lease) = lease {
            let all = clusters.iter().map(|c| c.name.clone()).collect();
            let member = Membership { ctl: self, lease };
            if let Err(error) = member.rebalance(Some(all), &workers.running()).await {
                // The fleet or the lease cannot be read: no lease is confirmed, and nothing
                // is written (the loop gives the lease up).
                report
                    .failed
                    .insert("*".to_owned(), ControllerError::Fenced(error).to_string());
                return Err(report);
            }
            clusters.retain(|c| lease.holds(&c.name));
        }
        // Clusters deleted, or held by another replica now: forgotten, their open drifts closed
        // unrepaired.
        let held: BTreeSet<String> = clusters.iter().map(|c| c.name.clone()).collect();
        self.memory.keep_only(Some(&held));
        self.open_drifts.keep_only(Some(&held));
        let prints: HashMap<String, Fingerprint> = clusters
            .iter()
            .map(|c| (c.name.clone(), crate::scope::fingerprint(c, &boundaries)))
            .collect();
        narrow(&mut clusters, &scope, &prints, &self.memory);
        workers.round_started();
        let boundaries = Arc::new(boundaries);
        for cluster in clusters {
            let this = Arc::clone(self);
            let boundaries = Arc::clone(&boundaries);
            let fence = Fence::of(lease, &cluster.name);
            let print = prints.get(&cluster.name).copied();
            let name = cluster.name.clone();
            workers.start(&name, print, async move {
                // A turn among the clusters' parts; the semaphore is never closed.
                let _turn = Arc::clone(&this.turns).acquire_owned().await.ok();
                // The worker owns the cluster's memory while its part runs.
                let attached = crate::plan::attached(&boundaries, &cluster.name);
                let names = attached.iter().map(|b| b.name.to_string()).collect();
                let mut memory = this.memory.lend(&cluster.name, names);
                // The lease lost meanwhile: the cluster's part stops at once.
                let part = this.cluster_pass(&cluster, &attached, &fence, &mut memory);
                let done = fence.while_held(part).await.unwrap_or_else(|| ClusterDone {
                    name: cluster.name.clone(),
                    result: Err(ControllerError::Fenced(StoreError::LeaseLost(
                        "lost during the cluster's part of the pass".to_owned(),
                    ))),
                    recorded: true,
                });
                this.memory.give_back(&cluster.name, memory);
                done
            });
        }
        Ok(())
    }

    /// What a cluster's part that ended leaves: its fingerprint settled when it left nothing
    /// to do, its report kept, the audits it found due started, and a fenced cluster given up.
    pub(super) fn ended(
        self: &Arc<Self>,
        ended: Ended,
        lease: Option<&Lease>,
        workers: &mut Workers,
    ) {
        let Ended {
            cluster,
            print,
            joined,
            ..
        } = ended;
        let mut report = PassReport::default();
        match joined {
            Ok(done) => {
                let settles = settles(&done);
                self.memory.settle(&done.name, print.filter(|_| settles));
                if !done.recorded {
                    report.unrecorded.insert(done.name.clone());
                }
                match done.result {
                    Ok(pass) => {
                        for job in report.completed(done.name, pass) {
                            let this = Arc::clone(self);
                            tokio::spawn(async move {
                                let timeout = this.settings.audit_timeout;
                                audit::run(
                                    &this.audits,
                                    &*this.records,
                                    &this.installation,
                                    job,
                                    timeout,
                                )
                                .await;
                            });
                        }
                    }
                    Err(error) => {
                        if matches!(error, ControllerError::Fenced(_)) {
                            if let Some(lease) = lease {
                                Membership { ctl: self, lease }.fenced(&done.name);
                            }
                        }
                        report.failed.insert(done.name, error.to_string());
                    }
                }
            }
            Err(error) => {
                report
                    .failed
                    .insert(cluster.clone(), ControllerError::Task(error).to_string());
            }
        }
        workers.record(cluster, report);
    }

    /// One cluster's part of a pass, under `cluster_timeout`, measured and counted; a failure
    /// is recorded in the cluster's and its policies' statuses. Every write to the cluster
    /// waits for `fence` to confirm the cluster's lease; once it does not, the part ends and
    /// records nothing (the cluster is another replica's now).
    pub(super) async fn cluster_pass(
        &self,
        cluster: &ClusterRecord,
        attached: &[&BoundaryState],
        fence: &Fence,
        memory: &mut ClusterMemory,
    ) -> ClusterDone {
        let started = Instant::now();
        let result = match tokio::time::timeout(
            self.settings.cluster_timeout,
            Part::run(self, cluster, attached, fence, memory),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(ControllerError::Timeout(self.settings.cluster_timeout)),
        };
        if let Err(ControllerError::Fenced(_)) = &result {
            return ClusterDone {
                name: cluster.name.clone(),
                result,
                recorded: true,
            };
        }
        // A cluster deleted while its pass ran: what the pass wrote after the deletion's
        // sweeps (the guard, policies) would stay in a cluster nobody reconciles any more.
        if matches!(
            self.records.cluster_record(&cluster.name).await,
            Err(StoreError::NotFound)
        ) {
            if let Ok(connection) = connect(&self.app, &mut memory.connection, cluster).await {
                let removed: Result<_, ControllerError> = fence
                    .write("removing a deleted cluster's objects", async {
                        Ok(connection
                            .client
                            .remove_installation(&self.installation)
                            .await?)
                    })
                    .await;
                if let Err(error) = removed {
                    tracing::warn!(cluster = %cluster.name, %error, "objects of a cluster deleted during its pass not removed");
                }
            }
        }
        let installed = match &result {
            Ok(pass) if pass.enforced => ExceptionsAfter::Installed(&pass.exceptions),
            // Nothing is written to a cluster that cannot enforce.
            Ok(_) => ExceptionsAfter::NoneInstalled,
            Err(_) => ExceptionsAfter::Unknown,
        };
        record_exception_installs(&*self.records, memory, cluster, attached, installed).await;
        let outcome = match &result {
            Ok(pass) if pass.enforced => Outcome::Ok,
            Ok(_) => Outcome::NotEnforced,
            Err(_) => Outcome::Error,
        };
        metrics::pass(&cluster.name, outcome, started.elapsed());
        let recorded = match &result {
            Ok(pass) => pass.recorded,
            Err(error) => {
                memory.suspect_apiserver();
                self.record_failure(cluster, attached, error).await
            }
        };
        ClusterDone {
            name: cluster.name.clone(),
            result,
            recorded,
        }
    }

    /// A cluster's part failed: the cluster and each policy that should be there say why.
    /// `false` when one of those statuses could not be recorded.
    pub(super) async fn record_failure(
        &self,
        cluster: &ClusterRecord,
        attached: &[&BoundaryState],
        reason: &ControllerError,
    ) -> bool {
        let reason = reason.to_string();
        tracing::warn!(cluster = %cluster.name, reason, "cluster not reconciled");
        let result = self
            .records
            .record_cluster_error(&cluster.name, Some(&reason))
            .await
            .map_err(ControllerError::ClusterStatus);
        let mut recorded = recorded(&cluster.name, "the cluster's last error", result);
        // Never `enforced` beside the error (SPEC 3.4 v3.1): what the cluster enforces is not
        // confirmed while its pass fails; the next pass that completes says again.
        if cluster.admission_enforced == Some(true) {
            let unconfirmed = format!("{UNCONFIRMED}: {reason}");
            let result = self
                .records
                .record_cluster_probe(
                    &cluster.name,
                    cluster.kubernetes_version.as_deref(),
                    Some(false),
                    Some(&unconfirmed),
                )
                .await
                .map_err(ControllerError::ClusterStatus);
            recorded &= self::recorded(&cluster.name, "the cluster's admission status", result);
        }
        let Ok(cluster_name) = Name::parse(&cluster.name) else {
            return recorded;
        };
        for boundary in attached {
            let statuses = every_status(boundary, &cluster_name, &status_error(&reason));
            let result = write_statuses(&*self.records, &cluster.name, boundary, statuses).await;
            let what = format!("the policy statuses of boundary '{}'", boundary.name);
            recorded &= self::recorded(&cluster.name, &what, result);
        }
        recorded
    }
}

/// What a cluster's pass left of the exceptions, for [`record_exception_installs`].
enum ExceptionsAfter<'a> {
    /// Installed, with what each probe found.
    Installed(&'a BTreeMap<(String, String), InstallStatus>),
    /// The cluster cannot enforce: it holds none.
    NoneInstalled,
    /// The pass failed: what the cluster holds is unknown.
    Unknown,
}

/// After a cluster's pass: what it installed of the exceptions and what their probes
/// found (replaced whole), or how many ended ones a cluster that could not be updated
/// still holds (`/metrics`).
async fn record_exception_installs(
    records: &dyn Records,
    memory: &mut ClusterMemory,
    cluster: &ClusterRecord,
    attached: &[&BoundaryState],
    after: ExceptionsAfter<'_>,
) {
    let found = match after {
        ExceptionsAfter::Installed(found) => Some(Some(found)),
        ExceptionsAfter::NoneInstalled => Some(None),
        ExceptionsAfter::Unknown => None,
    };
    if let Some(found) = found {
        let installed = found.is_some();
        let now = palisade_app::reconcile::now();
        let installs = attached
            .iter()
            .filter(|_| installed)
            .flat_map(|b| {
                b.exceptions_in(&cluster.name)
                    .into_iter()
                    .map(|x| palisade_app::reconcile::ExceptionInstall {
                        cluster: cluster.name.clone(),
                        boundary: b.name.to_string(),
                        exception: x.name.to_string(),
                        expires_at: x.expires_at.clone(),
                        installed_at: now.clone(),
                        status: found
                            .and_then(|f| f.get(&(b.name.to_string(), x.name.to_string())))
                            .unwrap_or(&InstallStatus::Installed)
                            .to_string(),
                    })
                    .collect::<Vec<_>>()
            })
            .collect::<Vec<_>>();
        // Written when it differs from what this replica wrote last (the same rows but
        // their `installed_at`): one write less per cluster per pass.
        let written: Vec<[String; 4]> = installs
            .iter()
            .map(|i| {
                [
                    i.boundary.clone(),
                    i.exception.clone(),
                    i.expires_at.clone(),
                    i.status.clone(),
                ]
            })
            .collect();
        // Keyed by the cluster's creation too: one deleted and added again has no rows.
        let written = (cluster.created_at.clone(), written);
        if memory.installs_written.as_ref() != Some(&written) {
            match records
                .record_exception_installs(&cluster.name, installs)
                .await
            {
                Ok(()) => memory.installs_written = Some(written),
                Err(error) => {
                    memory.installs_written = None;
                    tracing::warn!(cluster = %cluster.name, %error, "exception installs not recorded");
                }
            }
        }
        metrics::ended_still_installed(&cluster.name, 0);
        return;
    }
    let now = palisade_app::reconcile::now();
    if let Ok(installs) = records.exception_installs_in(&cluster.name).await {
        let ended = installs.iter().filter(|i| i.expires_at <= now).count();
        metrics::ended_still_installed(&cluster.name, ended);
    }
}

/// The connection in `cached` when it was made from the cluster's credentials as stored, or
/// a new one, kept there.
pub(super) async fn connect(
    app: &App,
    cached: &mut Option<Connection>,
    cluster: &ClusterRecord,
) -> Result<Connection, ControllerError> {
    if let Some(connection) = cached
        .as_ref()
        .filter(|c| c.sealed == cluster.kubeconfig_sealed)
    {
        return Ok(connection.clone());
    }
    let kubeconfig = app
        .cluster_kubeconfig(cluster)
        .map_err(ControllerError::Credentials)?;
    let client = ClusterClient::from_kubeconfig(&kubeconfig)
        .await?
        .with_layout(Layout::default());
    let connection = Connection {
        sealed: cluster.kubeconfig_sealed.clone(),
        client,
        identity: None,
    };
    *cached = Some(connection.clone());
    Ok(connection)
}

/// Looks (at most every `apiserver_check_interval`, and on the next pass after a failure)
/// at the cluster's API servers: their identity Leases, and their start time when
/// `restarts::ApiServers::wants_start_time` says so. Each start since the last look is a
/// restart (or an instance added): counted on the cluster (`api_server_restarts`) and on
/// `/metrics`. Those that started before the first look are never counted. A cluster
/// whose role allows neither read is simply not watched for restarts.
pub(super) async fn notice_restarts(
    ctl: &Controller,
    memory: &mut ClusterMemory,
    cluster: &str,
    client: &ClusterClient,
) {
    let due = match &memory.apiservers {
        None => Some((crate::restarts::ApiServers::default(), false)),
        Some(s) if s.suspect || s.read_at.elapsed() >= ctl.settings.apiserver_check_interval => {
            Some((s.servers.clone(), s.suspect))
        }
        Some(_) => None,
    };
    let Some((servers, suspect)) = due else {
        return;
    };
    let identities = client.apiserver_identities().await.unwrap_or_else(|error| {
        tracing::debug!(cluster, %error, "the API servers' identities were not read");
        Default::default()
    });
    let started = if servers.wants_start_time(suspect, &identities) {
        client
            .apiserver_started_at()
            .await
            .map_err(|error| {
                tracing::debug!(cluster, %error, "the API server's start time was not read");
            })
            .ok()
    } else {
        None
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let seen = memory.apiservers.get_or_insert_with(|| ApiServersSeen {
        servers,
        read_at: Instant::now(),
        suspect: false,
    });
    seen.read_at = Instant::now();
    seen.suspect = false;
    let started = seen.servers.look(identities, started, now);
    if started > 0 {
        tracing::warn!(
            cluster,
            started,
            "an API server of the cluster restarted (or was added): it compiles every admission policy again"
        );
        for _ in 0..started {
            metrics::apiserver_restarted(cluster);
        }
        let result = ctl
            .records
            .record_apiserver_restarts(cluster, i64::try_from(started).unwrap_or(i64::MAX))
            .await
            .map_err(ControllerError::ClusterStatus);
        recorded(cluster, "an API server restart", result);
    }
}

/// Whether a cluster's part left nothing to do: its inputs' fingerprint is kept, and a pass
/// after a change skips the cluster while they stay the same (`scope`).
fn settles(done: &ClusterDone) -> bool {
    match &done.result {
        Ok(pass) => crate::scope::settles(
            true,
            done.recorded,
            pass.unconfirmed,
            pass.workloads_failed.is_some(),
        ),
        Err(_) => false,
    }
}

/// The statuses of a boundary's policies in a cluster, recorded.
pub(super) async fn write_statuses(
    records: &dyn Records,
    cluster: &str,
    boundary: &BoundaryState,
    statuses: Vec<PolicyInstall>,
) -> Result<(), ControllerError> {
    records
        .record_policy_statuses(cluster, boundary.name.as_str(), statuses)
        .await
        .map_err(ControllerError::Statuses)
}

/// A status write whose failure ends nothing else: logged with its cause and counted.
/// `true` when written, or when the cluster is gone from the store (nothing to record).
pub(super) fn recorded(cluster: &str, what: &str, result: Result<(), ControllerError>) -> bool {
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
pub(super) async fn clear_error(records: &dyn Records, cluster: &ClusterRecord) -> bool {
    // Nothing to clear when the pass read none (no step of a pass that goes on to here
    // records one).
    if cluster.last_error.is_none() {
        return true;
    }
    let result = records
        .record_cluster_error(&cluster.name, None)
        .await
        .map_err(ControllerError::ClusterStatus);
    recorded(&cluster.name, "the cluster's last error (cleared)", result)
}

/// Narrows the clusters held to those `scope` runs: all; those a pass left unconfirmed; or,
/// after a change, those whose fingerprint differs from their last part that left nothing to
/// do.
fn narrow(
    clusters: &mut Vec<ClusterRecord>,
    scope: &PassScope,
    prints: &HashMap<String, Fingerprint>,
    memory: &Memories,
) {
    match scope {
        PassScope::All => {}
        PassScope::Only(only) => clusters.retain(|c| only.contains(&c.name)),
        PassScope::Changed => {
            let run: BTreeSet<String> =
                crate::scope::changed(prints.iter().map(|(c, f)| (c.as_str(), *f)), |c| {
                    memory.settled(c)
                })
                .into_iter()
                .map(str::to_owned)
                .collect();
            tracing::debug!(
                concerned = run.len(),
                held = clusters.len(),
                "a change: the clusters whose inputs changed"
            );
            clusters.retain(|c| run.contains(&c.name));
        }
    }
}
