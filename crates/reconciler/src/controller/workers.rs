//! Each cluster its own worker: at most one part of a cluster runs at a time, clusters run in
//! parallel, and a cluster asked for while its part runs is run once more when that part
//! ends, with the desired state read then. A slow or silent cluster (up to
//! [`Settings::cluster_timeout`]) holds up its own next part, never another cluster's.
//!
//! [`Workers`] is the loop's bookkeeping and nothing else: which parts run, which are asked
//! for again, the fingerprint each part started from, and what the parts that ended since the
//! loop was last idle did (merged into one [`PassReport`] there, as a pass reports it).

use tokio::task::{Id, JoinError, JoinSet};

use super::*;

/// The parts under way, and what the ended ones did since the loop was last idle.
#[derive(Default)]
pub(super) struct Workers {
    tasks: JoinSet<ClusterDone>,
    /// The cluster each task works on (a task that panicked reports only its id).
    ids: HashMap<Id, String>,
    /// The fingerprint each running part started from: kept as settled if it leaves nothing
    /// to do.
    prints: HashMap<String, Fingerprint>,
    /// Clusters asked for while their part ran: run again once it ends.
    again: BTreeSet<String>,
    /// What each cluster's latest part did (its own report), and failures of rounds that
    /// started nothing (`*`).
    parts: BTreeMap<String, PassReport>,
    /// The first exception end of the latest round's desired state.
    next_expiry: Option<String>,
    /// Clusters whose latest part left policies unconfirmed, and when to look again.
    rechecks: BTreeMap<String, Instant>,
}

impl Workers {
    /// Whether no part runs.
    pub(super) fn idle(&self) -> bool {
        self.tasks.is_empty()
    }

    /// The clusters whose parts run.
    pub(super) fn running(&self) -> BTreeSet<String> {
        self.ids.values().cloned().collect()
    }

    /// Runs `part` for `cluster` unless its part runs already; then it runs again later.
    pub(super) fn start<F>(&mut self, cluster: &str, print: Option<Fingerprint>, part: F)
    where
        F: Future<Output = ClusterDone> + Send + 'static,
    {
        if self.ids.values().any(|c| c == cluster) {
            self.again.insert(cluster.to_owned());
            return;
        }
        self.rechecks.remove(cluster);
        let handle = self.tasks.spawn(part);
        self.ids.insert(handle.id(), cluster.to_owned());
        match print {
            Some(print) => self.prints.insert(cluster.to_owned(), print),
            None => self.prints.remove(cluster),
        };
    }

    /// A round that started nothing failed for every cluster (`*`): retried with backoff.
    pub(super) fn round_failed(&mut self, report: PassReport) {
        self.parts.insert("*".to_owned(), report);
    }

    /// A round read the store and the fleet: an earlier round's failure is over.
    pub(super) fn round_started(&mut self) {
        self.parts.remove("*");
    }

    pub(super) fn set_next_expiry(&mut self, next_expiry: Option<String>) {
        self.next_expiry = next_expiry;
    }

    /// The next part to end, with the cluster it worked on and the fingerprint it started
    /// from; `None` when none runs.
    pub(super) async fn next(&mut self) -> Option<Ended> {
        let joined = self.tasks.join_next_with_id().await?;
        let id = match &joined {
            Ok((id, _)) => *id,
            Err(error) => error.id(),
        };
        let cluster = self.ids.remove(&id).unwrap_or_default();
        let print = self.prints.remove(&cluster);
        Some(Ended {
            again: self.again.remove(&cluster),
            cluster,
            print,
            joined: joined.map(|(_, done)| done),
        })
    }

    /// Keeps what a cluster's part did, replacing its earlier part's; schedules a look again
    /// when it left policies unconfirmed.
    pub(super) fn record(&mut self, cluster: String, report: PassReport) {
        if report.unconfirmed > 0 && !report.incomplete() {
            self.rechecks
                .insert(cluster.clone(), Instant::now() + RECHECK);
        }
        self.parts.insert(cluster, report);
    }

    /// The clusters due a look again by now (no longer waiting for one).
    pub(super) fn rechecks_due(&mut self) -> BTreeSet<String> {
        let now = Instant::now();
        let due: BTreeSet<String> = self
            .rechecks
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(c, _)| c.clone())
            .collect();
        self.rechecks.retain(|c, _| !due.contains(c));
        due
    }

    /// When the first look again is due, without taking any.
    pub(super) fn next_recheck(&self) -> Option<Instant> {
        self.rechecks.values().min().copied()
    }

    /// The first exception end of the latest round's desired state.
    pub(super) fn next_expiry(&self) -> &Option<String> {
        &self.next_expiry
    }

    /// What the parts since the loop was last idle did, as one pass's report; forgotten here.
    pub(super) fn take_report(&mut self) -> PassReport {
        self.rechecks.clear();
        let mut report = PassReport {
            next_expiry: self.next_expiry.clone(),
            ..PassReport::default()
        };
        for part in std::mem::take(&mut self.parts).into_values() {
            report.failed.extend(part.failed);
            report.reconciled.extend(part.reconciled);
            report.unconfirmed += part.unconfirmed;
            report.unconfirmed_in.extend(part.unconfirmed_in);
            report.unrecorded.extend(part.unrecorded);
        }
        report
    }

    /// Waits for every part under way, dropping what they report (on shutdown: each part
    /// records its own statuses).
    pub(super) async fn drain(&mut self) {
        while self.tasks.join_next().await.is_some() {}
        self.ids.clear();
        self.prints.clear();
    }
}

/// A part that ended.
pub(super) struct Ended {
    pub(super) cluster: String,
    /// The fingerprint it started from.
    pub(super) print: Option<Fingerprint>,
    /// It was asked for again while it ran.
    pub(super) again: bool,
    pub(super) joined: Result<ClusterDone, JoinError>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(name: &str) -> ClusterDone {
        ClusterDone {
            name: name.to_owned(),
            result: Err(ControllerError::Timeout(Duration::from_secs(1))),
            recorded: true,
        }
    }

    #[tokio::test]
    async fn a_cluster_asked_for_while_its_part_runs_runs_again_after_it_others_at_once() {
        let mut workers = Workers::default();
        let (release, hold) = tokio::sync::oneshot::channel::<()>();
        workers.start("slow", None, async move {
            let _ = hold.await;
            done("slow")
        });
        workers.start("slow", None, async {
            unreachable!("a second part of one cluster")
        });
        workers.start("fast", None, async { done("fast") });
        assert_eq!(
            workers.running(),
            BTreeSet::from(["fast".into(), "slow".into()])
        );
        let first = workers.next().await.expect("a part ended");
        assert_eq!((first.cluster.as_str(), first.again), ("fast", false));
        assert!(!workers.idle());
        release.send(()).expect("the slow part waits");
        let second = workers.next().await.expect("a part ended");
        assert_eq!((second.cluster.as_str(), second.again), ("slow", true));
        assert!(workers.idle());
        assert!(workers.next().await.is_none());
    }

    #[test]
    fn the_report_at_idle_holds_each_clusters_latest_part() {
        let mut workers = Workers::default();
        let failed = PassReport {
            failed: [("c1".to_owned(), "no answer".to_owned())].into(),
            ..PassReport::default()
        };
        workers.record("c1".into(), failed);
        let unconfirmed = PassReport {
            unconfirmed: 2,
            unconfirmed_in: ["c2".to_owned()].into(),
            reconciled: ["c2".to_owned()].into(),
            ..PassReport::default()
        };
        workers.record("c2".into(), unconfirmed);
        assert_eq!(workers.rechecks.len(), 1, "a look again at c2 only");
        let later = PassReport {
            reconciled: ["c1".to_owned()].into(),
            ..PassReport::default()
        };
        workers.record("c1".into(), later);
        let report = workers.take_report();
        assert!(report.failed.is_empty(), "c1's later part completed");
        assert_eq!(report.unconfirmed, 2);
        assert_eq!(
            report.reconciled,
            BTreeSet::from(["c1".to_owned(), "c2".to_owned()])
        );
        assert_eq!(workers.take_report(), PassReport::default());
    }
}
