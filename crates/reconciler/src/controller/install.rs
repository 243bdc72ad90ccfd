//! One cluster's part of a pass: the guard, the labels, each boundary's policies written in the
//! cluster's layout and confirmed, and what is no longer wanted collected.

use super::*;

/// A boundary's part of a cluster's pass once its objects are written, before its policies
/// are confirmed.
struct Prepared<'b> {
    boundary: &'b BoundaryState,
    /// Its namespaces in the cluster.
    namespaces: Vec<&'b str>,
    probe_namespace: Option<String>,
    /// Its policies in the cluster (decoded).
    in_cluster: Vec<Policy>,
    /// The layouts its objects were found in before the pass wrote.
    present: BTreeSet<Layout>,
    switching: bool,
    /// What writing each of `in_cluster` gave, in order.
    applied: Vec<Result<(), String>>,
}

/// One policy's part of a boundary's pass, for [`Controller::install`].
pub(super) struct Install<'a> {
    cluster: &'a str,
    boundary: &'a Name,
    /// The boundary's other policies in the cluster (the probe complies with them).
    others: &'a [Policy],
    probe_namespace: Option<&'a str>,
    /// What writing it gave (written before any policy of the cluster is probed).
    applied: Result<(), String>,
    /// The cluster is changing layout and the earlier layout's objects are still there.
    switching: bool,
    /// This version was not seen unconfirmed before: a probe that finds it not yet active is
    /// repeated for up to [`ACTIVATION_WAIT`] before the status says `pending`.
    first_look: bool,
}

impl Controller {
    /// Reconciles one cluster. Each phase that writes to it confirms the cluster's lease first
    /// (`fence`); the part ends with [`ControllerError::Fenced`] at the first that fails.
    pub(super) async fn reconcile_cluster(
        &self,
        cluster: &ClusterRecord,
        boundaries: &[BoundaryState],
        fence: &Fence,
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
        // Written when it differs from what the pass read: a write per cluster per pass
        // queues behind the others' on SQLite's one writer.
        let unchanged = cluster.kubernetes_version.as_deref() == Some(&probe.kubernetes_version)
            && cluster.admission_enforced == Some(enforced)
            && cluster.admission_reason.as_deref() == reason;
        if !unchanged {
            self.app
                .record_cluster_probe(
                    &cluster.name,
                    Some(&probe.kubernetes_version),
                    Some(enforced),
                    reason,
                )
                .await
                .map_err(ControllerError::ClusterStatus)?;
        }
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
            let recorded = self.clear_error(cluster).await;
            return Ok(ClusterPass {
                unconfirmed: 0,
                enforced: false,
                recorded,
                audits: Vec::new(),
                workloads_failed: None,
                exceptions: BTreeMap::new(),
            });
        }

        let choice = self.choose_layout(cluster, probe.minor, &attached, &cluster_name);
        let client = connection.client.clone().with_layout(choice.layout);
        let identity = self.identity(&cluster.name, &mut connection).await?;
        fence
            .confirm("the boundary-label guard and the layout's shared objects")
            .await?;
        client
            .install_boundary_label_guard(&self.installation, &identity)
            .await
            .map_err(ControllerError::Guard)?;
        // From now on a change by someone else reaches the loop within moments.
        self.watch_drift(&cluster.name, &connection);
        if let Ok(mut known) = self.attached.lock() {
            known.insert(
                cluster.name.clone(),
                attached.iter().map(|b| b.name.to_string()).collect(),
            );
        }
        // Every pass: objects changed or deleted by others come back.
        crate::admission::of(choice.layout)
            .prepare(&client, &self.installation, &identity)
            .await
            .map_err(ControllerError::Shared)?;

        fence.confirm("label repairs").await?;
        let gone = self.restore_labels(&client, cluster, &attached).await?;
        // A namespace found gone is no longer the boundary's: nothing probes, audits or
        // deploys there from now on.
        let pruned: Vec<BoundaryState>;
        let attached: Vec<&BoundaryState> = if gone.is_empty() {
            attached
        } else {
            pruned = attached
                .iter()
                .map(|b| b.without_namespaces(&cluster.name, &gone))
                .collect();
            pruned.iter().collect()
        };

        let mut attached_names = BTreeSet::new();
        // Statuses written, and those confirmed, as (boundary, policy): what closes drifts.
        let mut written = BTreeSet::new();
        let mut confirmed_now = BTreeSet::new();
        let mut audits = Vec::new();
        let mut exception_statuses = BTreeMap::new();
        let mut switches_left = 0usize;
        let mut shared_left = false;
        // One read of what is installed before writing (the layouts present) and one after
        // (what is stale), for every boundary of the cluster at once.
        let before = client.installed(&self.installation, None).await?;
        fence.confirm("the policies").await?;
        // Every boundary's objects are written first, then each is confirmed: the API server
        // judges with what was written from its next policy reload (once a second), so a pass
        // that changes many boundaries waits for one reload, not one per boundary.
        let mut prepared = Vec::with_capacity(attached.len());
        for boundary in &attached {
            attached_names.insert(boundary.name.to_string());
            // A namespace no exception names, when there is one: a probe there is judged by
            // the policies alone.
            let named_by_exceptions = |namespace: &str| {
                boundary.exceptions.iter().any(|x| {
                    x.object_match
                        .as_ref()
                        .is_some_and(|m| m.namespaces.iter().any(|n| n.as_str() == namespace))
                })
            };
            let namespaces: Vec<&str> = boundary
                .namespaces
                .iter()
                .filter(|n| n.cluster == cluster.name)
                .map(|n| n.name.as_str())
                .collect();
            let probe_namespace = namespaces
                .iter()
                .find(|n| !named_by_exceptions(n))
                .or_else(|| namespaces.first())
                .map(|n| (*n).to_owned());
            let in_cluster: Vec<Policy> = wanted(boundary, &cluster_name)
                .filter_map(|(_, decoded)| decoded.as_ref().ok().cloned())
                .collect();
            let exceptions = boundary.exceptions_in(&cluster.name);
            let present = before.layouts(&self.installation, &boundary.name);
            let switching = present.iter().any(|l| *l != choice.layout);
            let together = self
                .apply_together(
                    &client,
                    &before,
                    boundary,
                    &cluster_name,
                    &in_cluster,
                    switching,
                )
                .await;
            // What writing each of `in_cluster` gave.
            let mut applied = Vec::new();
            for policy in &in_cluster {
                applied.push(match &together {
                    Some(result) => result.clone(),
                    None => client
                        .apply_policy_excepted(
                            &self.installation,
                            &boundary.name,
                            policy,
                            &exceptions,
                        )
                        .await
                        .map_err(|error| error.to_string()),
                });
            }
            prepared.push(Prepared {
                boundary,
                namespaces,
                probe_namespace,
                in_cluster,
                present,
                switching,
                applied,
            });
        }
        let mut collections = Vec::new();
        for Prepared {
            boundary,
            namespaces,
            probe_namespace,
            in_cluster,
            present,
            switching,
            applied,
        } in prepared
        {
            let mut keep = Vec::new();
            let mut statuses = Vec::new();
            let mut applied = applied.into_iter();
            // Every probe of the boundary saw the new layout's objects at work.
            let mut confirmed = !boundary.policies.iter().any(|(_, d)| d.is_err());
            for (record, decoded) in wanted(boundary, &cluster_name) {
                let status = match decoded {
                    Err(reason) => {
                        status_error(&ControllerError::Undecodable(reason.clone()).to_string())
                    }
                    Ok(policy) => {
                        keep.push(policy.name().clone());
                        let key = (
                            cluster.name.clone(),
                            boundary.name.to_string(),
                            record.name.clone(),
                            record.etag.clone(),
                        );
                        let written_as = applied.next().unwrap_or_else(|| {
                            Err("palisade lost track of this policy's write".to_owned())
                        });
                        let install = Install {
                            cluster: &cluster.name,
                            boundary: &boundary.name,
                            others: &in_cluster,
                            probe_namespace: probe_namespace.as_deref(),
                            applied: written_as,
                            switching,
                            first_look: !self.seen_unconfirmed(&key),
                        };
                        let (status, in_new_layout) = self.install(&client, policy, install).await;
                        confirmed &= in_new_layout;
                        let status = self.within_grace(key, status, &mut unconfirmed);
                        self.with_drift(
                            &cluster.name,
                            boundary.name.as_str(),
                            &record.name,
                            status,
                            &mut confirmed_now,
                            &mut unconfirmed,
                        )
                    }
                };
                written.insert((boundary.name.to_string(), record.name.clone()));
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
            for (exception, status) in self
                .confirm_exceptions(
                    &client,
                    &cluster.name,
                    boundary,
                    &in_cluster,
                    &namespaces,
                    &mut unconfirmed,
                )
                .await
            {
                exception_statuses.insert((boundary.name.to_string(), exception), status);
            }
            // During a switch, the earlier layout's objects stay until the new layout's are
            // confirmed (SPEC 3.4: no gap).
            let kept = crate::plan::keep(&present, choice.layout, confirmed);
            if kept.switch_bindings {
                switches_left += 1;
                shared_left |= present.contains(&Layout::Shared);
            }
            collections.push((boundary, keep, kept, statuses));
        }
        let after = client.installed(&self.installation, None).await?;
        fence.confirm("the removals").await?;
        for (boundary, keep, kept, statuses) in collections {
            let removed = client
                .collect(
                    &after,
                    &self.installation,
                    &boundary.name,
                    Keep {
                        policies: &keep,
                        layouts: &kept.layouts,
                        switch_bindings: kept.switch_bindings,
                    },
                )
                .await
                .map_err(ControllerError::RemovePolicies)?;
            metrics::removed(&cluster.name, removed.len());
            self.write_statuses(&cluster.name, boundary, statuses)
                .await?;
            audits.extend(self.audit_due(&client, &cluster.name, &cluster_name, boundary, fence));
        }
        self.close_drifts(&cluster.name, &written, &confirmed_now)
            .await;
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
        let workloads = fence
            .write(
                "the workloads",
                self.deploy_workloads(&connection, &cluster.name, &attached),
            )
            .await;
        if let Err(ControllerError::Fenced(error)) = workloads {
            return Err(ControllerError::Fenced(error));
        }
        // Boundaries detached from this cluster, or deleted: their objects go.
        if after
            .boundaries()
            .difference(&attached_names)
            .next()
            .is_some()
        {
            fence.confirm("the removal of detached boundaries").await?;
        }
        for stale in after.boundaries().difference(&attached_names) {
            let Ok(boundary) = Name::parse(stale) else {
                continue;
            };
            let removed = client
                .collect(
                    &after,
                    &self.installation,
                    &boundary,
                    Keep {
                        policies: &[],
                        layouts: &[choice.layout],
                        switch_bindings: false,
                    },
                )
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
            Ok(()) => (self.clear_error(cluster).await, None),
            Err(error) => {
                let text = error.to_string();
                tracing::warn!(cluster = %cluster.name, error = %text, "workloads not deployed");
                let result = self
                    .app
                    .record_cluster_error(&cluster.name, Some(&text))
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
            exceptions: exception_statuses,
        })
    }

    /// Writes the boundary's policies in the cluster together, before any is probed: in the
    /// per-boundary layout (whose objects hold several policies), and during a switch of layout
    /// (followed by the switch bindings, which must come after the objects they prove). `None`
    /// otherwise: each policy is applied by [`Self::install`]. A per-boundary boundary with a
    /// policy that cannot be decoded is not written: its objects hold that policy's rules with
    /// the others', and writing without them would drop them.
    pub(super) async fn apply_together(
        &self,
        client: &ClusterClient,
        before: &crate::cluster::Installed,
        boundary: &BoundaryState,
        cluster: &Name,
        in_cluster: &[Policy],
        switching: bool,
    ) -> Option<Result<(), String>> {
        let together = crate::admission::of(client.layout()).writes_boundary_together();
        if !together && !switching {
            return None;
        }
        if together {
            if let Some((record, _)) = wanted(boundary, cluster).find(|(_, d)| d.is_err()) {
                return Some(Err(format!(
                    "not applied: policy '{}' of the boundary cannot be decoded, and the boundary's \
                     admission objects hold its rules with this policy's; they are left as they were",
                    record.name
                )));
            }
        }
        let mut result = client
            .apply_boundary_from(
                before,
                &self.installation,
                &boundary.name,
                in_cluster,
                &boundary.exceptions_in(cluster.as_str()),
            )
            .await;
        if switching && result.is_ok() {
            result = client
                .apply_switch_bindings(&self.installation, &boundary.name, in_cluster)
                .await;
        }
        Some(result.map_err(|error| error.to_string()))
    }

    /// Reads back what one policy, written already, enforces. The flag: the policy is
    /// confirmed in the client's layout (or there is nothing to probe), so a switch may remove
    /// the earlier layout's objects.
    pub(super) async fn install(
        &self,
        client: &ClusterClient,
        policy: &Policy,
        install: Install<'_>,
    ) -> (InstallStatus, bool) {
        let Install {
            cluster,
            boundary,
            others,
            probe_namespace,
            applied,
            switching,
            first_look,
        } = install;
        if let Err(error) = applied {
            return (status_error(&error), false);
        }
        metrics::applied(cluster);
        let Some(namespace) = probe_namespace else {
            // No namespace of the boundary: nothing is judged by either layout yet.
            return (InstallStatus::Installed, true);
        };
        let probe_once = || async {
            if switching {
                client
                    .probe_during_switch(&self.installation, boundary, policy, others, namespace)
                    .await
            } else {
                client
                    .probe_enforcement_among(
                        &self.installation,
                        boundary,
                        policy,
                        others,
                        namespace,
                    )
                    .await
            }
        };
        let enforced = || match policy.mode() {
            Mode::Enforce => InstallStatus::Enforced,
            // Confirmed, but it denies nothing: never shown as `enforced`.
            Mode::Audit => InstallStatus::AuditActive,
        };
        let verdict = |probe: Result<EnforcementProbe, ReconcileError>| match probe {
            Ok(EnforcementProbe::Enforced) => (enforced(), true),
            Ok(EnforcementProbe::EnforcedByEarlierLayout) => (enforced(), false),
            Ok(EnforcementProbe::NotEnforced(reason)) => (status_not_enforced(&reason), false),
            Ok(EnforcementProbe::Inconclusive(reason)) => (status_error(&reason), false),
            Err(ReconcileError::Kube(kube::Error::Api(status))) if status.code == 404 => {
                // The namespace is gone from the cluster: installed, but not probed.
                (InstallStatus::Installed, true)
            }
            Err(error) => (status_error(&error.to_string()), false),
        };
        let mut result = verdict(probe_once().await);
        // The API server activates what was just written at its next policy reload (about
        // once a second): the probe is repeated here, in this cluster's part of the pass,
        // rather than in a pass of its own a moment later.
        let waiting_since = Instant::now();
        while first_look
            && confirm::settling(&result.0)
            && waiting_since.elapsed() + ACTIVATION_POLL <= ACTIVATION_WAIT
        {
            tokio::time::sleep(ACTIVATION_POLL).await;
            result = verdict(probe_once().await);
        }
        result
    }
}

/// How long a version seen for the first time is probed again while it is not yet active.
pub(super) const ACTIVATION_WAIT: Duration = Duration::from_millis(2_500);
/// How often, within [`ACTIVATION_WAIT`].
const ACTIVATION_POLL: Duration = Duration::from_millis(100);
