//! What this replica remembers of each cluster it reconciles, between parts, in one place.
//!
//! A cluster's [`ClusterMemory`] (its connection, API servers seen, versions not yet confirmed,
//! watches, layout, the exception installs written) is owned by the cluster's worker while its
//! part runs: the part takes it at its start ([`Memories::lend`]) and gives it back at its end
//! ([`Memories::give_back`]), so no step of a part locks anything to read or change it. Between
//! parts it waits in [`Memories`], beside what the loop itself knows of the cluster
//! ([`Held`]: a handle on its connection, the boundaries attached, its drift history, the
//! fingerprint it settled at), which the loop reads and changes while a part runs too.
//!
//! Everything of a cluster is dropped whole when it is given up, deleted or its lease lost
//! ([`Memories::forget`]): nothing outlives its hold, and a replica that takes a cluster starts
//! as at a first pass. A memory given back after its cluster was forgotten is dropped, and one
//! whose part never gave it back (the task panicked or was aborted) is made anew.

use std::collections::VecDeque;
use std::sync::{MutexGuard, PoisonError};

use super::settle::Settled;
use super::*;
use crate::drift::{DriftKind, DriftWatch};

/// A probe's key: (cluster, boundary, policy, etag) of a version applied but not yet seen
/// enforcing.
pub(super) type UnconfirmedKey = (String, String, String, String);

/// What the worker of one cluster remembers between its parts.
#[derive(Default)]
pub(super) struct ClusterMemory {
    /// The connection kept between parts, replaced when the credentials change.
    pub(super) connection: Option<Connection>,
    /// The API server start times seen, and when palisade last looked.
    pub(super) apiservers: Option<ApiServersSeen>,
    /// When each version was first seen applied but not enforcing.
    unconfirmed: HashMap<UnconfirmedKey, Instant>,
    /// The status watch of the cluster's workloads, with the credentials it was made from.
    pub(super) status_watch: Option<(Vec<u8>, StatusWatch)>,
    /// Its layout and how often its policies change (`None` until its first part).
    pub(super) layout: Option<LayoutState>,
    /// Its drift watches, with the credentials they were made from.
    pub(super) drift_watch: Option<(Vec<u8>, DriftWatch)>,
    /// The cluster's creation and the exception installs recorded there last (boundary,
    /// exception, expiry, status).
    pub(super) installs_written: Option<(String, Vec<[String; 4]>)>,
}

impl ClusterMemory {
    /// Whether this version was seen applied but not enforcing before.
    pub(super) fn seen_unconfirmed(&self, key: &UnconfirmedKey) -> bool {
        self.unconfirmed.contains_key(key)
    }

    /// A probe that did not confirm a version first seen less than `ACTIVATION_GRACE` ago
    /// (admitted, or refused by the version it replaces: [`Settled::settling`]) is still
    /// `pending`: the API server has not activated it yet. Counted as unconfirmed, so a pass
    /// follows shortly.
    pub(super) fn within_grace(
        &mut self,
        key: UnconfirmedKey,
        settled: Settled,
        unconfirmed: &mut usize,
    ) -> InstallStatus {
        self.unconfirmed
            .retain(|_, first| first.elapsed() < ACTIVATION_GRACE * 10);
        let Settled {
            status, settling, ..
        } = settled;
        if !settling {
            self.unconfirmed.remove(&key);
            return status;
        }
        let first = *self.unconfirmed.entry(key).or_insert_with(Instant::now);
        if first.elapsed() < ACTIVATION_GRACE {
            *unconfirmed += 1;
            InstallStatus::Pending
        } else {
            status
        }
    }

    /// Hands `targets` to the cluster's status watch: the running one when it was made from
    /// these credentials, a new one from `start` otherwise, none when there are no targets.
    /// The watch replaced stops as it drops.
    pub(super) fn follow_statuses(
        &mut self,
        sealed: &[u8],
        targets: Vec<Target>,
        start: impl FnOnce(Vec<Target>) -> StatusWatch,
    ) {
        if targets.is_empty() {
            self.status_watch = None;
            return;
        }
        if let Some((running_from, watch)) = &self.status_watch {
            if running_from.as_slice() == sealed && watch.is_running() {
                watch.update(targets);
                return;
            }
        }
        self.status_watch = Some((sealed.to_vec(), start(targets)));
    }

    /// The cluster's API server may have restarted (a watch or a pass of it failed): its
    /// start time is read at the next look.
    pub(super) fn suspect_apiserver(&mut self) {
        if let Some(seen) = &mut self.apiservers {
            seen.suspect = true;
        }
    }

    /// Starts the cluster's drift watches with `start`, unless they run with these
    /// credentials already. The watches replaced stop as they drop.
    pub(super) fn watch_drift(&mut self, sealed: &[u8], start: impl FnOnce() -> DriftWatch) {
        if self
            .drift_watch
            .as_ref()
            .is_some_and(|(running_from, _)| running_from.as_slice() == sealed)
        {
            return;
        }
        self.drift_watch = Some((sealed.to_vec(), start()));
    }
}

/// What the loop knows of one cluster held, and the worker's memory while no part runs.
#[derive(Default)]
pub(super) struct Held {
    /// The worker's memory between parts (`None` while a part holds it, and before the first).
    idle: Option<ClusterMemory>,
    /// A part holds the memory: what it gives back is kept.
    lent: bool,
    /// A handle on the cluster's connection, for the loop's own reads (a rollout's counters,
    /// whether the cluster answers again); a part takes it when its memory has none.
    connection: Option<Connection>,
    /// The boundaries attached at the latest part's start.
    attached: Vec<String>,
    /// A watch of the cluster failed while a part held the memory: its API servers are
    /// suspect at the next part.
    suspect: bool,
    /// Per (kind, object): when it drifted within the last minute.
    drift_history: HashMap<(DriftKind, String), VecDeque<Instant>>,
    /// The fingerprint of the inputs of its last part that left nothing to do (`scope`).
    settled: Option<Fingerprint>,
}

impl Held {
    /// Counts a change of `object` (of `kind`); how many there were within `window`.
    fn count_change(&mut self, kind: DriftKind, object: &str, window: Duration) -> usize {
        self.drift_history.retain(|_, times| {
            times.retain(|t| t.elapsed() < window);
            !times.is_empty()
        });
        let times = self
            .drift_history
            .entry((kind, object.to_owned()))
            .or_default();
        times.push_back(Instant::now());
        times.len()
    }
}

/// Every cluster's memory and what the loop knows of it, by cluster name. The lock is held
/// only for as long as one of these methods runs, never across an `await`.
#[derive(Default)]
pub(super) struct Memories(Mutex<HashMap<String, Held>>);

impl Memories {
    /// A memory poisoned by a panic elsewhere is still what was last written: used as is.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Held>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The memory of `cluster`, for its worker's part to own until it gives it back (an empty
    /// one at the cluster's first part), with the boundaries `attached` there now. Told what
    /// the loop learnt meanwhile: a failed watch, a connection.
    pub(super) fn lend(&self, cluster: &str, attached: Vec<String>) -> ClusterMemory {
        let mut all = self.lock();
        let held = all.entry(cluster.to_owned()).or_default();
        held.attached = attached;
        let mut memory = held.idle.take().unwrap_or_default();
        held.lent = true;
        if std::mem::take(&mut held.suspect) {
            memory.suspect_apiserver();
        }
        if memory.connection.is_none() {
            memory.connection.clone_from(&held.connection);
        }
        memory
    }

    /// A part ended: its memory waits for the next, unless the cluster was forgotten meanwhile
    /// (then it drops, and its watches stop).
    pub(super) fn give_back(&self, cluster: &str, memory: ClusterMemory) {
        let mut all = self.lock();
        let Some(held) = all.get_mut(cluster).filter(|held| held.lent) else {
            drop(all);
            drop(memory);
            return;
        };
        held.lent = false;
        held.connection.clone_from(&memory.connection);
        held.idle = Some(memory);
    }

    /// Runs `f` on what the loop knows of `cluster`, made empty when there is nothing yet.
    fn with<R>(&self, cluster: &str, f: impl FnOnce(&mut Held) -> R) -> R {
        f(self.lock().entry(cluster.to_owned()).or_default())
    }

    /// A watch of `cluster` failed: its API servers may have restarted, and their start time
    /// is read at its next part's look.
    pub(super) fn suspect(&self, cluster: &str) {
        self.with(cluster, |held| match &mut held.idle {
            Some(memory) => memory.suspect_apiserver(),
            None => held.suspect = true,
        });
    }

    /// Counts a change of `object` (of `kind`) in `cluster`; how many there were within
    /// `window`.
    pub(super) fn count_change(
        &self,
        cluster: &str,
        kind: DriftKind,
        object: &str,
        window: Duration,
    ) -> usize {
        self.with(cluster, |held| held.count_change(kind, object, window))
    }

    /// The boundaries attached to `cluster` when its latest part started.
    pub(super) fn attached(&self, cluster: &str) -> Vec<String> {
        self.lock()
            .get(cluster)
            .map(|held| held.attached.clone())
            .unwrap_or_default()
    }

    /// The fingerprint `cluster` settled at (`None`: its last part left something to do).
    pub(super) fn settled(&self, cluster: &str) -> Option<Fingerprint> {
        self.lock().get(cluster).and_then(|held| held.settled)
    }

    /// Keeps `print` as what `cluster` settled at; nothing for a cluster forgotten.
    pub(super) fn settle(&self, cluster: &str, print: Option<Fingerprint>) {
        if let Some(held) = self.lock().get_mut(cluster) {
            held.settled = print;
        }
    }

    /// The loop's handle on the connection to `cluster`.
    pub(super) fn connection(&self, cluster: &str) -> Option<Connection> {
        self.lock()
            .get(cluster)
            .and_then(|held| held.connection.clone())
    }

    /// Keeps `connection` as the loop's handle on `cluster` (made by the loop itself).
    pub(super) fn keep_connection(&self, cluster: &str, connection: Connection) {
        self.with(cluster, |held| held.connection = Some(connection));
    }

    /// Drops everything remembered of `cluster`; its watches stop (a memory lent to a part
    /// drops when the part gives it back).
    pub(super) fn forget(&self, cluster: &str) {
        // Dropped after the lock is released: a watch's tasks are aborted as it drops.
        let gone = self.lock().remove(cluster);
        drop(gone);
    }

    /// Drops the memory of every cluster not in `keep` (`None`: of every cluster).
    pub(super) fn keep_only(&self, keep: Option<&BTreeSet<String>>) {
        let gone: Vec<Held> = {
            let mut all = self.lock();
            let names: Vec<String> = all
                .keys()
                .filter(|name| keep.is_none_or(|keep| !keep.contains(*name)))
                .cloned()
                .collect();
            names.iter().filter_map(|name| all.remove(name)).collect()
        };
        drop(gone);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(etag: &str) -> UnconfirmedKey {
        ("c1".into(), "shop".into(), "p".into(), etag.into())
    }

    fn settled(status: InstallStatus, settling: bool) -> Settled {
        Settled {
            status,
            confirms_layout: false,
            settling,
        }
    }

    #[test]
    fn a_version_not_yet_active_is_pending_within_its_grace_and_forgotten_once_confirmed() {
        let mut memory = ClusterMemory::default();
        let mut unconfirmed = 0;
        let admitted = status_not_enforced("a violating object was admitted");
        assert!(!memory.seen_unconfirmed(&key("1")));
        let status = memory.within_grace(key("1"), settled(admitted, true), &mut unconfirmed);
        assert_eq!(status, InstallStatus::Pending);
        assert_eq!(unconfirmed, 1);
        assert!(memory.seen_unconfirmed(&key("1")));
        // Another version of the same policy has a grace of its own.
        assert!(!memory.seen_unconfirmed(&key("2")));
        let enforced = settled(InstallStatus::Enforced, false);
        let status = memory.within_grace(key("1"), enforced, &mut unconfirmed);
        assert_eq!(status, InstallStatus::Enforced);
        assert_eq!(unconfirmed, 1, "a confirmed version is not counted");
        assert!(!memory.seen_unconfirmed(&key("1")));
    }

    #[test]
    fn an_error_is_not_held_back_as_pending() {
        let mut memory = ClusterMemory::default();
        let mut unconfirmed = 0;
        let error = status_error("unreachable");
        assert_eq!(
            memory.within_grace(key("1"), settled(error.clone(), false), &mut unconfirmed),
            error
        );
        assert_eq!(unconfirmed, 0);
        assert!(!memory.seen_unconfirmed(&key("1")));
    }

    #[test]
    fn changes_are_counted_per_object_within_the_window() {
        let memories = Memories::default();
        let minute = Duration::from_secs(60);
        let count = |object, window| memories.count_change("c1", DriftKind::Policy, object, window);
        assert_eq!(count("a", minute), 1);
        assert_eq!(count("a", minute), 2);
        assert_eq!(count("b", minute), 1);
        // Nothing is older than a zero window: the history starts again.
        assert_eq!(count("a", Duration::ZERO), 1);
        assert_eq!(
            memories.count_change("c2", DriftKind::Policy, "a", minute),
            1,
            "each cluster counts its own"
        );
    }

    /// A memory a part marked (its exception installs written).
    fn marked(mark: &str) -> ClusterMemory {
        ClusterMemory {
            installs_written: Some((mark.to_owned(), Vec::new())),
            ..ClusterMemory::default()
        }
    }

    fn mark(memory: &ClusterMemory) -> Option<&str> {
        memory
            .installs_written
            .as_ref()
            .map(|(mark, _)| mark.as_str())
    }

    #[test]
    fn a_forgotten_cluster_starts_empty_and_others_keep_theirs() {
        let memories = Memories::default();
        for cluster in ["c1", "c2", "c3"] {
            drop(memories.lend(cluster, vec![format!("shop-{cluster}")]));
            memories.give_back(cluster, marked(cluster));
        }
        memories.forget("c1");
        assert!(memories.attached("c1").is_empty());
        assert_eq!(mark(&memories.lend("c1", Vec::new())), None);
        let keep: BTreeSet<String> = ["c2".to_owned()].into();
        memories.keep_only(Some(&keep));
        assert_eq!(memories.attached("c2"), vec!["shop-c2".to_owned()]);
        assert!(memories.attached("c3").is_empty());
        memories.keep_only(None);
        assert!(memories.attached("c2").is_empty());
    }

    #[test]
    fn a_part_owns_the_memory_until_it_gives_it_back_and_a_forgotten_clusters_is_dropped() {
        let memories = Memories::default();
        let lent = memories.lend("c1", vec!["shop".into()]);
        assert_eq!(mark(&lent), None, "the first part starts empty");
        // While the part holds it, the loop still knows the cluster and learns about it.
        assert_eq!(memories.attached("c1"), vec!["shop".to_owned()]);
        memories.settle("c1", None);
        memories.suspect("c1");
        memories.give_back("c1", marked("first"));
        let next = memories.lend("c1", vec!["shop".into()]);
        assert_eq!(mark(&next), Some("first"), "given back, then lent again");
        // Forgotten while lent (the lease was lost): what comes back is dropped, not kept.
        memories.forget("c1");
        memories.count_change("c1", DriftKind::Policy, "a", Duration::from_secs(60));
        memories.give_back("c1", next);
        assert_eq!(mark(&memories.lend("c1", Vec::new())), None);
    }

    fn choice(layout: Layout, reason: &str) -> Choice {
        Choice {
            layout,
            reason: reason.to_owned(),
        }
    }

    #[test]
    fn the_layout_shown_says_switching_until_no_boundary_still_switches_and_is_written_once() {
        let mut memory = ClusterMemory::default();
        let to_shared = choice(Layout::Shared, "20 boundaries");
        // First pass: nothing known yet; the choice is shown as is.
        assert_eq!(
            memory.layout_to_show(&to_shared, 0),
            Some((Layout::Shared, "20 boundaries".to_owned()))
        );
        assert_eq!(memory.layout_to_show(&to_shared, 0), None, "shown already");
        // A switch back with boundaries still switching: the current layout, and why.
        let back = choice(Layout::PerPolicy, "3 boundaries");
        assert_eq!(
            memory.layout_to_show(&back, 2),
            Some((
                Layout::Shared,
                "switching to per-policy: 3 boundaries".to_owned()
            ))
        );
        assert_eq!(memory.layout_to_show(&back, 1), None);
        assert_eq!(
            memory.layout_to_show(&back, 0),
            Some((Layout::PerPolicy, "3 boundaries".to_owned()))
        );
    }
}
