//! What this replica remembers of each cluster it reconciles, between passes, in one place.
//!
//! A cluster's [`ClusterMemory`] is made at its first pass and dropped whole when the cluster
//! is given up, deleted or its lease lost ([`Memories::forget`]): nothing of a cluster outlives
//! its hold, and a replica that takes a cluster starts as at a first pass. Each access locks
//! the map for as long as a closure runs (never across an `await`), so a cluster's part of a
//! pass, its drift reports and its audits read and write one consistent memory.

use std::collections::VecDeque;
use std::sync::{MutexGuard, PoisonError};

use super::*;
use crate::drift::{DriftKind, DriftWatch};

/// A probe's key: (cluster, boundary, policy, etag) of a version applied but not yet seen
/// enforcing.
pub(super) type UnconfirmedKey = (String, String, String, String);

/// What this replica remembers of one cluster.
#[derive(Default)]
pub(super) struct ClusterMemory {
    /// The connection kept between passes, replaced when the credentials change.
    pub(super) connection: Option<Connection>,
    /// The API server start times seen, and when palisade last looked.
    pub(super) apiservers: Option<ApiServersSeen>,
    /// When each version was first seen applied but not enforcing.
    unconfirmed: HashMap<UnconfirmedKey, Instant>,
    /// The status watch of the cluster's workloads, with the credentials it was made from.
    pub(super) status_watch: Option<(Vec<u8>, StatusWatch)>,
    /// Its layout and how often its policies change (`None` until its first pass).
    pub(super) layout: Option<LayoutState>,
    /// Its drift watches, with the credentials they were made from.
    pub(super) drift_watch: Option<(Vec<u8>, DriftWatch)>,
    /// Per (kind, object): when it drifted within the last minute.
    drift_history: HashMap<(DriftKind, String), VecDeque<Instant>>,
    /// The boundaries attached at the latest pass.
    pub(super) attached: Vec<String>,
    /// The cluster's creation and the exception installs recorded there last (boundary,
    /// exception, expiry, status).
    pub(super) installs_written: Option<(String, Vec<[String; 4]>)>,
    /// The fingerprint of the inputs of its last part that left nothing to do (`scope`).
    pub(super) settled: Option<Fingerprint>,
}

impl ClusterMemory {
    /// Whether this version was seen applied but not enforcing before.
    pub(super) fn seen_unconfirmed(&self, key: &UnconfirmedKey) -> bool {
        self.unconfirmed.contains_key(key)
    }

    /// A probe that did not confirm a version first seen less than `ACTIVATION_GRACE` ago
    /// (admitted, or refused by the version it replaces) is still `pending`: the API server
    /// has not activated it yet. Counted as unconfirmed, so a pass follows shortly.
    pub(super) fn within_grace(
        &mut self,
        key: UnconfirmedKey,
        status: InstallStatus,
        unconfirmed: &mut usize,
    ) -> InstallStatus {
        self.unconfirmed
            .retain(|_, first| first.elapsed() < ACTIVATION_GRACE * 10);
        if !confirm::settling(&status) {
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
    /// Answers the watch replaced, to be dropped (stopped) once the memory is free again.
    pub(super) fn follow_statuses(
        &mut self,
        sealed: &[u8],
        targets: Vec<Target>,
        start: impl FnOnce(Vec<Target>) -> StatusWatch,
    ) -> Option<(Vec<u8>, StatusWatch)> {
        if targets.is_empty() {
            return self.status_watch.take();
        }
        if let Some((running_from, watch)) = &self.status_watch {
            if running_from.as_slice() == sealed && watch.is_running() {
                watch.update(targets);
                return None;
            }
        }
        self.status_watch.replace((sealed.to_vec(), start(targets)))
    }

    /// The cluster's API server may have restarted (a watch or a pass of it failed): its
    /// start time is read at the next look.
    pub(super) fn suspect_apiserver(&mut self) {
        if let Some(seen) = &mut self.apiservers {
            seen.suspect = true;
        }
    }

    /// Starts the cluster's drift watches with `start`, unless they run with these
    /// credentials already. Answers the watches replaced, to be dropped (stopped) once the
    /// memory is free again.
    pub(super) fn watch_drift(
        &mut self,
        sealed: &[u8],
        start: impl FnOnce() -> DriftWatch,
    ) -> Option<(Vec<u8>, DriftWatch)> {
        if self
            .drift_watch
            .as_ref()
            .is_some_and(|(running_from, _)| running_from.as_slice() == sealed)
        {
            return None;
        }
        self.drift_watch.replace((sealed.to_vec(), start()))
    }

    /// Counts a change of `object` (of `kind`); how many there were within `window`.
    pub(super) fn count_change(
        &mut self,
        kind: DriftKind,
        object: &str,
        window: Duration,
    ) -> usize {
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

/// Every cluster's memory, by cluster name.
#[derive(Default)]
pub(super) struct Memories(Mutex<HashMap<String, ClusterMemory>>);

impl Memories {
    /// A memory poisoned by a panic elsewhere is still what was last written: used as is.
    fn lock(&self) -> MutexGuard<'_, HashMap<String, ClusterMemory>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` on the memory of `cluster`, made empty when there is none yet.
    pub(super) fn with<R>(&self, cluster: &str, f: impl FnOnce(&mut ClusterMemory) -> R) -> R {
        let mut all = self.lock();
        match all.get_mut(cluster) {
            Some(memory) => f(memory),
            None => f(all.entry(cluster.to_owned()).or_default()),
        }
    }

    /// Runs `f` on the memory of `cluster` if it has one.
    pub(super) fn get<R>(&self, cluster: &str, f: impl FnOnce(&ClusterMemory) -> R) -> Option<R> {
        self.lock().get(cluster).map(f)
    }

    /// Drops everything remembered of `cluster`; its watches stop.
    pub(super) fn forget(&self, cluster: &str) {
        // Dropped after the lock is released: a watch's tasks are aborted as it drops.
        let gone = self.lock().remove(cluster);
        drop(gone);
    }

    /// Drops the memory of every cluster not in `keep` (`None`: of every cluster).
    pub(super) fn keep_only(&self, keep: Option<&BTreeSet<String>>) {
        let gone: Vec<ClusterMemory> = {
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

    #[test]
    fn a_version_not_yet_active_is_pending_within_its_grace_and_forgotten_once_confirmed() {
        let mut memory = ClusterMemory::default();
        let mut unconfirmed = 0;
        let admitted = status_not_enforced("a violating object was admitted");
        assert!(!memory.seen_unconfirmed(&key("1")));
        let status = memory.within_grace(key("1"), admitted.clone(), &mut unconfirmed);
        assert_eq!(status, InstallStatus::Pending);
        assert_eq!(unconfirmed, 1);
        assert!(memory.seen_unconfirmed(&key("1")));
        // Another version of the same policy has a grace of its own.
        assert!(!memory.seen_unconfirmed(&key("2")));
        let status = memory.within_grace(key("1"), InstallStatus::Enforced, &mut unconfirmed);
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
            memory.within_grace(key("1"), error.clone(), &mut unconfirmed),
            error
        );
        assert_eq!(unconfirmed, 0);
    }

    #[test]
    fn changes_are_counted_per_object_within_the_window() {
        let mut memory = ClusterMemory::default();
        let minute = Duration::from_secs(60);
        assert_eq!(memory.count_change(DriftKind::Policy, "a", minute), 1);
        assert_eq!(memory.count_change(DriftKind::Policy, "a", minute), 2);
        assert_eq!(memory.count_change(DriftKind::Policy, "b", minute), 1);
        // Nothing is older than a zero window: the history starts again.
        assert_eq!(
            memory.count_change(DriftKind::Policy, "a", Duration::ZERO),
            1
        );
    }

    #[test]
    fn a_forgotten_cluster_starts_empty_and_others_keep_theirs() {
        let memories = Memories::default();
        for cluster in ["c1", "c2", "c3"] {
            memories.with(cluster, |m| m.attached = vec!["shop".into()]);
        }
        memories.forget("c1");
        assert_eq!(memories.get("c1", |m| m.attached.clone()), None);
        let keep: BTreeSet<String> = ["c2".to_owned()].into();
        memories.keep_only(Some(&keep));
        assert_eq!(
            memories.get("c2", |m| m.attached.clone()),
            Some(vec!["shop".to_owned()])
        );
        assert_eq!(memories.get("c3", |m| m.attached.clone()), None);
        memories.keep_only(None);
        assert_eq!(memories.get("c2", |m| m.attached.clone()), None);
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
