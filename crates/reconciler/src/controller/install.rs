//! One cluster's part of a pass: the guard, the labels, each boundary's policies written in the
//! cluster's layout and confirmed, and what is no longer wanted collected.
//!
//! The part runs in steps, each a method of its own: `observe` (the connection, what the cluster
//! can enforce, its API servers' restarts), `not_enforcing` (nothing is written, every status
//! says why), `make_ready` (the layout, the guard, the layout's shared objects, the labels),
//! `observe_boundaries` (what is installed, the boundaries' namespaces), then each boundary
//! planned without the cluster (`crate::plan::plan_boundary`), `write_boundaries` (every
//! boundary's planned writes applied, before any probe), `confirm_boundary` (each policy probed,
//! its status settled in `settle`), `collect_boundaries` (what is no longer wanted removed,
//! statuses recorded) and `finish` (the layout's leftovers, the workloads, detached
//! boundaries). Their decisions that need no cluster are in `crate::plan` and `settle`.

use super::memory::ClusterMemory;
use super::settle;
use super::*;
use crate::probe::ClusterProbe;

/// A boundary's part of a cluster's pass once its objects are written, before its policies
/// are confirmed.
struct Prepared<'b> {
    part: crate::plan::InCluster<'b>,
    /// What writing each of its policies in the cluster gave, in order.
    applied: Vec<Result<(), String>>,
}

/// A boundary's part once its policies are confirmed: what its collection keeps, and the
/// statuses to record once it ran.
struct Confirmed<'b> {
    boundary: &'b BoundaryState,
    keep: Vec<Name>,
    kept: crate::plan::Keep,
    statuses: Vec<PolicyInstall>,
}

/// What the steps of a cluster's part add up as they go.
#[derive(Default)]
struct Tally {
    /// Policies (and exceptions, and drifts) not yet confirmed.
    unconfirmed: usize,
    /// Statuses written, and those confirmed, as (boundary, policy): what closes drifts.
    written: BTreeSet<(String, String)>,
    confirmed_now: BTreeSet<(String, String)>,
    /// What each exception's probe found, by (boundary, exception).
    exceptions: BTreeMap<(String, String), InstallStatus>,
    /// Boundaries still switching layout, and whether one of them still has shared objects.
    switches_left: usize,
    shared_left: bool,
    audits: Vec<AuditJob>,
}

/// One policy's part of a boundary's pass, for [`Part::install`].
pub(super) struct Install<'a> {
    boundary: &'a Name,
    /// The boundary's other policies in the cluster (the probe complies with them).
    others: &'a [Policy],
    probe_namespace: Option<&'a str>,
    /// What writing it gave (written before any policy of the cluster is probed).
    applied: Result<(), String>,
    /// The cluster is changing layout and the earlier layout's objects are still there.
    switching: bool,
    /// How it is rolled out here, where its stage reached part of the boundary (SPEC 8).
    staging: Option<&'a crate::admission::Staging>,
    /// This version was not seen unconfirmed before: a probe that finds it not yet active is
    /// repeated for up to [`ACTIVATION_WAIT`] before the status says `pending`.
    first_look: bool,
}

/// One cluster's part of a pass: the cluster's worker for as long as the part runs. It holds
/// what every step needs (the controller, the cluster's record and name, the fence of its
/// lease) and owns the cluster's memory, so that the steps take only what they hand on to
/// each other, and lock nothing.
pub(super) struct Part<'c> {
    pub(super) ctl: &'c Controller,
    pub(super) cluster: &'c ClusterRecord,
    pub(super) name: Name,
    pub(super) fence: &'c Fence,
    /// When the part started: a drift seen later is not closed by it.
    pub(super) started: Instant,
    /// What the worker remembers of the cluster, lent to the part for as long as it runs.
    pub(super) memory: &'c mut ClusterMemory,
}

impl<'c> Part<'c> {
    /// Reconciles one cluster. Each phase that writes to it confirms the cluster's lease first
    /// (`fence`); the part ends with [`ControllerError::Fenced`] at the first that fails.
    pub(super) async fn run(
        ctl: &'c Controller,
        cluster: &'c ClusterRecord,
        attached: &[&BoundaryState],
        fence: &'c Fence,
        memory: &'c mut ClusterMemory,
    ) -> Result<ClusterPass, ControllerError> {
        let name = Name::parse(&cluster.name).map_err(ControllerError::ClusterName)?;
        let mut part = Part {
            ctl,
            cluster,
            name,
            fence,
            started: Instant::now(),
            memory,
        };
        let (mut connection, probe) = part.observe().await?;
        if let Admission::NotEnforced(reason) = &probe.admission {
            return part.not_enforcing(attached, reason).await;
        }
        let (client, choice, gone) = part
            .make_ready(&mut connection, probe.minor, attached)
            .await?;
        // A namespace found gone is no longer the boundary's: nothing probes, audits or
        // deploys there from now on.
        let pruned: Vec<BoundaryState>;
        let attached: Vec<&BoundaryState> = if gone.is_empty() {
            attached.to_vec()
        } else {
            pruned = attached
                .iter()
                .map(|b| b.without_namespaces(&cluster.name, &gone))
                .collect();
            pruned.iter().collect()
        };
        // Observe, plan, apply: one read of what is installed before writing (the layouts
        // present, what a write makes stale) and one after (what the probes judge by, what
        // is stale), for every boundary of the cluster at once.
        let observed = part.observe_boundaries(&client, &attached).await?;
        let planned = attached
            .iter()
            .map(|b| {
                let installation = &ctl.installation;
                crate::plan::plan_boundary(choice.layout, installation, &observed, b, &part.name)
            })
            .collect();
        fence.confirm("the policies").await?;
        let prepared = part.write_boundaries(&client, planned).await;
        // What the probes judge by (which object and binding hold a policy) and what the
        // collection finds stale: the probes write nothing.
        let after = client.installed(&ctl.installation, None).await?;
        let mut tally = Tally::default();
        let mut confirmed = Vec::with_capacity(prepared.len());
        for prepared in prepared {
            confirmed.push(
                part.confirm_boundary(&client, &after, prepared, choice.layout, &mut tally)
                    .await,
            );
        }
        part.collect_boundaries(&client, &after, confirmed, &mut tally)
            .await?;
        part.finish(&connection, &client, &choice, &attached, &after, tally)
            .await
    }

    /// The cached connection, what the cluster can enforce (recorded when it changed), and
    /// its API servers' restarts.
    async fn observe(&mut self) -> Result<(Connection, ClusterProbe), ControllerError> {
        let cluster = self.cluster;
        let connection = pass::connect(&self.ctl.app, &mut self.memory.connection, cluster).await?;
        let probe = connection.client.probe().await?;
        pass::notice_restarts(self.ctl, self.memory, &cluster.name, &connection.client).await;
        let (enforced, reason) = match &probe.admission {
            Admission::Enforced => (true, None),
            Admission::NotEnforced(reason) => (false, Some(reason.as_str())),
        };
        // Written when it differs from what the pass read: a write per cluster per pass
        // queues behind the others' on SQLite's one writer.
        let unchanged = cluster.kubernetes_version.as_deref() == Some(&probe.kubernetes_version)
            && cluster.admission_enforced == Some(enforced)
            && cluster.admission_reason.as_deref() == reason;
        if !unchanged {
            self.ctl
                .records
                .record_cluster_probe(
                    &cluster.name,
                    Some(&probe.kubernetes_version),
                    Some(enforced),
                    reason,
                )
                .await
                .map_err(ControllerError::ClusterStatus)?;
        }
        Ok((connection, probe))
    }

    /// Nothing is written to a cluster that cannot enforce; every policy and workload says why.
    async fn not_enforcing(
        &mut self,
        attached: &[&BoundaryState],
        reason: &str,
    ) -> Result<ClusterPass, ControllerError> {
        let cluster = self.cluster;
        for boundary in attached {
            let statuses = every_status(boundary, &self.name, &status_not_enforced(reason));
            pass::write_statuses(&*self.ctl.records, &cluster.name, boundary, statuses).await?;
        }
        let reason = format!(
            "cluster '{}' cannot enforce admission rules: {reason}",
            cluster.name
        );
        // Nothing is deployed there: the status watch stops.
        self.memory.status_watch = None;
        deploy::not_deployed(&*self.ctl.records, &cluster.name, &reason).await?;
        let recorded = pass::clear_error(&*self.ctl.records, cluster).await;
        Ok(ClusterPass {
            unconfirmed: 0,
            enforced: false,
            recorded,
            audits: Vec::new(),
            workloads_failed: None,
            exceptions: BTreeMap::new(),
        })
    }

    /// Before any policy: the layout chosen, the boundary-label guard, the drift watches, the
    /// layout's shared objects and the namespaces' labels. The client in the layout, the
    /// choice, and the namespaces found gone as (boundary, namespace).
    async fn make_ready(
        &mut self,
        connection: &mut Connection,
        minor: u32,
        attached: &[&BoundaryState],
    ) -> Result<(InLayout, Choice, BTreeSet<(String, String)>), ControllerError> {
        let (ctl, cluster, fence) = (self.ctl, self.cluster, self.fence);
        let choice = self
            .memory
            .choose_layout(cluster, minor, attached, &ctl.settings);
        let client = connection.client.to(choice.layout);
        let identity = match &connection.identity {
            Some(identity) => identity.clone(),
            None => {
                // Learnt once per connection: the user palisade acts as in the cluster.
                let identity = connection.client.whoami().await?;
                connection.identity = Some(identity.clone());
                if let Some(cached) = &mut self.memory.connection {
                    cached.identity = Some(identity.clone());
                }
                identity
            }
        };
        fence
            .confirm("the boundary-label guard and the layout's shared objects")
            .await?;
        client
            .install_boundary_label_guard(&ctl.installation, &identity)
            .await
            .map_err(ControllerError::Guard)?;
        // From now on a change by someone else reaches the loop within moments.
        self.memory.watch_drift(&connection.sealed, || {
            crate::drift::DriftWatch::start(
                connection.client.client(),
                &cluster.name,
                &ctl.installation,
                ctl.drift_sender.clone(),
            )
        });
        // Every pass: objects changed or deleted by others come back.
        let shared = crate::admission::of(choice.layout).prepare(&ctl.installation, &identity);
        client
            .apply_objects(&ctl.installation, &shared)
            .await
            .map_err(ControllerError::Shared)?;
        fence.confirm("label repairs").await?;
        let gone = self.restore_labels(&client, attached).await?;
        Ok((client, choice, gone))
    }

    /// What the write step decides from: what this installation holds in the cluster, and
    /// each boundary's namespaces there when the layout writes into them (a boundary whose
    /// namespaces cannot be read is not written).
    async fn observe_boundaries(
        &self,
        client: &InLayout,
        attached: &[&BoundaryState],
    ) -> Result<crate::plan::Observed, ControllerError> {
        let before = client.installed(&self.ctl.installation, None).await?;
        let at_ms = chrono::Utc::now().timestamp_millis();
        let mut namespaces = BTreeMap::new();
        for boundary in attached {
            let read = client
                .layout_namespaces(&boundary.name)
                .await
                .map_err(|error| error.to_string());
            namespaces.insert(boundary.name.to_string(), read);
        }
        Ok(crate::plan::Observed {
            before,
            at_ms,
            namespaces,
        })
    }

    /// Every boundary's objects are written first, then each is confirmed: the API server
    /// judges with what was written from its next policy reload (once a second), so a pass
    /// that changes many boundaries waits for one reload, not one per boundary.
    async fn write_boundaries<'b>(
        &self,
        client: &InLayout,
        planned: Vec<crate::plan::Planned<'b>>,
    ) -> Vec<Prepared<'b>> {
        let mut prepared = Vec::with_capacity(planned.len());
        for crate::plan::Planned { part, writes } in planned {
            let count = part.in_cluster.len();
            let applied = apply(client, &self.ctl.installation, writes, count).await;
            prepared.push(Prepared { part, applied });
        }
        prepared
    }

    /// Probes each policy of a boundary written already, and its exceptions: the statuses,
    /// and what its collection keeps.
    async fn confirm_boundary<'b>(
        &mut self,
        client: &InLayout,
        after: &crate::cluster::Installed,
        prepared: Prepared<'b>,
        layout: Layout,
        tally: &mut Tally,
    ) -> Confirmed<'b> {
        let cluster_name = &self.name.clone();
        let Prepared {
            part:
                crate::plan::InCluster {
                    boundary,
                    namespaces,
                    probe_namespace,
                    in_cluster,
                    present,
                    switching,
                    staged,
                },
            applied,
        } = prepared;
        let cluster = cluster_name.as_str();
        let mut statuses = Vec::new();
        let mut applied = applied.into_iter();
        // Every probe of the boundary saw the new layout's objects at work.
        let mut confirmed = !boundary.policies.iter().any(|(_, d)| d.is_err());
        // What enforces in the probe namespace, rollouts counted: each probe's Pod satisfies
        // the other policies as they judge there.
        let others = match &probe_namespace {
            Some(namespace) if !staged.is_empty() => {
                crate::admission::staged::judging_versions(&in_cluster, &staged, namespace)
            }
            _ => in_cluster.clone(),
        };
        for (record, decoded) in wanted(boundary, cluster_name) {
            let status = match decoded {
                Err(reason) => {
                    status_error(&ControllerError::Undecodable(reason.clone()).to_string())
                }
                Ok(policy) => {
                    let key = (
                        cluster.to_owned(),
                        boundary.name.to_string(),
                        record.name.clone(),
                        record.etag.clone(),
                    );
                    let written_as = applied.next().unwrap_or_else(|| {
                        Err("palisade lost track of this policy's write".to_owned())
                    });
                    let install = Install {
                        boundary: &boundary.name,
                        others: &others,
                        probe_namespace: probe_namespace.as_deref(),
                        applied: written_as,
                        switching,
                        staging: staged.get(policy.name()),
                        first_look: !self.memory.seen_unconfirmed(&key),
                    };
                    let settled = self.install(client, after, policy, install).await;
                    confirmed &= settled.confirms_layout;
                    let status = self
                        .memory
                        .within_grace(key, settled, &mut tally.unconfirmed);
                    self.ctl.open_drifts.judge(
                        cluster,
                        boundary.name.as_str(),
                        &record.name,
                        status,
                        &mut tally.confirmed_now,
                        &mut tally.unconfirmed,
                    )
                }
            };
            tally
                .written
                .insert((boundary.name.to_string(), record.name.clone()));
            statuses.push(status_record(boundary, record, cluster, status));
        }
        let found = self
            .confirm_exceptions(
                client,
                after,
                boundary,
                &in_cluster,
                &namespaces,
                &mut tally.unconfirmed,
            )
            .await;
        for (exception, status) in found {
            tally
                .exceptions
                .insert((boundary.name.to_string(), exception), status);
        }
        // A rollout's version before still judges namespaces the new version reached a moment
        // ago (make before break): look again soon, when it can leave them.
        tally.unconfirmed += staged.values().filter(|s| s.handing_over()).count();
        // During a switch, the earlier layout's objects stay until the new layout's are
        // confirmed (SPEC 3.4: no gap).
        let kept = crate::plan::keep(&present, layout, confirmed);
        if kept.switch_bindings {
            tally.switches_left += 1;
            tally.shared_left |= present.contains(&Layout::Shared);
        }
        Confirmed {
            boundary,
            keep: crate::plan::kept_policies(boundary, cluster_name),
            kept,
            statuses,
        }
    }

    /// Removes what each boundary no longer wants (found in `after`, read once the boundaries
    /// were written), records its statuses, and starts the audits that came due; then closes
    /// the drifts the statuses settle.
    async fn collect_boundaries(
        &self,
        client: &InLayout,
        after: &crate::cluster::Installed,
        confirmed: Vec<Confirmed<'_>>,
        tally: &mut Tally,
    ) -> Result<(), ControllerError> {
        let (ctl, fence, cluster_name) = (self.ctl, self.fence, &self.name);
        let cluster = cluster_name.as_str();
        fence.confirm("the removals").await?;
        for Confirmed {
            boundary,
            keep,
            kept,
            statuses,
        } in confirmed
        {
            let removed = client
                .collect(
                    after,
                    &ctl.installation,
                    &boundary.name,
                    Keep {
                        policies: &keep,
                        layouts: &kept.layouts,
                        switch_bindings: kept.switch_bindings,
                    },
                )
                .await
                .map_err(ControllerError::RemovePolicies)?;
            metrics::removed(cluster, removed.len());
            pass::write_statuses(&*ctl.records, cluster, boundary, statuses).await?;
            let (job, fingerprint) = deploy::audit_job(client, cluster_name, boundary, fence);
            tally.audits.extend(
                ctl.audits
                    .offer(job, fingerprint, ctl.settings.audit_interval),
            );
        }
        let closed =
            ctl.open_drifts
                .close(cluster, self.started, &tally.written, &tally.confirmed_now);
        drift::record_repairs(&*ctl.records, cluster, closed).await;
        Ok(())
    }

    /// The end of a cluster's part: the earlier layout's leftovers, the layout recorded, the
    /// workloads deployed, the objects of boundaries no longer attached removed, and the
    /// cluster's error cleared or set.
    async fn finish(
        &mut self,
        connection: &Connection,
        client: &InLayout,
        choice: &Choice,
        attached: &[&BoundaryState],
        after: &crate::cluster::Installed,
        tally: Tally,
    ) -> Result<ClusterPass, ControllerError> {
        let (ctl, cluster, fence) = (self.ctl, self.cluster, self.fence);
        if choice.layout != Layout::Shared && !tally.shared_left {
            // Left by the shared layout before a switch: inert once the boundaries' parameters
            // are gone (above), but every request would still pay for looking them up.
            client
                .remove_shared_once(&ctl.installation)
                .await
                .map_err(ControllerError::RemoveShared)?;
        }
        if choice.layout == Layout::Shared && tally.switches_left == 0 {
            client
                .remove_shared_switch(&ctl.installation)
                .await
                .map_err(ControllerError::RemoveShared)?;
        }
        self.record_layout(choice, tally.switches_left).await;
        // A failure here (e.g. a role without the workloads' verbs) is the cluster's error,
        // not the policies': they are installed and confirmed above.
        let workloads = fence
            .write("the workloads", self.deploy_workloads(connection, attached))
            .await;
        if let Err(ControllerError::Fenced(error)) = workloads {
            return Err(ControllerError::Fenced(error));
        }
        self.remove_detached(client, choice.layout, attached, after)
            .await?;
        let (recorded, workloads_failed) = match workloads {
            Ok(()) => (pass::clear_error(&*ctl.records, cluster).await, None),
            Err(error) => {
                let text = error.to_string();
                tracing::warn!(cluster = %cluster.name, error = %text, "workloads not deployed");
                let result = ctl
                    .records
                    .record_cluster_error(&cluster.name, Some(&text))
                    .await
                    .map_err(ControllerError::ClusterStatus);
                (
                    pass::recorded(&cluster.name, "the cluster's last error", result),
                    Some(text),
                )
            }
        };
        Ok(ClusterPass {
            unconfirmed: tally.unconfirmed,
            enforced: true,
            recorded,
            audits: tally.audits,
            workloads_failed,
            exceptions: tally.exceptions,
        })
    }

    /// Boundaries detached from this cluster, or deleted: their objects go, and their reports.
    async fn remove_detached(
        &self,
        client: &InLayout,
        layout: Layout,
        attached: &[&BoundaryState],
        after: &crate::cluster::Installed,
    ) -> Result<(), ControllerError> {
        let (cluster, fence) = (self.name.as_str(), self.fence);
        let stale = crate::plan::detached(&after.boundaries(), attached);
        if !stale.is_empty() {
            fence.confirm("the removal of detached boundaries").await?;
        }
        for boundary in stale {
            let failed = |error| ControllerError::RemoveBoundary {
                boundary: boundary.to_string(),
                error,
            };
            let removed = client
                .collect(
                    after,
                    &self.ctl.installation,
                    &boundary,
                    Keep {
                        policies: &[],
                        layouts: &[layout],
                        switch_bindings: false,
                    },
                )
                .await
                .map_err(failed)?;
            metrics::removed(cluster, removed.len());
            if client.serves_reports().await.unwrap_or(false) {
                client
                    .sync_reports(&self.ctl.installation, &boundary, &[])
                    .await
                    .map_err(failed)?;
            }
        }
        Ok(())
    }

    /// Reads back what one policy, written already, enforces, settled.
    async fn install(
        &self,
        client: &InLayout,
        after: &crate::cluster::Installed,
        policy: &Policy,
        install: Install<'_>,
    ) -> settle::Settled {
        let (cluster, installation) = (self.name.as_str(), &self.ctl.installation);
        let Install {
            boundary,
            others,
            probe_namespace,
            applied,
            switching,
            staging,
            first_look,
        } = install;
        if let Err(error) = applied {
            return settle::Settled::write_failed(&error);
        }
        metrics::applied(cluster);
        let Some(namespace) = probe_namespace else {
            // No namespace of the boundary: nothing is judged by either layout yet.
            return settle::Settled::installed();
        };
        let site = client.site(after, installation, boundary);
        let probe_once = || async {
            let probe =
                crate::verdict::policy_probe(&site, policy, others, namespace, switching, staging)?;
            client.send(probe).await
        };
        let mode = staging.map_or(policy.mode(), |s| {
            crate::admission::staged::mode_in(policy, s, namespace)
        });
        let verdict = |probe| settle::policy_status(mode, probe);
        let mut result = verdict(probe_once().await);
        // The API server activates what was just written at its next policy reload (about
        // once a second): the probe is repeated here, in this cluster's part of the pass,
        // rather than in a pass of its own a moment later.
        let waiting_since = Instant::now();
        while first_look
            && result.settling
            && waiting_since.elapsed() + ACTIVATION_POLL <= ACTIVATION_WAIT
        {
            tokio::time::sleep(ACTIVATION_POLL).await;
            result = verdict(probe_once().await);
        }
        result
    }
}

/// Carries out a boundary's planned writes: what writing each of its `count` policies gave.
async fn apply(
    client: &InLayout,
    installation: &str,
    plan: crate::plan::BoundaryWrites,
    count: usize,
) -> Vec<Result<(), String>> {
    use crate::plan::BoundaryWrites;
    match plan {
        BoundaryWrites::Refused(reason) => vec![Err(reason); count],
        BoundaryWrites::Together { writes, switch } => {
            let mut result = client.write(installation, &writes).await;
            if result.is_ok() && !switch.is_empty() {
                result = client.apply_switch(installation, &switch).await;
            }
            vec![result.map_err(|error| error.to_string()); count]
        }
        BoundaryWrites::Each(each) => {
            let mut applied = Vec::with_capacity(each.len());
            for writes in each {
                applied.push(match writes {
                    Err(reason) => Err(reason),
                    Ok(writes) => client
                        .write(installation, &writes)
                        .await
                        .map_err(|error| error.to_string()),
                });
            }
            applied
        }
    }
}

/// How long a version seen for the first time is probed again while it is not yet active.
pub(super) const ACTIVATION_WAIT: Duration = Duration::from_millis(2_500);
/// How often, within [`ACTIVATION_WAIT`].
const ACTIVATION_POLL: Duration = Duration::from_millis(100);
