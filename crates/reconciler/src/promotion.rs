//! Automatic promotion of a staged rollout (SPEC 8), decided without a cluster: what a running
//! rollout needs now (the counters its stage starts from, or, once it ran `for`, the counters
//! again), and what the counts make of it (the next stage, or a pause that says why). The
//! counting itself is `crate::denials`; the reads and the writes are the controller's.

use std::collections::BTreeMap;

use palisade_app::rollout::{Baseline, StoredRollout};
use palisade_policy::rollout::{Next, Phase, Promote, Rollout, StageDenials};

use crate::denials::since;

/// What a rollout needs from its clusters now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    /// Nothing until `Some(at)` (seconds since the epoch), or ever (`None`: manual, paused or
    /// ended).
    Wait(Option<i64>),
    /// The counters of its new version's binding, to start the stage from.
    Baseline,
    /// The counters again: the stage ran its time.
    Count,
}

/// What `stored` (of a policy whose `spec.rollout` is `rollout`) needs at `now`.
pub fn need(stored: &StoredRollout, rollout: &Rollout, now: i64) -> Need {
    let progress = &stored.progress;
    if progress.phase != Phase::Running || rollout.promote() != Promote::Auto {
        return Need::Wait(None);
    }
    if stored
        .baseline
        .as_ref()
        .is_none_or(|b| b.stage != progress.stage)
    {
        return Need::Baseline;
    }
    match progress.next_promotion_at(rollout) {
        Some(due) if now < due => Need::Wait(Some(due)),
        Some(_) => Need::Count,
        None => Need::Wait(None),
    }
}

/// `stored` with the counters its stage starts from.
pub fn with_baseline(stored: &StoredRollout, counts: BTreeMap<String, u64>) -> StoredRollout {
    StoredRollout {
        baseline: Some(Baseline {
            stage: stored.progress.stage,
            counts,
        }),
        ..stored.clone()
    }
}

/// What the counters read at `now` (by cluster) make of a stage that ran its time: the next
/// stage when its denials are at most `maxDenials`, else paused with the reason.
pub fn counted(
    stored: &StoredRollout,
    rollout: &Rollout,
    counts: &BTreeMap<String, u64>,
    now: i64,
) -> StoredRollout {
    let base = stored.baseline.as_ref();
    let count: u64 = counts
        .iter()
        .map(|(cluster, now)| since(base.and_then(|b| b.counts.get(cluster).copied()), *now))
        .sum();
    let denials = StageDenials {
        count,
        example: None,
    };
    match stored.progress.next(rollout, &denials, now) {
        Next::Promote => StoredRollout {
            progress: stored.progress.promoted(rollout, now),
            denials: 0,
            baseline: None,
            ..stored.clone()
        },
        Next::Pause(reason) => StoredRollout {
            progress: stored.progress.paused(reason),
            denials: count,
            ..stored.clone()
        },
        Next::Wait(_) => StoredRollout {
            denials: count,
            ..stored.clone()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_policy::rollout::{Namespaces, Progress, Stage, StageDuration};
    use palisade_policy::Scope;

    fn mk_rollout(promote: Promote, max_denials: u32) -> Rollout {
        let stage = |percent| Stage {
            clusters: None,
            namespaces: Namespaces::Percent(percent),
            duration: StageDuration::parse("10s").ok(),
        };
        Rollout::new(
            vec![stage(25), stage(50)],
            promote,
            max_denials,
            &Scope::AllClusters,
            None,
        )
        .expect("a rollout")
    }

    fn mk_stored(
        phase: Phase,
        stage: usize,
        baseline: Option<(usize, &[(&str, u64)])>,
    ) -> StoredRollout {
        StoredRollout {
            progress: Progress {
                phase,
                stage,
                ..Progress::start(2, Some(1), 100)
            },
            previous_spec: None,
            denials: 0,
            baseline: baseline.map(|(stage, counts)| Baseline {
                stage,
                counts: counts.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect(),
            }),
        }
    }

    fn counts(of: &[(&str, u64)]) -> BTreeMap<String, u64> {
        of.iter().map(|(c, n)| ((*c).to_owned(), *n)).collect()
    }

    #[test]
    fn what_a_rollout_needs() {
        let auto = mk_rollout(Promote::Auto, 0);
        let base: &[(&str, u64)] = &[("c1", 0)];
        let cases = [
            (
                "manual waits for someone",
                mk_stored(Phase::Running, 0, Some((0, base))),
                mk_rollout(Promote::Manual, 0),
                200,
                Need::Wait(None),
            ),
            (
                "paused waits for someone",
                mk_stored(Phase::Paused("p".into()), 0, Some((0, base))),
                auto.clone(),
                200,
                Need::Wait(None),
            ),
            (
                "done needs nothing",
                mk_stored(Phase::Done, 2, None),
                auto.clone(),
                200,
                Need::Wait(None),
            ),
            (
                "a stage starts from its counters",
                mk_stored(Phase::Running, 0, None),
                auto.clone(),
                100,
                Need::Baseline,
            ),
            (
                "an earlier stage's counters are not this one's",
                mk_stored(Phase::Running, 1, Some((0, base))),
                auto.clone(),
                100,
                Need::Baseline,
            ),
            (
                "before `for`, it waits",
                mk_stored(Phase::Running, 0, Some((0, base))),
                auto.clone(),
                109,
                Need::Wait(Some(110)),
            ),
            (
                "at `for`, it counts",
                mk_stored(Phase::Running, 0, Some((0, base))),
                auto.clone(),
                110,
                Need::Count,
            ),
        ];
        for (case, stored, rollout, now, expected) in cases {
            assert_eq!(need(&stored, &rollout, now), expected, "{case}");
        }
    }

    #[test]
    fn the_counts_promote_or_pause() {
        let base: &[(&str, u64)] = &[("c1", 5), ("c2", 0)];
        let stored = mk_stored(Phase::Running, 0, Some((0, base)));
        // c1 denied 1 since the stage started, c2 restarted (below its baseline: counts from 0).
        let promoted = counted(
            &stored,
            &mk_rollout(Promote::Auto, 1),
            &counts(&[("c1", 6)]),
            110,
        );
        assert_eq!(
            (promoted.progress.stage, promoted.progress.phase.clone()),
            (1, Phase::Running)
        );
        assert_eq!((promoted.denials, promoted.baseline.clone()), (0, None));
        assert_eq!(promoted.progress.stage_started_at, 110);

        let paused = counted(
            &stored,
            &mk_rollout(Promote::Auto, 0),
            &counts(&[("c1", 6)]),
            110,
        );
        assert_eq!(
            paused.progress.phase,
            Phase::Paused("paused: 1 request denied".to_owned())
        );
        assert_eq!((paused.progress.stage, paused.denials), (0, 1));

        let restarted = counted(
            &mk_stored(Phase::Running, 0, Some((0, &[("c1", 9)]))),
            &mk_rollout(Promote::Auto, 2),
            &counts(&[("c1", 3)]),
            110,
        );
        assert_eq!(
            restarted.progress.phase,
            Phase::Paused("paused: 3 requests denied".to_owned())
        );

        // The last written stage promoted: on to the implied last one, everywhere, and done.
        let last = mk_stored(Phase::Running, 1, Some((1, &[("c1", 0)])));
        let done = counted(
            &last,
            &mk_rollout(Promote::Auto, 0),
            &counts(&[("c1", 0)]),
            200,
        );
        assert_eq!((done.progress.stage, done.progress.phase), (2, Phase::Done));
    }
}
