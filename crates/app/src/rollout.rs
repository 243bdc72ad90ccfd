//! A policy's staged rollout as palisade keeps it (SPEC 8): the progress of the rollout of its
//! current version (`palisade_policy::rollout::Progress`), and the spec of the version in force
//! before it, in the row's `rollout_json`. The store keeps the text; this module is its one
//! codec, and decides what a save does to a rollout.

use palisade_api_types::view::RolloutView;
use palisade_policy::rollout::{Phase, Progress, Rollout};
use palisade_policy::Policy;
use palisade_store::{PolicyRecord, RolloutMove, StoreError};
use serde::{Deserialize, Serialize};

use crate::caller::Access;
use crate::error::{AppError, AppResult};
use crate::App;

/// A rollout as stored: its progress and the spec of the version it rolls out over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRollout {
    pub progress: Progress,
    /// The spec (JSON text, as stored) of `progress.previous_version`: what applies where the
    /// stage has not reached, and what an abort puts back. `None` for a new policy.
    pub previous_spec: Option<String>,
    /// What the new version denied in the reached scope during the stage in force, as last
    /// counted.
    pub denials: u64,
    /// What each cluster's API server had counted for the new version's binding when the stage
    /// in force started (automatic promotion counts the stage's denials from there).
    pub baseline: Option<Baseline>,
}

/// Counters read at the start of a stage: by cluster, the denials the API server had counted
/// for the new version's binding.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// The stage (from 0) they were read for.
    pub stage: usize,
    pub counts: std::collections::BTreeMap<String, u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Row {
    version: u64,
    previous_version: Option<u64>,
    previous_spec: Option<String>,
    phase: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    stage: usize,
    started_at: i64,
    stage_started_at: i64,
    #[serde(default)]
    denials: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    baseline: Option<Baseline>,
}

impl StoredRollout {
    /// The row's text.
    pub fn encode(&self) -> String {
        let p = &self.progress;
        let reason = match &p.phase {
            Phase::Paused(reason) => Some(reason.clone()),
            _ => None,
        };
        let row = Row {
            version: p.version,
            previous_version: p.previous_version,
            previous_spec: self.previous_spec.clone(),
            phase: p.phase.as_str().to_owned(),
            reason,
            stage: p.stage,
            started_at: p.started_at,
            stage_started_at: p.stage_started_at,
            denials: self.denials,
            baseline: self.baseline.clone(),
        };
        // A struct of strings and numbers always encodes.
        serde_json::to_string(&row).unwrap_or_default()
    }

    /// Reads a row's text; why not, when it cannot be read.
    pub fn decode(text: &str) -> Result<Self, String> {
        let row: Row =
            serde_json::from_str(text).map_err(|e| format!("unreadable rollout: {e}"))?;
        let phase = match (row.phase.as_str(), row.reason) {
            ("running", _) => Phase::Running,
            ("paused", reason) => Phase::Paused(reason.unwrap_or_default()),
            ("done", _) => Phase::Done,
            ("aborted", _) => Phase::Aborted,
            (other, _) => return Err(format!("unreadable rollout: unknown phase '{other}'")),
        };
        Ok(StoredRollout {
            progress: Progress {
                version: row.version,
                previous_version: row.previous_version,
                phase,
                stage: row.stage,
                started_at: row.started_at,
                stage_started_at: row.stage_started_at,
            },
            previous_spec: row.previous_spec,
            denials: row.denials,
            baseline: row.baseline,
        })
    }

    /// The rollout of `record`, if it has one that can be read.
    pub fn of(record: &PolicyRecord) -> Option<Self> {
        Self::decode(record.rollout_json.as_deref()?).ok()
    }
}

/// What a save makes of the rollout (SPEC 8), given the policy as stored before (`before`,
/// with its spec decoded by `decode`), the saved policy `new` and the version `version` the
/// save makes, at `now`:
/// - no `spec.rollout`: none (the change applies everywhere at once);
/// - the admission rules, mode and scope of the version in force everywhere unchanged: none
///   (nothing changes in the clusters; a change of `allowedComputePlans` applies at once);
/// - a rollout running or paused whose version judges as the saved one does: it goes on, now
///   for the saved version;
/// - otherwise a new rollout from its first stage, over the last version that had reached
///   everywhere.
pub fn decide(
    before: Option<&PolicyRecord>,
    decode: &dyn Fn(&str) -> Option<Policy>,
    new: &Policy,
    version: u64,
    now: i64,
) -> Option<StoredRollout> {
    new.rollout()?;
    let Some(before) = before else {
        return Some(StoredRollout {
            progress: Progress::start(version, None, now),
            previous_spec: None,
            denials: 0,
            baseline: None,
        });
    };
    let stored = StoredRollout::of(before);
    // The version in force everywhere: the one a rollout runs over, or the stored one.
    let (everywhere_version, everywhere_spec) = match &stored {
        Some(s) if s.progress.phase != Phase::Done => {
            (s.progress.previous_version, s.previous_spec.clone())
        }
        _ => (
            u64::try_from(before.version).ok(),
            Some(before.spec_json.clone()),
        ),
    };
    let everywhere = everywhere_spec.as_deref().and_then(decode);
    if everywhere.as_ref().is_some_and(|p| p.judges_as(new)) {
        return None;
    }
    if let Some(s) = &stored {
        let rolling = decode(&before.spec_json);
        if s.progress.is_open() && rolling.is_some_and(|p| p.judges_as(new)) {
            return Some(StoredRollout {
                progress: Progress {
                    version,
                    ..s.progress.clone()
                },
                previous_spec: s.previous_spec.clone(),
                denials: s.denials,
                baseline: s.baseline.clone(),
            });
        }
    }
    Some(StoredRollout {
        progress: Progress::start(version, everywhere_version, now),
        previous_spec: everywhere_spec,
        denials: 0,
        baseline: None,
    })
}

/// Which version of `policy` (being rolled out, `stored`) is in force where in `cluster`,
/// given the boundary's `namespaces` (of every cluster): `v4 in 2 of 5 namespaces; v3
/// elsewhere` (a new policy: `audit elsewhere`); `None` when the cluster is not the policy's.
pub fn in_force(
    stored: &StoredRollout,
    policy: &Policy,
    boundary: &str,
    cluster: &str,
    namespaces: &[palisade_store::NamespaceRecord],
) -> Option<String> {
    let rollout = policy.rollout()?;
    let boundary = palisade_policy::Name::parse(boundary).ok()?;
    let cluster_name = palisade_policy::Name::parse(cluster).ok()?;
    let here: Vec<palisade_policy::Name> = namespaces
        .iter()
        .filter(|n| n.cluster == cluster && n.gone_at.is_none())
        .filter_map(|n| palisade_policy::Name::parse(&n.name).ok())
        .collect();
    let p = &stored.progress;
    let reached = rollout
        .namespaces_reached(p.stage, &boundary, policy.name(), &cluster_name, &here)
        .len();
    let elsewhere = match p.previous_version {
        Some(previous) => format!("v{previous} elsewhere"),
        None => "audit elsewhere".to_owned(),
    };
    let total = here.len();
    Some(if reached == total {
        format!("v{} in {reached} of {total} namespaces", p.version)
    } else {
        format!(
            "v{} in {reached} of {total} namespaces; {elsewhere}",
            p.version
        )
    })
}

/// The time a stage starting now starts at: whole seconds (as stored and shown), rounded up,
/// so that a stage due `for` after its start is never promoted sooner than `for` after the
/// moment it began (SPEC 8).
pub fn stage_clock() -> i64 {
    let now = chrono::Utc::now();
    now.timestamp() + i64::from(now.timestamp_subsec_nanos() > 0)
}

/// A move of a rollout as the policy's history says it (SPEC 8: each promotion, pause and
/// abort), from its progress `before` and `after` the move, of `stages` stages; `None` when
/// it did not move (its counters were read).
pub fn event(before: &Progress, after: &Progress, stages: usize) -> Option<String> {
    let version = after.version;
    match &after.phase {
        Phase::Aborted if before.phase != Phase::Aborted => {
            Some(match after.previous_version {
                Some(previous) => {
                    format!("rollout of version {version} aborted: version {previous} in force everywhere")
                }
                None => format!("rollout of version {version} aborted: nothing in force"),
            })
        }
        Phase::Done if before.phase != Phase::Done => Some(format!(
            "rollout of version {version} done: in force everywhere"
        )),
        Phase::Paused(reason) if !matches!(before.phase, Phase::Paused(_)) => {
            Some(format!("rollout of version {version} {reason}"))
        }
        Phase::Running if after.stage != before.stage => Some(format!(
            "rollout of version {version} promoted to stage {}/{stages}",
            after.stage + 1
        )),
        _ => None,
    }
}

/// RFC 3339, to the second, of seconds since the Unix epoch.
fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// The rollout as the API shows it; `rollout` is the policy's `spec.rollout` (its stages),
/// when it can be decoded.
pub fn view(stored: &StoredRollout, rollout: Option<&Rollout>) -> RolloutView {
    let p = &stored.progress;
    let as_u64 = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    RolloutView {
        version: p.version,
        previous_version: p.previous_version,
        state: p.phase.as_str().to_owned(),
        stage: as_u64(p.stage.saturating_add(1)),
        stages: rollout.map_or(0, |r| as_u64(r.stage_count())),
        started_at: rfc3339(p.started_at),
        stage_started_at: rfc3339(p.stage_started_at),
        denials: stored.denials,
        next_promotion_at: rollout.and_then(|r| p.next_promotion_at(r)).map(rfc3339),
        reason: match &p.phase {
            Phase::Paused(reason) => Some(reason.clone()),
            _ => None,
        },
    }
}

/// What someone does to a running rollout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Promote,
    Abort,
}

impl App {
    /// The rollout of policy `name` as the API shows it, if it has one.
    pub(crate) fn rollout_of(&self, record: &PolicyRecord) -> Option<RolloutView> {
        let stored = StoredRollout::of(record)?;
        let policy = self
            .policy_cache()
            .decode_or_why(record, &self.catalog)
            .ok();
        Some(view(&stored, policy.as_ref().and_then(Policy::rollout)))
    }

    /// Promotes the running or paused rollout of policy `name` to its next stage, or aborts it
    /// (SPEC 8; boundary-admin or admin): 409 when none runs. Answers the rollout.
    pub async fn step_rollout(
        &self,
        access: &Access,
        name: &str,
        step: Step,
    ) -> AppResult<RolloutView> {
        access.caller().require_boundary_admin()?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let boundary = access.boundary();
        let record = self.stored_policy(access, name).await?;
        let not_running = || {
            AppError::Conflict(format!(
                "policy '{name}' of boundary '{boundary}' has no rollout running"
            ))
        };
        let stored = StoredRollout::of(&record).ok_or_else(not_running)?;
        if !stored.progress.is_open() {
            return Err(not_running());
        }
        let policy = self.policy_cache().decode(&record, &self.catalog)?;
        let rollout = policy.rollout().ok_or_else(not_running)?;
        let now = stage_clock();
        let progress = match step {
            Step::Promote => stored.progress.promoted(rollout, now),
            Step::Abort => stored.progress.aborted(),
        };
        let next = StoredRollout {
            progress,
            denials: 0,
            baseline: None,
            ..stored
        };
        let written = self
            .store
            .set_policy_rollout(
                boundary,
                name,
                RolloutMove {
                    version: record.version,
                    expected: record.rollout_json.as_deref(),
                    rollout_json: Some(&next.encode()),
                    event: event(&stored.progress, &next.progress, rollout.stage_count())
                        .as_deref(),
                    actor: &access.caller().actor(),
                },
            )
            .await
            .map_err(|e| match e {
                StoreError::PreconditionFailed => AppError::Conflict(format!(
                    "policy '{name}' of boundary '{boundary}' changed meanwhile: read it again"
                )),
                other => AppError::from_store(other, "policy"),
            })?;
        let actor = access.caller().actor();
        tracing::info!(%boundary, policy = %name, version = written.version,
            step = ?step, state = next.progress.phase.as_str(), %actor, "rollout moved");
        Ok(view(&next, Some(rollout)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_policy::rollout::{Namespaces, Promote, Rollout, Stage, StageDuration};
    use palisade_policy::{Mode, Name, Rule, Scope};

    fn name(text: &str) -> Name {
        Name::parse(text).expect("a name")
    }

    /// `tags`: no `latest` tag in `mode`, with a one-stage manual rollout when `staged`.
    fn mk_policy(mode: Mode, staged: bool) -> Policy {
        let policy = Policy::new(
            name("tags"),
            mode,
            Scope::AllClusters,
            vec![Rule::DisallowLatestTag],
        )
        .expect("a policy");
        if !staged {
            return policy;
        }
        let stage = Stage {
            clusters: None,
            namespaces: Namespaces::Percent(50),
            duration: StageDuration::parse("1h").ok(),
        };
        let rollout = Rollout::new(vec![stage], Promote::Manual, 0, &Scope::AllClusters, None)
            .expect("a rollout");
        policy.with_rollout(rollout)
    }

    /// Specs are their mode's name here: the decoder makes the policy back.
    fn decode(spec: &str) -> Option<Policy> {
        match spec {
            "enforce" => Some(mk_policy(Mode::Enforce, true)),
            "audit" => Some(mk_policy(Mode::Audit, true)),
            _ => None,
        }
    }

    fn mk_record(spec: &str, version: i64, rollout: Option<&StoredRollout>) -> PolicyRecord {
        PolicyRecord {
            boundary: "shop".to_owned(),
            name: "tags".to_owned(),
            spec_json: spec.to_owned(),
            metadata_json: "{}".to_owned(),
            etag: "e".to_owned(),
            created_at: String::new(),
            updated_at: String::new(),
            updated_by: String::new(),
            version,
            rollout_json: rollout.map(StoredRollout::encode),
        }
    }

    fn rolling(version: u64, previous: Option<(u64, &str)>, phase: Phase) -> StoredRollout {
        StoredRollout {
            progress: Progress {
                phase,
                stage: 1,
                ..Progress::start(version, previous.map(|p| p.0), 100)
            },
            previous_spec: previous.map(|p| p.1.to_owned()),
            denials: 2,
            baseline: Some(Baseline {
                stage: 1,
                counts: [("c1".to_owned(), 3)].into(),
            }),
        }
    }

    #[test]
    fn the_row_reads_back_as_written() {
        for phase in [
            Phase::Running,
            Phase::Paused("paused: 1 request denied".to_owned()),
            Phase::Done,
            Phase::Aborted,
        ] {
            let stored = rolling(4, Some((3, "{\"rules\":[]}")), phase);
            assert_eq!(StoredRollout::decode(&stored.encode()), Ok(stored));
        }
        assert_eq!(
            StoredRollout::decode("{}").map(|_| ()),
            Err("unreadable rollout: missing field `version` at line 1 column 2".to_owned())
        );
    }

    #[test]
    fn each_move_is_said_once_in_the_history() {
        let start = Progress::start(4, Some(3), 100);
        let promoted = Progress {
            stage: 1,
            ..start.clone()
        };
        let paused = promoted.paused("paused: 2 requests denied".to_owned());
        let cases = [
            (
                &start,
                promoted.clone(),
                Some("rollout of version 4 promoted to stage 2/3"),
            ),
            (
                &promoted,
                paused.clone(),
                Some("rollout of version 4 paused: 2 requests denied"),
            ),
            (&paused, paused.clone(), None),
            (
                &start,
                start.aborted(),
                Some("rollout of version 4 aborted: version 3 in force everywhere"),
            ),
            (
                &promoted,
                Progress {
                    stage: 2,
                    phase: Phase::Done,
                    ..promoted.clone()
                },
                Some("rollout of version 4 done: in force everywhere"),
            ),
            (&start, start.clone(), None),
        ];
        for (before, after, expected) in cases {
            assert_eq!(event(before, &after, 3).as_deref(), expected, "{after:?}");
        }
    }

    #[test]
    fn which_version_is_in_force_where() {
        let ns = |cluster: &str, name: &str| palisade_store::NamespaceRecord {
            cluster: cluster.to_owned(),
            name: name.to_owned(),
            boundary: "shop".to_owned(),
            created_at: String::new(),
            uid: None,
            gone_at: None,
        };
        let namespaces = [ns("c1", "a"), ns("c1", "b"), ns("c2", "c")];
        // 50% of c1's two namespaces is one; c2's one namespace is reached whole.
        let policy = mk_policy(Mode::Enforce, true);
        let running = rolling(4, Some((3, "audit")), Phase::Running);
        let at_first = StoredRollout {
            progress: Progress {
                stage: 0,
                ..running.progress.clone()
            },
            ..running.clone()
        };
        let shown = |stored: &StoredRollout, cluster: &str| {
            in_force(stored, &policy, "shop", cluster, &namespaces)
        };
        assert_eq!(
            shown(&at_first, "c1").as_deref(),
            Some("v4 in 1 of 2 namespaces; v3 elsewhere")
        );
        assert_eq!(
            shown(&at_first, "c2").as_deref(),
            Some("v4 in 1 of 1 namespaces")
        );
        assert_eq!(
            shown(&running, "c1").as_deref(),
            Some("v4 in 2 of 2 namespaces")
        );
        let new_policy = rolling(1, None, Phase::Running);
        let new_policy = StoredRollout {
            progress: Progress {
                stage: 0,
                ..new_policy.progress
            },
            ..new_policy
        };
        assert_eq!(
            shown(&new_policy, "c1").as_deref(),
            Some("v1 in 1 of 2 namespaces; audit elsewhere")
        );
    }

    #[test]
    fn what_a_save_does_to_a_rollout() {
        let enforce = mk_policy(Mode::Enforce, true);
        let open = rolling(3, Some((2, "audit")), Phase::Running);
        let done = rolling(3, Some((2, "audit")), Phase::Done);
        let aborted = rolling(3, Some((2, "audit")), Phase::Aborted);
        // (what is stored before, the saved policy, the rollout: its version, the version
        // it runs over, its stage, when it started)
        type Case<'a> = (
            &'a str,
            Option<PolicyRecord>,
            Policy,
            Option<(u64, Option<u64>, usize, i64)>,
        );
        let cases: Vec<Case> = vec![
            (
                "no rollout in the spec",
                Some(mk_record("audit", 2, None)),
                mk_policy(Mode::Enforce, false),
                None,
            ),
            (
                "a new policy starts over nothing",
                None,
                enforce.clone(),
                Some((5, None, 0, 500)),
            ),
            (
                "a change starts over the stored version",
                Some(mk_record("audit", 4, None)),
                enforce.clone(),
                Some((5, Some(4), 0, 500)),
            ),
            (
                "nothing the clusters judge changed",
                Some(mk_record("enforce", 4, None)),
                enforce.clone(),
                None,
            ),
            (
                "a change during a rollout, judged alike, goes on",
                Some(mk_record("enforce", 3, Some(&open))),
                enforce.clone(),
                Some((5, Some(2), 1, 100)),
            ),
            (
                "a change back to what is in force everywhere ends it",
                Some(mk_record("enforce", 3, Some(&open))),
                mk_policy(Mode::Audit, true),
                None,
            ),
            (
                "after a rollout is done, its version is in force everywhere",
                Some(mk_record("enforce", 3, Some(&done))),
                mk_policy(Mode::Audit, true),
                Some((5, Some(3), 0, 500)),
            ),
            (
                "after an abort, the version it ran over is in force everywhere",
                Some(mk_record("enforce", 3, Some(&aborted))),
                enforce.clone(),
                Some((5, Some(2), 0, 500)),
            ),
        ];
        for (case, before, new, expected) in cases {
            let decided = decide(before.as_ref(), &decode, &new, 5, 500).map(|s| {
                let p = s.progress;
                (p.version, p.previous_version, p.stage, p.started_at)
            });
            assert_eq!(decided, expected, "{case}");
        }
    }
}
