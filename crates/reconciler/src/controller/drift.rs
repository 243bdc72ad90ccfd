//! Drift, as the controller handles it (SPEC 3.4 v3.1): the watches of each cluster
//! ([`crate::drift`]) report a change palisade did not make; the controller believes it when
//! the store still wants what changed, says at once in every affected policy's status what
//! happened (`not enforced: <what happened>; restoring in <cluster>`), and runs a pass, which
//! undoes it. The drift stays open, and the statuses say so, until a pass confirms every
//! affected policy again; then the repair is counted (`palisade_repairs_total{cluster,kind}`)
//! and recorded on the cluster. Someone who keeps changing the same object is answered with
//! growing pauses, which the status states.

use super::*;
use crate::drift::{Drift, DriftKind, Seen};

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
                Seen::WatchFailed { cluster } => self.memory.suspect(&cluster),
                Seen::NamespaceDeleted { cluster, namespace } => {
                    tracing::info!(cluster, namespace, "a boundary namespace was deleted");
                    next = Some(Duration::ZERO);
                }
                Seen::Drift(drift) => {
                    if !believe(&*self.records, &drift).await {
                        continue;
                    }
                    let count =
                        self.memory
                            .count_change(&drift.cluster, drift.kind, &drift.object, WINDOW);
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
                None => self.memory.attached(&open.drift.cluster),
            };
            for name in names {
                boundaries.insert((open.drift.cluster.clone(), name));
            }
        }
        self.open_drifts.open(opened);
        for (cluster, boundary) in boundaries {
            self.write_drift_statuses(&cluster, &boundary).await;
        }
        next
    }

    /// Rewrites the statuses of `boundary` in `cluster` that an open drift affects and that
    /// claim enforcement (or are about to): `not enforced: <reason>`.
    async fn write_drift_statuses(&self, cluster: &str, boundary: &str) {
        let Ok(statuses) = self.records.policy_statuses(boundary).await else {
            return;
        };
        let mut changed = false;
        let statuses: Vec<PolicyInstall> = statuses
            .into_iter()
            .filter(|s| s.cluster == cluster)
            .map(|mut record| {
                let claims = matches!(
                    record.status,
                    InstallStatus::Enforced | InstallStatus::AuditActive | InstallStatus::Pending
                );
                if claims {
                    if let Some(reason) = self.open_drifts.reason(cluster, boundary, &record.policy)
                    {
                        record.status = status_not_enforced(&reason);
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
            .records
            .record_policy_statuses(cluster, boundary, statuses)
            .await
            .map_err(ControllerError::Statuses);
        pass::recorded(cluster, "the statuses of a drift", result);
    }
}

/// Whether the store still wants what drifted: a release, a detach or a deletion made by
/// another palisade process changes the store first. A store that cannot be read is
/// believed (a status too pessimistic for a moment, never one too optimistic).
async fn believe(records: &dyn Records, drift: &Drift) -> bool {
    let still = |result: Result<bool, StoreError>| match result {
        Ok(wanted) => wanted,
        Err(StoreError::NotFound) => false,
        Err(_) => true,
    };
    let cluster = drift.cluster.as_str();
    match (&drift.kind, &drift.boundary) {
        // A namespace found gone is no longer the boundary's: its label is not restored.
        (DriftKind::NamespaceLabel, Some(boundary)) => still(
            records
                .namespace_record(boundary, cluster, &drift.object)
                .await
                .map(|n| n.gone_at.is_none()),
        ),
        (_, Some(boundary)) => {
            let attached = still(
                records
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
                any |= still(records.policy_record(boundary, policy).await.map(|_| true));
            }
            any
        }
        (_, None) => still(records.cluster_record(cluster).await.map(|_| true)),
    }
}

/// The drifts not yet repaired and confirmed, of every cluster held.
#[derive(Debug, Default)]
pub(super) struct OpenDrifts(Mutex<Vec<OpenDrift>>);

impl OpenDrifts {
    /// Drifts poisoned by a panic elsewhere are still those last written: used as they are.
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<OpenDrift>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Opens `opened`, each replacing an open drift of the same object.
    fn open(&self, opened: Vec<OpenDrift>) {
        let mut open = self.lock();
        for new in opened {
            open.retain(|o| {
                !(o.drift.cluster == new.drift.cluster
                    && o.drift.kind == new.drift.kind
                    && o.drift.object == new.drift.object)
            });
            open.push(new);
        }
    }

    /// Drops the open drifts of the clusters not in `clusters` (`None`: of every cluster),
    /// unrepaired: the clusters are gone or held by another replica.
    pub(super) fn keep_only(&self, clusters: Option<&BTreeSet<String>>) {
        let mut open = self.lock();
        match clusters {
            Some(keep) => open.retain(|d| keep.contains(&d.drift.cluster)),
            None => open.clear(),
        }
    }

    /// Drops the open drifts of `cluster`.
    pub(super) fn forget(&self, cluster: &str) {
        self.lock().retain(|d| d.drift.cluster != cluster);
    }

    /// The open drift's reason for `policy` of `boundary` in `cluster`, if one affects it.
    pub(super) fn reason(&self, cluster: &str, boundary: &str, policy: &str) -> Option<String> {
        let open = self.lock();
        open.iter()
            .find(|o| o.drift.cluster == cluster && o.drift.affects(boundary, policy))
            .map(|o| o.reason.clone())
    }

    /// The reason of an open drift affecting the policy that palisade saw less than
    /// [`SETTLE`] ago.
    fn unsettled(&self, cluster: &str, boundary: &str, policy: &str) -> Option<String> {
        let open = self.lock();
        open.iter()
            .find(|o| {
                o.drift.cluster == cluster
                    && o.drift.affects(boundary, policy)
                    && o.seen.elapsed() < SETTLE
            })
            .map(|o| o.reason.clone())
    }

    /// The status a pass found for a policy, unless an open drift affects it and the pass did
    /// not confirm it: then the drift's reason. `confirmed` collects what the pass confirmed.
    /// A confirmation sooner than [`SETTLE`] after the drift is not one yet: the drift's reason
    /// stays, and `unsettled` counts it, so a pass follows shortly.
    pub(super) fn judge(
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
            if let Some(reason) = self.unsettled(cluster, boundary, policy) {
                *unsettled += 1;
                return status_not_enforced(&reason);
            }
            confirmed.insert((boundary.to_owned(), policy.to_owned()));
            return status;
        }
        // An error names its own cause; `pending` and `not enforced` are the drift's doing.
        match self.reason(cluster, boundary, policy) {
            Some(reason) if !matches!(status, InstallStatus::Error(_)) => {
                status_not_enforced(&reason)
            }
            _ => status,
        }
    }

    /// Takes the open drifts of `cluster` whose affected policies the part confirmed (all of
    /// `written`, the (boundary, policy) pairs it wrote statuses for, that they affect). A
    /// drift seen after the part `started` stays open: the part may have written the object
    /// before the change it repairs, and the cluster's next part closes it.
    pub(super) fn close(
        &self,
        cluster: &str,
        started: Instant,
        written: &BTreeSet<(String, String)>,
        confirmed: &BTreeSet<(String, String)>,
    ) -> Vec<OpenDrift> {
        let mut open = self.lock();
        let (closed, kept): (Vec<OpenDrift>, Vec<OpenDrift>) =
            std::mem::take(&mut *open).into_iter().partition(|o| {
                o.drift.cluster == cluster
                    && o.seen <= started
                    && written
                        .iter()
                        .filter(|(b, p)| o.drift.affects(b, p))
                        .all(|pair| confirmed.contains(pair))
            });
        *open = kept;
        closed
    }
}

/// Each closed drift is a repair, counted and recorded on the cluster. A namespace's label was
/// put back, counted and recorded by the pass itself.
pub(super) async fn record_repairs(records: &dyn Records, cluster: &str, closed: Vec<OpenDrift>) {
    for open in closed {
        if open.drift.kind == DriftKind::NamespaceLabel {
            continue;
        }
        let repair = format!("{}; restored", open.drift.what());
        tracing::info!(cluster, repair, "drift repaired");
        metrics::repaired(cluster, open.drift.kind.as_str());
        let result = records
            .record_repair(cluster, &repair)
            .await
            .map_err(ControllerError::ClusterStatus);
        pass::recorded(cluster, "a repair", result);
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

    fn open(cluster: &str, policies: &[&str], seen: Instant) -> OpenDrift {
        let drift = Drift {
            cluster: cluster.into(),
            kind: DriftKind::Policy,
            object: format!("{}.shop.palisade.dev", policies.join("-")),
            happened: Happened::Deleted,
            boundary: Some("shop".into()),
            policies: policies.iter().map(|p| (*p).to_owned()).collect(),
        };
        let reason = reason(&drift, 1, Duration::ZERO);
        OpenDrift {
            drift,
            reason,
            seen,
        }
    }

    fn pairs(policies: &[&str]) -> BTreeSet<(String, String)> {
        policies
            .iter()
            .map(|p| ("shop".to_owned(), (*p).to_owned()))
            .collect()
    }

    /// What a pass's status becomes under an open drift, per status the probe gave.
    #[test]
    fn a_drift_says_not_enforced_until_a_probe_after_it_settled_confirms_the_repair() {
        let reason =
            "ValidatingAdmissionPolicy trusted.shop.palisade.dev was deleted; restoring in c1";
        let long_ago = Instant::now() - SETTLE * 2;
        let cases = [
            // (seen, probe gave, status, counted unsettled, confirmed)
            (
                Instant::now(),
                InstallStatus::Enforced,
                status_not_enforced(reason),
                1,
                false,
            ),
            (
                long_ago,
                InstallStatus::Enforced,
                InstallStatus::Enforced,
                0,
                true,
            ),
            (
                long_ago,
                InstallStatus::AuditActive,
                InstallStatus::AuditActive,
                0,
                true,
            ),
            (
                long_ago,
                InstallStatus::Installed,
                InstallStatus::Installed,
                0,
                true,
            ),
            (
                long_ago,
                InstallStatus::Pending,
                status_not_enforced(reason),
                0,
                false,
            ),
            (
                long_ago,
                status_not_enforced("admitted"),
                status_not_enforced(reason),
                0,
                false,
            ),
            // An error names its own cause.
            (
                long_ago,
                status_error("timeout"),
                status_error("timeout"),
                0,
                false,
            ),
        ];
        for (seen, probe, want, want_unsettled, want_confirmed) in cases {
            let drifts = OpenDrifts::default();
            drifts.open(vec![open("c1", &["trusted"], seen)]);
            let (mut confirmed, mut unsettled) = (BTreeSet::new(), 0);
            let got = drifts.judge(
                "c1",
                "shop",
                "trusted",
                probe.clone(),
                &mut confirmed,
                &mut unsettled,
            );
            assert_eq!(got, want, "{probe}");
            assert_eq!(unsettled, want_unsettled, "{probe}");
            assert_eq!(
                confirmed.contains(&("shop".into(), "trusted".into())),
                want_confirmed
            );
            // Another cluster, or a policy the drift does not affect, keeps its status.
            let got = drifts.judge(
                "c2",
                "shop",
                "trusted",
                probe.clone(),
                &mut confirmed,
                &mut 0,
            );
            assert_eq!(got, probe);
            let got = drifts.judge("c1", "shop", "other", probe.clone(), &mut confirmed, &mut 0);
            assert_eq!(got, probe);
        }
    }

    #[test]
    fn a_drift_closes_once_every_policy_it_affects_that_the_pass_wrote_is_confirmed() {
        let cases: [(&[&str], &[&str], bool); 4] = [
            (&["a", "b"], &["a", "b"], true),
            (&["a", "b"], &["a"], false),
            (&["a", "b"], &[], false),
            // Written: a only (b is gone); a confirmed closes it.
            (&["a"], &["a"], true),
        ];
        for (written, confirmed, closes) in cases {
            let drifts = OpenDrifts::default();
            drifts.open(vec![open("c1", &["a", "b"], Instant::now())]);
            let closed = drifts.close("c1", Instant::now(), &pairs(written), &pairs(confirmed));
            assert_eq!(closed.len() == 1, closes, "{written:?} {confirmed:?}");
            assert_eq!(
                drifts.reason("c1", "shop", "a").is_none(),
                closes,
                "a closed drift is no longer a status's reason"
            );
        }
        // Another cluster's pass closes nothing here.
        let drifts = OpenDrifts::default();
        drifts.open(vec![open("c1", &["a"], Instant::now())]);
        assert!(drifts
            .close("c2", Instant::now(), &pairs(&["a"]), &pairs(&["a"]))
            .is_empty());
        // Seen after the part started: its writes may predate the change; the next part
        // closes it.
        let started = Instant::now();
        let drifts = OpenDrifts::default();
        drifts.open(vec![open("c1", &["a"], started + Duration::from_millis(1))]);
        assert!(drifts
            .close("c1", started, &pairs(&["a"]), &pairs(&["a"]))
            .is_empty());
        assert_eq!(
            drifts
                .close(
                    "c1",
                    Instant::now() + Duration::from_secs(1),
                    &pairs(&["a"]),
                    &pairs(&["a"])
                )
                .len(),
            1
        );
    }

    #[test]
    fn a_new_drift_of_an_object_replaces_the_open_one_and_forgotten_clusters_lose_theirs() {
        let drifts = OpenDrifts::default();
        drifts.open(vec![open("c1", &["a"], Instant::now())]);
        drifts.open(vec![
            open("c1", &["a"], Instant::now()),
            open("c2", &["a"], Instant::now()),
        ]);
        assert_eq!(drifts.lock().len(), 2);
        drifts.forget("c1");
        assert!(drifts.reason("c1", "shop", "a").is_none());
        assert!(drifts.reason("c2", "shop", "a").is_some());
        drifts.keep_only(Some(&BTreeSet::new()));
        assert!(drifts.reason("c2", "shop", "a").is_none());
    }
}
