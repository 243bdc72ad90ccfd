//! Staged rollouts moved on by the loop (SPEC 8): at the start of a round, before any part
//! writes, each running rollout with `promote: auto` gets the counters its stage starts from,
//! and once the stage ran its time it is promoted, or paused with the reason, from what its
//! new version denied since (`crate::promotion` decides; `crate::denials` counts). The store
//! takes a move only where the rollout is still as read, so replicas, and a person promoting by
//! hand meanwhile, never move one twice.

use palisade_vap::per_policy::version_object_name;

use super::*;
use crate::promotion::{self, Need};

/// How soon a rollout whose counters could not be read is tried again.
const RETRY_SECONDS: i64 = 10;

impl Controller {
    /// Moves the running rollouts of `boundaries` on (reading the denials in `clusters`, every
    /// cluster of the store, once per cluster for all of them); when the next one is due
    /// (seconds since the epoch).
    pub(super) async fn step_rollouts(
        &self,
        clusters: &[ClusterRecord],
        boundaries: &[BoundaryState],
    ) -> Option<i64> {
        self.show_rollouts(boundaries);
        let now = chrono::Utc::now().timestamp();
        let mut next_due: Option<i64> = None;
        let mut due_at = |at: i64| next_due = Some(next_due.map_or(at, |n| n.min(at)));
        // What each rollout needs, and the version bindings whose counters are read.
        let mut needing = Vec::new();
        for boundary in boundaries {
            for (record, decoded) in &boundary.policies {
                let (Ok(policy), Some(rolling)) = (decoded, boundary.rollouts.get(&record.name))
                else {
                    continue;
                };
                let Some(rollout) = policy.rollout() else {
                    continue;
                };
                match promotion::need(&rolling.stored, rollout, now) {
                    Need::Wait(at) => {
                        if let Some(at) = at {
                            due_at(at);
                        }
                    }
                    need => {
                        let binding =
                            version_object_name(&boundary.name, policy.name(), rolling.version);
                        needing.push((boundary, record, policy, rolling, need, binding));
                    }
                }
            }
        }
        if needing.is_empty() {
            return next_due;
        }
        let read = self.read_denials(clusters, &needing).await;
        for (boundary, record, policy, rolling, need, binding) in needing {
            let Some(rollout) = policy.rollout() else {
                continue;
            };
            let stored = &rolling.stored;
            let counts = match counts_of(&read, clusters, boundary, policy, &binding) {
                Ok(counts) => counts,
                Err(why) => {
                    tracing::warn!(boundary = %boundary.name, policy = %record.name,
                        error = %why, "a rollout's denials could not be read");
                    due_at(now + RETRY_SECONDS);
                    continue;
                }
            };
            let next = match need {
                Need::Baseline => promotion::with_baseline(stored, counts),
                // Due by the whole seconds passed; the next stage starts at the next one.
                _ => promotion::counted(
                    stored,
                    rollout,
                    &counts,
                    palisade_app::rollout::stage_clock(),
                ),
            };
            let event = palisade_app::rollout::event(
                &stored.progress,
                &next.progress,
                rollout.stage_count(),
            );
            let recorded = self
                .records
                .record_rollout(
                    boundary.name.as_str(),
                    &record.name,
                    record.version,
                    record.rollout_json.as_deref(),
                    &next,
                    event.as_deref(),
                )
                .await;
            match recorded {
                Ok(()) => tracing::info!(boundary = %boundary.name, policy = %record.name,
                    version = rolling.version, stage = next.progress.stage + 1,
                    state = next.progress.phase.as_str(), denials = next.denials,
                    "rollout moved on"),
                // Moved meanwhile (a save, a person, another replica): the change starts
                // another round, which reads it again.
                Err(StoreError::PreconditionFailed | StoreError::NotFound) => {}
                Err(error) => {
                    tracing::warn!(boundary = %boundary.name, policy = %record.name,
                        %error, "a rollout's move could not be recorded");
                    due_at(now + RETRY_SECONDS);
                }
            }
        }
        next_due
    }

    /// The counters of the version bindings `needing` reads, by cluster: one read of each
    /// cluster's `/metrics` that holds one of them, or why it could not be read.
    async fn read_denials(
        &self,
        clusters: &[ClusterRecord],
        needing: &[Needing<'_>],
    ) -> BTreeMap<String, Result<BTreeMap<String, u64>, String>> {
        let mut read = BTreeMap::new();
        for cluster in clusters {
            let bindings: Vec<String> = needing
                .iter()
                .filter(|(boundary, _, policy, ..)| holds(cluster, boundary, policy))
                .map(|(.., binding)| binding.clone())
                .collect();
            if bindings.is_empty() {
                continue;
            }
            // The loop's own handle on the cluster: its part may be running.
            let mut cached = self.memory.connection(&cluster.name);
            let connected = pass::connect(&self.app, &mut cached, cluster).await;
            if let (Ok(_), Some(connection)) = (&connected, cached) {
                self.memory.keep_connection(&cluster.name, connection);
            }
            let counted = match connected {
                Ok(connection) => connection
                    .client
                    .denials(&bindings)
                    .await
                    .map(|counts| bindings.iter().cloned().zip(counts).collect())
                    .map_err(|e| format!("cluster '{}': {e}", cluster.name)),
                Err(e) => Err(format!("cluster '{}': {e}", cluster.name)),
            };
            read.insert(cluster.name.clone(), counted);
        }
        read
    }

    /// The rollouts that run or are paused on `/metrics`; those that no longer do at 0.
    fn show_rollouts(&self, boundaries: &[BoundaryState]) {
        let mut now_shown = BTreeSet::new();
        for boundary in boundaries {
            for (policy, rolling) in &boundary.rollouts {
                let progress = &rolling.stored.progress;
                let paused = matches!(progress.phase, palisade_policy::rollout::Phase::Paused(_));
                let shown = (progress.stage + 1, rolling.stored.denials, paused);
                metrics::rollout(boundary.name.as_str(), policy, Some(shown));
                now_shown.insert((boundary.name.to_string(), policy.clone()));
            }
        }
        let Ok(mut shown) = self.rollouts_shown.lock() else {
            return;
        };
        for (boundary, policy) in shown.difference(&now_shown) {
            metrics::rollout(boundary, policy, None);
        }
        *shown = now_shown;
    }
}

/// A rollout that needs its counters: its boundary, policy record and decoded policy, its
/// rollout, what it needs, and its version binding.
type Needing<'a> = (
    &'a BoundaryState,
    &'a palisade_app::reconcile::PolicyRecord,
    &'a Policy,
    &'a palisade_app::reconcile::Rolling,
    Need,
    String,
);

/// Whether `cluster` is one of `boundary`'s and holds `policy`.
fn holds(cluster: &ClusterRecord, boundary: &BoundaryState, policy: &Policy) -> bool {
    boundary.clusters.contains(&cluster.name)
        && Name::parse(&cluster.name).is_ok_and(|n| policy.installs_in(&n))
}

/// The denials each cluster of `boundary` that holds `policy` counted for `binding` (from
/// `read`), by cluster; why not, when one could not be read.
fn counts_of(
    read: &BTreeMap<String, Result<BTreeMap<String, u64>, String>>,
    clusters: &[ClusterRecord],
    boundary: &BoundaryState,
    policy: &Policy,
    binding: &str,
) -> Result<BTreeMap<String, u64>, String> {
    let mut counts = BTreeMap::new();
    for cluster in clusters.iter().filter(|c| holds(c, boundary, policy)) {
        let counted = match read.get(&cluster.name) {
            Some(Ok(counted)) => counted.get(binding).copied().unwrap_or(0),
            Some(Err(why)) => return Err(why.clone()),
            None => return Err(format!("cluster '{}': not read", cluster.name)),
        };
        counts.insert(cluster.name.clone(), counted);
    }
    Ok(counts)
}
