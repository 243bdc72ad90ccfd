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
    /// cluster of the store); when the next one is due (seconds since the epoch).
    pub(super) async fn step_rollouts(
        &self,
        clusters: &[ClusterRecord],
        boundaries: &[BoundaryState],
    ) -> Option<i64> {
        self.show_rollouts(boundaries);
        let now = chrono::Utc::now().timestamp();
        let mut next_due: Option<i64> = None;
        let mut due_at = |at: i64| next_due = Some(next_due.map_or(at, |n| n.min(at)));
        for boundary in boundaries {
            for (record, decoded) in &boundary.policies {
                let (Ok(policy), Some(rolling)) = (decoded, boundary.rollouts.get(&record.name))
                else {
                    continue;
                };
                let Some(rollout) = policy.rollout() else {
                    continue;
                };
                let stored = &rolling.stored;
                let need = promotion::need(stored, rollout, now);
                if let Need::Wait(at) = need {
                    if let Some(at) = at {
                        due_at(at);
                    }
                    continue;
                }
                let binding = version_object_name(&boundary.name, policy.name(), rolling.version);
                let counts = match self.denials_of(clusters, boundary, policy, &binding).await {
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
        }
        next_due
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

    /// The denials each cluster of `boundary` that holds `policy` counted for `binding`, by
    /// cluster; why not, when one cannot be read.
    async fn denials_of(
        &self,
        clusters: &[ClusterRecord],
        boundary: &BoundaryState,
        policy: &Policy,
        binding: &str,
    ) -> Result<BTreeMap<String, u64>, String> {
        let mut counts = BTreeMap::new();
        for cluster in clusters
            .iter()
            .filter(|c| boundary.clusters.contains(&c.name))
        {
            let holds = Name::parse(&cluster.name).is_ok_and(|n| policy.installs_in(&n));
            if !holds {
                continue;
            }
            let connection = self
                .connect(cluster)
                .await
                .map_err(|e| format!("cluster '{}': {e}", cluster.name))?;
            let counted = connection
                .client
                .denials(&[binding.to_owned()])
                .await
                .map_err(|e| format!("cluster '{}': {e}", cluster.name))?;
            counts.insert(cluster.name.clone(), counted.first().copied().unwrap_or(0));
        }
        Ok(counts)
    }
}
