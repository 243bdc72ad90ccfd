//! Drift, as the controller handles it (SPEC 3.4 v3.1): the watches of each cluster
//! ([`crate::drift`]) report a change palisade did not make; the controller believes it when
//! the store still wants what changed, says at once in every affected policy's status what
//! happened (`not enforced: <what happened>; restoring in <cluster>`), and runs a pass, which
//! undoes it. The drift stays open, and the statuses say so, until a pass confirms every
//! affected policy again; then the repair is counted (`palisade_repairs_total{cluster,kind}`)
//! and recorded on the cluster. Someone who keeps changing the same object is answered with
//! growing pauses, which the status states.

use std::str::FromStr;

use super::*;
use crate::drift::{Drift, DriftKind, DriftWatch, Seen};

const WINDOW: Duration = Duration::from_secs(60);
/// The longest pause before a repair.
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// How many reports of the watches may wait for the controller.
pub(super) const QUEUE: usize = 4096;

/// A drift not yet repaired and confirmed.
#[derive(Debug)]
pub(super) struct OpenDrift {
    pub(super) drift: Drift,
    /// The reason the affected statuses give.
    reason: String,
    /// When palisade saw it: a probe sooner than [`SETTLE`] after proves nothing.
    seen: Instant,
}

/// How long after a drift a probe may confirm its repair. The API server activates each
/// version of an admission object some time after it is written (measured 0.1-1.1 s): a probe
/// right after the repair may still be judged by the version from before the drift, and the
/// changed version may then act for a moment before the repaired one does.
pub(super) const SETTLE: Duration = Duration::from_secs(2);

/// The pause before repairing the `count`-th change of one object within a minute, the first
/// `free` of them repaired at once.
fn pause(count: usize, free: usize) -> Duration {
    if count <= free {
        return Duration::ZERO;
    }
    let exponent = u32::try_from(count - free).unwrap_or(u32::MAX).min(16);
    Duration::from_secs(1u64 << exponent).min(MAX_PAUSE)
}

/// The `not enforced` reason of a drift in `cluster`, after `count` changes within a minute.
fn reason(drift: &Drift, count: usize, pause: Duration) -> String {
    let what = drift.what();
    let cluster = &drift.cluster;
    if pause.is_zero() {
        format!("{what}; restoring in {cluster}")
    } else {
        format!(
            "{what} {count} times within a minute; restoring after a pause of {} s in {cluster}",
            pause.as_secs()
        )
    }
}

impl Controller {
    /// Starts the drift watches of `cluster` (again when its credentials changed).
    pub(super) fn watch_drift(&self, cluster: &str, connection: &Connection) {
        let replaced = self.memory.with(cluster, |memory| {
            if memory
                .drift_watch
                .as_ref()
                .is_some_and(|(sealed, _)| *sealed == connection.sealed)
            {
                return None;
            }
            let watch = DriftWatch::start(
                connection.client.client(),
                cluster,
                &self.installation,
                self.drift_sender.clone(),
            );
            memory
                .drift_watch
                .replace((connection.sealed.clone(), watch))
        });
        // Stopped once the memory is free again.
        drop(replaced);
    }

    /// Forgets the clusters not in `clusters` (deleted, or held by another replica), or every
    /// cluster: their watches stop and their open drifts close unrepaired.
    pub(super) fn keep_only(&self, clusters: Option<&BTreeSet<String>>) {
        self.memory.keep_only(clusters);
        if let Ok(mut open) = self.open_drifts.lock() {
            match clusters {
                Some(keep) => open.retain(|d| keep.contains(&d.drift.cluster)),
                None => open.clear(),
            }
        }
    }

    /// Takes `first` and whatever else the watches reported meanwhile: each believed drift is
    /// opened and its statuses written. The pause before the pass that repairs them: `None`
    /// when nothing needs one, zero when it runs now.
    pub(super) async fn take_drifts(
        &self,
        first: Seen,
        queue: &mut tokio::sync::mpsc::Receiver<Seen>,
    ) -> Option<Duration> {
        let mut seen = vec![first];
        while let Ok(more) = queue.try_recv() {
            seen.push(more);
        }
        let mut next: Option<Duration> = None;
        let mut opened = Vec::new();
        for seen in seen {
            match seen {
                Seen::Relisted { .. } => next = Some(Duration::ZERO),
                Seen::WatchFailed { cluster } => self.suspect_apiserver(&cluster),
                Seen::NamespaceDeleted { cluster, namespace } => {
                    tracing::info!(cluster, namespace, "a boundary namespace was deleted");
                    next = Some(Duration::ZERO);
                }
                Seen::Drift(drift) => {
                    if !self.believe(&drift).await {
                        continue;
                    }
                    let count = self.memory.with(&drift.cluster, |m| {
                        m.count_change(drift.kind, &drift.object, WINDOW)
                    });
                    let pause = pause(count, self.settings.free_repairs);
                    let reason = reason(&drift, count, pause);
                    tracing::warn!(cluster = %drift.cluster, reason, "drift: a change palisade did not make");
                    next = Some(next.map_or(pause, |n| n.min(pause)));
                    opened.push(OpenDrift {
                        drift,
                        reason,
                        seen: Instant::now(),
                    });
                }
            }
        }
        if opened.is_empty() {
            return next;
        }
        let mut boundaries: BTreeSet<(String, String)> = BTreeSet::new();
        for open in &opened {
            let names = match &open.drift.boundary {
                Some(boundary) => vec![boundary.clone()],
                None => self
                    .memory
                    .get(&open.drift.cluster, |m| m.attached.clone())
                    .unwrap_or_default(),
            };
            for name in names {
                boundaries.insert((open.drift.cluster.clone(), name));
            }
        }
        if let Ok(mut open) = self.open_drifts.lock() {
            for new in opened {
                open.retain(|o| {
                    !(o.drift.cluster == new.drift.cluster
                        && o.drift.kind == new.drift.kind
                        && o.drift.object == new.drift.object)
                });
                open.push(new);
            }
        }
        for (cluster, boundary) in boundaries {
            self.write_drift_statuses(&cluster, &boundary).await;
        }
        next
    }

    /// Whether the store still wants what drifted: a release, a detach or a deletion made by
    /// another palisade process changes the store first. A store that cannot be read is
    /// believed (a status too pessimistic for a moment, never one too optimistic).
    async fn believe(&self, drift: &Drift) -> bool {
        let still = |result: Result<bool, StoreError>| match result {
            Ok(wanted) => wanted,
            Err(StoreError::NotFound) => false,
            Err(_) => true,
        };
        let cluster = drift.cluster.as_str();
        match (&drift.kind, &drift.boundary) {
            // A namespace found gone is no longer the boundary's: its label is not restored.
            (DriftKind::NamespaceLabel, Some(boundary)) => still(
                self.app
                    .namespace_record(boundary, cluster, &drift.object)
                    .await
                    .map(|n| n.gone_at.is_none()),
            ),
            (_, Some(boundary)) => {
                let attached = still(
                    self.app
                        .clusters_of_boundary(boundary)
                        .await
                        .map(|c| c.iter().any(|c| c.name == cluster)),
                );
                if !attached {
                    return false;
                }
                if drift.policies.is_empty() {
                    return true;
                }
                let mut any = false;
                for policy in &drift.policies {
                    any |= still(self.app.policy_record(boundary, policy).await.map(|_| true));
                }
                any
            }
            (_, None) => still(self.app.cluster_record(cluster).await.map(|_| true)),
        }
    }

    /// The open drift's reason for `policy` of `boundary` in `cluster`, if one affects it.
    pub(super) fn drift_reason(
        &self,
        cluster: &str,
        boundary: &str,
        policy: &str,
    ) -> Option<String> {
        let open = self.open_drifts.lock().ok()?;
        open.iter()
            .find(|o| o.drift.cluster == cluster && o.drift.affects(boundary, policy))
            .map(|o| o.reason.clone())
    }

    /// The reason of an open drift affecting the policy that palisade saw less than
    /// [`SETTLE`] ago.
    fn unsettled_drift(&self, cluster: &str, boundary: &str, policy: &str) -> Option<String> {
        let open = self.open_drifts.lock().ok()?;
        open.iter()
            .find(|o| {
                o.drift.cluster == cluster
                    && o.drift.affects(boundary, policy)
                    && o.seen.elapsed() < SETTLE
            })
            .map(|o| o.reason.clone())
    }

    /// Rewrites the statuses of `boundary` in `cluster` that an open drift affects and that
    /// claim enforcement (or are about to): `not enforced: <reason>`.
    async fn write_drift_statuses(&self, cluster: &str, boundary: &str) {
        let Ok(statuses) = self.app.policy_statuses(boundary).await else {
            return;
        };
        let mut changed = false;
        let statuses: Vec<PolicyStatusRecord> = statuses
            .into_iter()
            .filter(|s| s.cluster == cluster)
            .map(|mut record| {
                let claims = matches!(
                    InstallStatus::from_str(&record.status),
                    Ok(InstallStatus::Enforced
                        | InstallStatus::AuditActive
                        | InstallStatus::Pending)
                );
                if claims {
                    if let Some(reason) = self.drift_reason(cluster, boundary, &record.policy) {
                        record.status = status_not_enforced(&reason).to_string();
                        record.updated_at = palisade_app::reconcile::now();
                        changed = true;
                    }
                }
                record
            })
            .collect();
        if !changed {
            return;
        }
        let result = self
            .app
            .record_policy_statuses(cluster, boundary, statuses)
            .await
            .map_err(ControllerError::Statuses);
        self.recorded(cluster, "the statuses of a drift", result);
    }

    /// The status a pass found for a policy, unless an open drift affects it and the pass did
    /// not confirm it: then the drift's reason. `confirmed` collects what the pass confirmed.
    /// A confirmation sooner than [`SETTLE`] after the drift is not one yet: the drift's reason
    /// stays, and `unsettled` counts it, so a pass follows shortly.
    pub(super) fn with_drift(
        &self,
        cluster: &str,
        boundary: &str,
        policy: &str,
        status: InstallStatus,
        confirmed: &mut BTreeSet<(String, String)>,
        unsettled: &mut usize,
    ) -> InstallStatus {
        // `installed`: no namespace to probe in; applied is all there is to confirm.
        if matches!(
            status,
            InstallStatus::Enforced | InstallStatus::AuditActive | InstallStatus::Installed
        ) {
            if let Some(reason) = self.unsettled_drift(cluster, boundary, policy) {
                *unsettled += 1;
                return status_not_enforced(&reason);
            }
            confirmed.insert((boundary.to_owned(), policy.to_owned()));
            return status;
        }
        // An error names its own cause; `pending` and `not enforced` are the drift's doing.
        match self.drift_reason(cluster, boundary, policy) {
            Some(reason) if !matches!(status, InstallStatus::Error(_)) => {
                status_not_enforced(&reason)
            }
            _ => status,
        }
    }

    /// Closes the open drifts of `cluster` whose affected policies the pass confirmed (all
    /// of `written`, the (boundary, policy) pairs it wrote statuses for, that they affect):
    /// each is a repair, counted and recorded on the cluster. A namespace's label was put
    /// back, counted and recorded by the pass itself.
    pub(super) async fn close_drifts(
        &self,
        cluster: &str,
        written: &BTreeSet<(String, String)>,
        confirmed: &BTreeSet<(String, String)>,
    ) {
        let closed: Vec<OpenDrift> = {
            let Ok(mut open) = self.open_drifts.lock() else {
                return;
            };
            let (closed, kept): (Vec<OpenDrift>, Vec<OpenDrift>) =
                std::mem::take(&mut *open).into_iter().partition(|o| {
                    o.drift.cluster == cluster
                        && written
                            .iter()
                            .filter(|(b, p)| o.drift.affects(b, p))
                            .all(|pair| confirmed.contains(pair))
                });
            *open = kept;
            closed
        };
        for open in closed {
            if open.drift.kind == DriftKind::NamespaceLabel {
                continue;
            }
            let repair = format!("{}; restored", open.drift.what());
            tracing::info!(cluster, repair, "drift repaired");
            metrics::repaired(cluster, open.drift.kind.as_str());
            let result = self
                .app
                .record_repair(cluster, &repair)
                .await
                .map_err(ControllerError::ClusterStatus);
            self.recorded(cluster, "a repair", result);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::drift::Happened;

    #[test]
    fn repeated_changes_are_repaired_after_growing_pauses() {
        let pauses: Vec<u64> = (1..=12).map(|n| pause(n, 5).as_secs()).collect();
        assert_eq!(pauses, [0, 0, 0, 0, 0, 2, 4, 8, 16, 32, 60, 60]);
    }

    #[test]
    fn the_reason_names_what_happened_and_where() {
        let drift = Drift {
            cluster: "local".into(),
            kind: DriftKind::Binding,
            object: "trusted.shop.palisade.dev".into(),
            happened: Happened::Deleted,
            boundary: Some("shop".into()),
            policies: vec!["trusted".into()],
        };
        assert_eq!(
            reason(&drift, 1, Duration::ZERO),
            "binding trusted.shop.palisade.dev was deleted; restoring in local"
        );
        assert_eq!(
            reason(&drift, 7, pause(7, 5)),
            "binding trusted.shop.palisade.dev was deleted 7 times within a minute; restoring after a pause of 4 s in local"
        );
    }
}
