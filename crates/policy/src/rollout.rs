//! Staged rollout (SPEC 8): the stages a policy change goes through, validated, and which
//! namespaces of a cluster a stage reaches. Pure: the reconciler and the preview ask it, the
//! clock and the denial counts stay with them.

use std::collections::BTreeSet;
use std::fmt;

use crate::name::Name;
use crate::policy::Scope;

/// At most this many stages (the implied last one, everywhere, not counted).
pub const MAX_STAGES: usize = 10;
/// The shortest a stage may run before it is promoted automatically.
pub const MIN_STAGE_SECONDS: u64 = 10;
/// The longest `for` of a stage: 90 days (a longer one is a typo, not a plan).
pub const MAX_STAGE_SECONDS: u64 = 90 * 24 * 3600;
/// At most this many clusters or namespaces named in one stage.
pub const MAX_STAGE_NAMES: usize = 256;

/// How a stage moves on to the next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Promote {
    /// When the stage has run `for` and denied at most `maxDenials` requests.
    #[default]
    Auto,
    /// Only when someone promotes it.
    Manual,
}

impl Promote {
    pub fn as_str(self) -> &'static str {
        match self {
            Promote::Auto => "auto",
            Promote::Manual => "manual",
        }
    }
}

/// The namespaces of the boundary a stage reaches in each of its clusters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// Every namespace of the boundary there.
    All,
    /// The first ceil(p × n) of the boundary's n namespaces there, in [`namespace_order`].
    Percent(u8),
    /// These, where the boundary holds them.
    Named(Vec<Name>),
}

/// A stage's `for`, in whole seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StageDuration(u64);

impl StageDuration {
    pub fn seconds(self) -> u64 {
        self.0
    }

    /// Parses `1h`, `30m`, `90s`, `1h30m`, `2d`: whole numbers with the units `d`, `h`, `m`, `s`,
    /// largest first, each at most once.
    pub fn parse(text: &str) -> Result<Self, RolloutError> {
        let invalid = || RolloutError::InvalidDuration(text.to_owned());
        if text.is_empty() {
            return Err(invalid());
        }
        let units = [('d', 86_400u64), ('h', 3_600), ('m', 60), ('s', 1)];
        let mut rest = text;
        let mut next_unit = 0;
        let mut total: u64 = 0;
        while !rest.is_empty() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 || digits > 9 {
                return Err(invalid());
            }
            let value: u64 = rest[..digits].parse().map_err(|_| invalid())?;
            let unit = rest[digits..].chars().next().ok_or_else(invalid)?;
            let position = units[next_unit..]
                .iter()
                .position(|(u, _)| *u == unit)
                .ok_or_else(invalid)?;
            let (_, scale) = units[next_unit + position];
            next_unit += position + 1;
            total = total.saturating_add(value.saturating_mul(scale));
            rest = &rest[digits + unit.len_utf8()..];
        }
        if total < MIN_STAGE_SECONDS {
            return Err(RolloutError::TooShort(text.to_owned()));
        }
        if total > MAX_STAGE_SECONDS {
            return Err(RolloutError::TooLong(text.to_owned()));
        }
        Ok(StageDuration(total))
    }
}

impl fmt::Display for StageDuration {
    /// The shortest form: `1h30m`, `24h`, `10s`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (mut left, mut wrote) = (self.0, false);
        for (unit, scale) in [('h', 3_600u64), ('m', 60), ('s', 1)] {
            let value = left / scale;
            left %= scale;
            if value > 0 {
                write!(f, "{value}{unit}")?;
                wrote = true;
            }
        }
        if !wrote {
            f.write_str("0s")?;
        }
        Ok(())
    }
}

/// One stage: the clusters (`None`: every cluster of the policy's scope) and, in each, the
/// namespaces it reaches, and how long it runs before automatic promotion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stage {
    pub clusters: Option<Vec<Name>>,
    pub namespaces: Namespaces,
    /// `None` only for a last stage that reaches everywhere.
    pub duration: Option<StageDuration>,
}

impl Stage {
    /// Whether the stage reaches every namespace of every cluster of the scope.
    pub fn is_everywhere(&self) -> bool {
        self.clusters.is_none() && self.namespaces == Namespaces::All
    }

    fn reaches_cluster(&self, cluster: &Name) -> bool {
        self.clusters.as_ref().is_none_or(|c| c.contains(cluster))
    }
}

/// Why a rollout is not valid; `stage` and `index` are positions in the document's lists.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    #[error("must list at least one stage; omit rollout to apply changes everywhere at once")]
    NoStages,
    #[error("must have at most {MAX_STAGES} stages, got {0}")]
    TooManyStages(usize),
    #[error(
        "'{0}' is not a duration: use whole numbers with d, h, m or s, largest first, e.g. 1h30m"
    )]
    InvalidDuration(String),
    #[error("must be at least {MIN_STAGE_SECONDS}s, got {0}")]
    TooShort(String),
    #[error("must be at most 90 days, got {0}")]
    TooLong(String),
    #[error("'{0}' is not a percentage from 1% to 100% (a whole number followed by %)")]
    InvalidPercent(String),
    #[error("must not be empty; omit it for {0}")]
    EmptyList(&'static str),
    #[error("must have at most {MAX_STAGE_NAMES} entries, got {0}")]
    TooManyNames(usize),
    #[error("duplicates entry {0}")]
    Duplicate(usize),
    #[error("cluster '{0}' is not in the policy's scope")]
    NotInScope(Name),
    #[error("is missing: every stage but a last one that reaches everywhere runs for a time (e.g. for: 1h)")]
    MissingDuration,
    #[error("reaches everywhere, so no stage may follow it")]
    EverywhereBeforeLast,
}

/// Where in the stages a [`RolloutError`] is: the field of a stage, or the whole list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum At {
    Stages,
    Stage(usize),
    Clusters(usize),
    Cluster(usize, usize),
    Namespaces(usize),
    Namespace(usize, usize),
    For(usize),
}

impl At {
    /// The JSON Pointer below `rollout`: `/stages/1/clusters/0`.
    pub fn pointer(&self) -> String {
        match self {
            At::Stages => "/stages".to_owned(),
            At::Stage(s) => format!("/stages/{s}"),
            At::Clusters(s) => format!("/stages/{s}/clusters"),
            At::Cluster(s, i) => format!("/stages/{s}/clusters/{i}"),
            At::Namespaces(s) => format!("/stages/{s}/namespaces"),
            At::Namespace(s, i) => format!("/stages/{s}/namespaces/{i}"),
            At::For(s) => format!("/stages/{s}/for"),
        }
    }
}

/// A validated rollout: its stages in order, how they are promoted, and how many denials a
/// stage may have and still be promoted automatically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollout {
    stages: Vec<Stage>,
    promote: Promote,
    max_denials: u32,
}

/// The first entry of `names` that an earlier one duplicates, as its index.
fn first_duplicate(names: &[Name]) -> Option<usize> {
    (0..names.len()).find(|&i| names[..i].contains(&names[i]))
}

impl Rollout {
    /// Validates stages against the policy's `scope`: every cluster a stage names must be in
    /// it (for a scope of every cluster, `known` lists the boundary's clusters when the caller
    /// knows them; `None` skips that check, as offline tools must).
    pub fn new(
        stages: Vec<Stage>,
        promote: Promote,
        max_denials: u32,
        scope: &Scope,
        known: Option<&[Name]>,
    ) -> Result<Self, (At, RolloutError)> {
        if stages.is_empty() {
            return Err((At::Stages, RolloutError::NoStages));
        }
        // The implied last stage, everywhere, may be written out and is not counted.
        let counted = stages.len() - usize::from(stages.last().is_some_and(Stage::is_everywhere));
        if counted > MAX_STAGES {
            return Err((At::Stages, RolloutError::TooManyStages(counted)));
        }
        let last = stages.len() - 1;
        for (s, stage) in stages.iter().enumerate() {
            if let Some(clusters) = &stage.clusters {
                check_names(clusters, "every cluster of the policy's scope")
                    .map_err(|(i, e)| (i.map_or(At::Clusters(s), |i| At::Cluster(s, i)), e))?;
                for (i, cluster) in clusters.iter().enumerate() {
                    let in_scope = match scope {
                        Scope::Clusters(listed) => listed.contains(cluster),
                        Scope::AllClusters => known.is_none_or(|k| k.contains(cluster)),
                    };
                    if !in_scope {
                        return Err((At::Cluster(s, i), RolloutError::NotInScope(cluster.clone())));
                    }
                }
            }
            if let Namespaces::Named(names) = &stage.namespaces {
                check_names(names, "every namespace of the boundary")
                    .map_err(|(i, e)| (i.map_or(At::Namespaces(s), |i| At::Namespace(s, i)), e))?;
            }
            if stage.is_everywhere() && s != last {
                return Err((At::Stage(s), RolloutError::EverywhereBeforeLast));
            }
            if stage.duration.is_none() && !(s == last && stage.is_everywhere()) {
                return Err((At::For(s), RolloutError::MissingDuration));
            }
        }
        Ok(Rollout {
            stages,
            promote,
            max_denials,
        })
    }

    /// The stages as written (a last one that reaches everywhere included).
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// The stages a rollout goes through before it is done: those written, and the implied
    /// last one (everywhere) when they do not end with it.
    pub fn stage_count(&self) -> usize {
        if self.stages.last().is_some_and(Stage::is_everywhere) {
            self.stages.len()
        } else {
            self.stages.len() + 1
        }
    }

    pub fn promote(&self) -> Promote {
        self.promote
    }

    pub fn max_denials(&self) -> u32 {
        self.max_denials
    }

    /// The namespaces of `cluster` that stage `stage` (0-based; stages are cumulative, so it
    /// reaches what stages 0..=stage reach) reaches, among the boundary's `namespaces` there.
    /// From the last stage on, every one.
    pub fn reached(
        &self,
        stage: usize,
        boundary: &Name,
        policy: &Name,
        cluster: &Name,
        namespaces: &[Name],
    ) -> Reach {
        if stage + 1 >= self.stage_count() {
            return Reach::All;
        }
        let mut reached: BTreeSet<Name> = BTreeSet::new();
        let mut ordered: Option<Vec<Name>> = None;
        for current in self.stages.iter().take(stage + 1) {
            if !current.reaches_cluster(cluster) {
                continue;
            }
            match &current.namespaces {
                Namespaces::All => return Reach::All,
                Namespaces::Named(names) => {
                    reached.extend(names.iter().filter(|n| namespaces.contains(n)).cloned());
                }
                Namespaces::Percent(p) => {
                    let order = ordered
                        .get_or_insert_with(|| namespace_order(boundary, policy, namespaces));
                    reached.extend(order.iter().take(percent_of(*p, order.len())).cloned());
                }
            }
        }
        Reach::Namespaces(reached)
    }

    /// The namespaces of `cluster` that stage `stage` reached, among the boundary's
    /// `namespaces` there, as a set: all of them where [`Rollout::reached`] is `All`. What the
    /// writes put the version in force in, and what the status counts.
    pub fn namespaces_reached(
        &self,
        stage: usize,
        boundary: &Name,
        policy: &Name,
        cluster: &Name,
        namespaces: &[Name],
    ) -> BTreeSet<Name> {
        match self.reached(stage, boundary, policy, cluster, namespaces) {
            Reach::All => namespaces.iter().cloned().collect(),
            Reach::Namespaces(reached) => reached,
        }
    }
}

impl Rollout {
    /// The first stage (from 0) that reaches `namespace` of `cluster`, among the boundary's
    /// `namespaces` there: where a version rolled out this way meets what runs in it.
    pub fn first_stage_reaching(
        &self,
        boundary: &Name,
        policy: &Name,
        cluster: &Name,
        namespaces: &[Name],
        namespace: &Name,
    ) -> usize {
        (0..self.stage_count())
            .find(
                |&stage| match self.reached(stage, boundary, policy, cluster, namespaces) {
                    Reach::All => true,
                    Reach::Namespaces(reached) => reached.contains(namespace),
                },
            )
            .unwrap_or(self.stage_count() - 1)
    }
}

/// Empty lists, too many names and duplicates, as (index of the entry, error).
fn check_names(names: &[Name], omitted: &'static str) -> Result<(), (Option<usize>, RolloutError)> {
    if names.is_empty() {
        return Err((None, RolloutError::EmptyList(omitted)));
    }
    if names.len() > MAX_STAGE_NAMES {
        return Err((None, RolloutError::TooManyNames(names.len())));
    }
    if let Some(i) = first_duplicate(names) {
        let first = names[..i].iter().position(|n| *n == names[i]).unwrap_or(0);
        return Err((Some(i), RolloutError::Duplicate(first)));
    }
    Ok(())
}

/// What a stage reaches in one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every namespace of the boundary there (also those made later).
    All,
    /// These (maybe none).
    Namespaces(BTreeSet<Name>),
}

/// ceil(p × n / 100): how many of `n` namespaces a percentage `p` reaches.
pub fn percent_of(p: u8, n: usize) -> usize {
    (usize::from(p) * n).div_ceil(100)
}

/// Parses `25%`: a whole percentage from 1 to 100.
pub fn parse_percent(text: &str) -> Result<u8, RolloutError> {
    let invalid = || RolloutError::InvalidPercent(text.to_owned());
    let digits = text.strip_suffix('%').ok_or_else(invalid)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 3 {
        return Err(invalid());
    }
    match digits.parse::<u8>() {
        Ok(p) if (1..=100).contains(&p) => Ok(p),
        _ => Err(invalid()),
    }
}

/// The order in which percentage stages take a boundary's namespaces (SPEC 8): by the hex
/// sha256 of `<boundary>/<policy>/<namespace>`, so each policy spreads its stages differently
/// and no tenant picks its place by its namespace's name.
pub fn namespace_order(boundary: &Name, policy: &Name, namespaces: &[Name]) -> Vec<Name> {
    let mut keyed: Vec<([u8; 32], &Name)> = namespaces
        .iter()
        .map(|ns| {
            let digest = hmac_sha256::Hash::hash(format!("{boundary}/{policy}/{ns}").as_bytes());
            (digest, ns)
        })
        .collect();
    // The bytes of the digest order as its hex text does.
    keyed.sort();
    keyed.dedup_by(|a, b| a.1 == b.1);
    keyed.into_iter().map(|(_, ns)| ns.clone()).collect()
}

/// Where a rollout is (SPEC 8: `running`, `paused`, `done`, `aborted`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Phase {
    Running,
    /// Waits for someone to promote or abort it; the reason is shown.
    Paused(String),
    /// Every stage reached: the version is in force everywhere.
    Done,
    /// The previous version is back everywhere; the version stays in the history, aborted.
    Aborted,
}

impl Phase {
    pub fn as_str(&self) -> &'static str {
        match self {
            Phase::Running => "running",
            Phase::Paused(_) => "paused",
            Phase::Done => "done",
            Phase::Aborted => "aborted",
        }
    }
}

/// How far a rollout has come. Times are seconds since the Unix epoch, given by the caller:
/// the core reads no clock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The version being rolled out.
    pub version: u64,
    /// The last version that had reached everywhere (`None` for a new policy): what applies
    /// where the stage has not reached, and what an abort puts back.
    pub previous_version: Option<u64>,
    pub phase: Phase,
    /// The stage in force, from 0; stages are cumulative.
    pub stage: usize,
    pub started_at: i64,
    pub stage_started_at: i64,
}

/// A request the new version denied in the reached scope: where, and the API server's message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denied {
    pub cluster: String,
    pub namespace: String,
    pub message: String,
}

/// What the new version denied in the reached scope during the stage in force.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StageDenials {
    pub count: u64,
    /// One of them, for the reason a pause gives.
    pub example: Option<Denied>,
}

/// What a rollout does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing until `Some(at)` (an automatic promotion is due then), or until someone
    /// promotes or aborts it (`None`).
    Wait(Option<i64>),
    /// On to the next stage, now.
    Promote,
    /// Stop, and say why.
    Pause(String),
}

/// `paused: 3 requests denied in staging-1/web, e.g. <message>` (SPEC 8).
pub fn pause_reason(denials: &StageDenials) -> String {
    let requests = if denials.count == 1 {
        "1 request".to_owned()
    } else {
        format!("{} requests", denials.count)
    };
    match &denials.example {
        Some(d) => format!(
            "paused: {requests} denied in {}/{}, e.g. {}",
            d.cluster, d.namespace, d.message
        ),
        None => format!("paused: {requests} denied"),
    }
}

impl Progress {
    /// A rollout of `version` over `previous_version` (the last version that reached
    /// everywhere), from its first stage, at `now`. A change saved while another rollout runs
    /// starts this way too, over that rollout's `previous_version` (SPEC 8).
    pub fn start(version: u64, previous_version: Option<u64>, now: i64) -> Self {
        Progress {
            version,
            previous_version,
            phase: Phase::Running,
            stage: 0,
            started_at: now,
            stage_started_at: now,
        }
    }

    /// Whether it still moves (running or paused): what a promote or an abort needs.
    pub fn is_open(&self) -> bool {
        matches!(self.phase, Phase::Running | Phase::Paused(_))
    }

    /// On to the next stage at `now` (by hand or automatically); past the last, done. A paused
    /// rollout runs again.
    pub fn promoted(&self, rollout: &Rollout, now: i64) -> Self {
        let stage = self.stage + 1;
        let phase = if stage + 1 >= rollout.stage_count() {
            Phase::Done
        } else {
            Phase::Running
        };
        Progress {
            phase,
            stage,
            stage_started_at: now,
            ..self.clone()
        }
    }

    pub fn paused(&self, reason: String) -> Self {
        Progress {
            phase: Phase::Paused(reason),
            ..self.clone()
        }
    }

    pub fn aborted(&self) -> Self {
        Progress {
            phase: Phase::Aborted,
            ..self.clone()
        }
    }

    /// When the stage in force is promoted automatically if it denies no more than it may:
    /// only while running, with `promote: auto`.
    pub fn next_promotion_at(&self, rollout: &Rollout) -> Option<i64> {
        if self.phase != Phase::Running || rollout.promote() != Promote::Auto {
            return None;
        }
        let duration = rollout.stages().get(self.stage)?.duration?;
        let seconds = i64::try_from(duration.seconds()).unwrap_or(i64::MAX);
        Some(self.stage_started_at.saturating_add(seconds))
    }

    /// What to do at `now`, given what the stage in force denied so far: wait, promote (the
    /// stage ran `for` and denied at most `maxDenials`), or pause (it denied more).
    pub fn next(&self, rollout: &Rollout, denials: &StageDenials, now: i64) -> Next {
        let Some(due) = self.next_promotion_at(rollout) else {
            return Next::Wait(None);
        };
        if now < due {
            return Next::Wait(Some(due));
        }
        if denials.count <= u64::from(rollout.max_denials()) {
            Next::Promote
        } else {
            Next::Pause(pause_reason(denials))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn name(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn names(texts: &[&str]) -> Vec<Name> {
        texts.iter().map(|t| name(t)).collect()
    }

    fn mk_stage(clusters: Option<&[&str]>, namespaces: Namespaces, seconds: Option<u64>) -> Stage {
        Stage {
            clusters: clusters.map(names),
            namespaces,
            duration: seconds.map(StageDuration),
        }
    }

    fn mk_rollout(stages: Vec<Stage>) -> Rollout {
        Rollout::new(stages, Promote::Auto, 0, &Scope::AllClusters, None).unwrap()
    }

    #[test]
    fn a_namespace_is_met_first_by_the_stage_that_reaches_it() {
        let (b, p, c1, c2) = (name("shop"), name("tags"), name("c1"), name("c2"));
        let rollout = mk_rollout(vec![
            mk_stage(
                Some(&["c1"]),
                Namespaces::Named(names(&["web"])),
                Some(3600),
            ),
            mk_stage(None, Namespaces::Named(names(&["api"])), Some(3600)),
        ]);
        let here = names(&["api", "web", "jobs"]);
        let first = |cluster: &Name, ns: &str| {
            rollout.first_stage_reaching(&b, &p, cluster, &here, &name(ns))
        };
        assert_eq!(first(&c1, "web"), 0);
        assert_eq!(first(&c1, "api"), 1);
        assert_eq!(
            first(&c2, "web"),
            2,
            "c2's web: only the implied last stage"
        );
        assert_eq!(first(&c1, "jobs"), 2);
    }

    #[test]
    fn durations_are_whole_units_largest_first() {
        for (text, seconds) in [
            ("10s", 10),
            ("1m", 60),
            ("1h", 3600),
            ("24h", 86_400),
            ("1h30m", 5400),
            ("2d", 172_800),
            ("1d2h3m4s", 93_784),
            ("90s", 90),
        ] {
            assert_eq!(
                StageDuration::parse(text).map(|d| d.0),
                Ok(seconds),
                "{text}"
            );
        }
        for text in [
            "", "1", "h", "1x", "1m1h", "1h1h", "-1h", "1.5h", "1h ", " 1h", "1H",
        ] {
            assert_eq!(
                StageDuration::parse(text),
                Err(RolloutError::InvalidDuration(text.to_owned())),
                "{text}"
            );
        }
        assert_eq!(
            StageDuration::parse("9s"),
            Err(RolloutError::TooShort("9s".into()))
        );
        assert_eq!(
            StageDuration::parse("91d"),
            Err(RolloutError::TooLong("91d".into()))
        );
        assert_eq!(
            StageDuration::parse("90d").map(|d| d.0),
            Ok(MAX_STAGE_SECONDS)
        );
        assert_eq!(StageDuration(5400).to_string(), "1h30m");
        assert_eq!(StageDuration(86_400).to_string(), "24h");
        assert_eq!(StageDuration(10).to_string(), "10s");
    }

    #[test]
    fn percentages_are_whole_numbers_from_1_to_100() {
        assert_eq!(parse_percent("25%"), Ok(25));
        assert_eq!(parse_percent("1%"), Ok(1));
        assert_eq!(parse_percent("100%"), Ok(100));
        for text in [
            "0%", "101%", "25", "%", "2.5%", "-5%", "1000%", " 5%", "five%",
        ] {
            assert_eq!(
                parse_percent(text),
                Err(RolloutError::InvalidPercent(text.to_owned())),
                "{text}"
            );
        }
        assert_eq!(percent_of(25, 4), 1);
        assert_eq!(percent_of(25, 5), 2);
        assert_eq!(percent_of(1, 1), 1);
        assert_eq!(percent_of(100, 7), 7);
        assert_eq!(percent_of(50, 0), 0);
    }

    /// Each way a rollout can be refused, with where.
    #[test]
    fn invalid_rollouts_name_the_stage_and_field() {
        let hour = Some(3600);
        let scope = Scope::Clusters(names(&["a", "b"]));
        let cases: Vec<(Vec<Stage>, At, RolloutError)> = vec![
            (vec![], At::Stages, RolloutError::NoStages),
            (
                (0..11)
                    .map(|_| mk_stage(Some(&["a"]), Namespaces::All, hour))
                    .collect(),
                At::Stages,
                RolloutError::TooManyStages(11),
            ),
            (
                vec![mk_stage(Some(&["c"]), Namespaces::All, hour)],
                At::Cluster(0, 0),
                RolloutError::NotInScope(name("c")),
            ),
            (
                vec![mk_stage(Some(&[]), Namespaces::All, hour)],
                At::Clusters(0),
                RolloutError::EmptyList("every cluster of the policy's scope"),
            ),
            (
                vec![mk_stage(Some(&["a", "b", "a"]), Namespaces::All, hour)],
                At::Cluster(0, 2),
                RolloutError::Duplicate(0),
            ),
            (
                vec![mk_stage(None, Namespaces::Named(names(&["x", "x"])), hour)],
                At::Namespace(0, 1),
                RolloutError::Duplicate(0),
            ),
            (
                vec![mk_stage(None, Namespaces::Named(vec![]), hour)],
                At::Namespaces(0),
                RolloutError::EmptyList("every namespace of the boundary"),
            ),
            (
                vec![mk_stage(Some(&["a"]), Namespaces::All, None)],
                At::For(0),
                RolloutError::MissingDuration,
            ),
            (
                vec![
                    mk_stage(None, Namespaces::All, hour),
                    mk_stage(Some(&["a"]), Namespaces::All, hour),
                ],
                At::Stage(0),
                RolloutError::EverywhereBeforeLast,
            ),
        ];
        for (stages, at, error) in cases {
            let got = Rollout::new(stages.clone(), Promote::Auto, 0, &scope, None);
            assert_eq!(got, Err((at, error)), "{stages:?}");
        }
        // A scope of every cluster: checked against the clusters the caller knows, if any.
        let stage = vec![mk_stage(Some(&["c"]), Namespaces::All, hour)];
        let known = names(&["a"]);
        assert_eq!(
            Rollout::new(
                stage.clone(),
                Promote::Auto,
                0,
                &Scope::AllClusters,
                Some(&known)
            ),
            Err((At::Cluster(0, 0), RolloutError::NotInScope(name("c"))))
        );
        assert!(Rollout::new(stage, Promote::Auto, 0, &Scope::AllClusters, None).is_ok());
        // Ten stages and a written-out last one everywhere are allowed.
        let mut ten: Vec<Stage> = (0..10)
            .map(|_| mk_stage(Some(&["a"]), Namespaces::All, hour))
            .collect();
        ten.push(mk_stage(None, Namespaces::All, None));
        let rollout = Rollout::new(ten, Promote::Manual, 3, &scope, None).unwrap();
        assert_eq!(rollout.stage_count(), 11);
        assert_eq!(
            (rollout.promote(), rollout.max_denials()),
            (Promote::Manual, 3)
        );
    }

    #[test]
    fn stages_reach_their_clusters_and_namespaces_cumulatively() {
        let (b, p) = (name("shop"), name("trusted"));
        let ns = names(&["a", "b", "c", "d"]);
        let order = namespace_order(&b, &p, &ns);
        let rollout = mk_rollout(vec![
            mk_stage(Some(&["staging"]), Namespaces::All, Some(60)),
            mk_stage(None, Namespaces::Percent(25), Some(60)),
            mk_stage(
                Some(&["prod"]),
                Namespaces::Named(names(&["c", "zz"])),
                Some(60),
            ),
        ]);
        assert_eq!(rollout.stage_count(), 4);
        let (staging, prod) = (name("staging"), name("prod"));
        let set = |list: &[Name]| Reach::Namespaces(list.iter().cloned().collect());
        // Stage 1: staging only, every namespace there.
        assert_eq!(rollout.reached(0, &b, &p, &staging, &ns), Reach::All);
        assert_eq!(rollout.reached(0, &b, &p, &prod, &ns), set(&[]));
        // Stage 2: a quarter of prod's (the first in sha256 order); staging keeps all.
        assert_eq!(rollout.reached(1, &b, &p, &staging, &ns), Reach::All);
        assert_eq!(rollout.reached(1, &b, &p, &prod, &ns), set(&order[..1]));
        // Stage 3: and `c` (a name the boundary does not hold there is no namespace).
        let mut third = vec![order[0].clone(), name("c")];
        third.dedup();
        assert_eq!(rollout.reached(2, &b, &p, &prod, &ns), set(&third));
        // Then everywhere.
        assert_eq!(rollout.reached(3, &b, &p, &prod, &ns), Reach::All);
        assert_eq!(rollout.reached(9, &b, &p, &prod, &ns), Reach::All);
    }

    #[test]
    fn the_order_is_the_hex_sha256_of_boundary_policy_namespace() {
        // The orders Python's hashlib gives for these names (sorted by hexdigest of
        // "shop/<policy>/<namespace>").
        let ns = names(&["web", "api", "jobs"]);
        let (b, p) = (name("shop"), name("trusted"));
        assert_eq!(namespace_order(&b, &p, &ns), names(&["api", "jobs", "web"]));
        assert_eq!(
            namespace_order(&b, &name("other"), &ns),
            names(&["jobs", "api", "web"])
        );
    }

    fn mk_denials(count: u64) -> StageDenials {
        StageDenials {
            count,
            example: (count > 0).then(|| Denied {
                cluster: "staging-1".into(),
                namespace: "web".into(),
                message: "Policy 'trusted' (AllowedRegistries) denied image nginx:1.27: it is not under ghcr.io/acme.".into(),
            }),
        }
    }

    /// Two stages written and the implied last one: staging for 1 h, then a quarter for 24 h.
    fn mk_staged(promote: Promote, max_denials: u32) -> Rollout {
        Rollout::new(
            vec![
                mk_stage(Some(&["staging-1"]), Namespaces::All, Some(3600)),
                mk_stage(None, Namespaces::Percent(25), Some(86_400)),
            ],
            promote,
            max_denials,
            &Scope::AllClusters,
            None,
        )
        .unwrap()
    }

    /// Each decision of a running rollout, at a time and with denials.
    #[test]
    fn a_stage_is_promoted_after_its_time_unless_it_denied_too_much() {
        let auto = mk_staged(Promote::Auto, 0);
        let lenient = mk_staged(Promote::Auto, 2);
        let manual = mk_staged(Promote::Manual, 0);
        let start = Progress::start(4, Some(3), 1000);
        let second = start.promoted(&auto, 5000);
        let paused = start.paused("paused: ...".into());
        let done = second.promoted(&auto, 90_000);
        let cases: Vec<(&str, &Rollout, &Progress, u64, i64, Next)> = vec![
            (
                "before its time",
                &auto,
                &start,
                0,
                4599,
                Next::Wait(Some(4600)),
            ),
            (
                "at its time, nothing denied",
                &auto,
                &start,
                0,
                4600,
                Next::Promote,
            ),
            ("long after", &auto, &start, 0, 99_999, Next::Promote),
            (
                "a denial over maxDenials 0",
                &auto,
                &start,
                1,
                4600,
                Next::Pause(pause_reason(&mk_denials(1))),
            ),
            (
                "denials within maxDenials",
                &lenient,
                &start,
                2,
                4600,
                Next::Promote,
            ),
            (
                "denials over maxDenials",
                &lenient,
                &start,
                3,
                4600,
                Next::Pause(pause_reason(&mk_denials(3))),
            ),
            (
                "a denial before its time waits",
                &auto,
                &start,
                5,
                4000,
                Next::Wait(Some(4600)),
            ),
            (
                "manual never promotes",
                &manual,
                &start,
                0,
                99_999,
                Next::Wait(None),
            ),
            (
                "paused waits for someone",
                &auto,
                &paused,
                0,
                99_999,
                Next::Wait(None),
            ),
            (
                "the second stage runs 24 h",
                &auto,
                &second,
                0,
                91_399,
                Next::Wait(Some(91_400)),
            ),
            ("done", &auto, &done, 0, 999_999, Next::Wait(None)),
        ];
        for (case, rollout, progress, count, now, expected) in cases {
            assert_eq!(
                progress.next(rollout, &mk_denials(count), now),
                expected,
                "{case}"
            );
        }
    }

    #[test]
    fn promotions_run_through_the_stages_to_done() {
        let rollout = mk_staged(Promote::Auto, 0);
        let start = Progress::start(4, Some(3), 1000);
        assert!(start.is_open());
        let second = start.promoted(&rollout, 5000);
        assert_eq!(
            (second.stage, &second.phase, second.stage_started_at),
            (1, &Phase::Running, 5000)
        );
        assert_eq!(second.started_at, 1000);
        // Promoting a paused rollout runs it again.
        let resumed = second.paused("paused: x".into()).promoted(&rollout, 6000);
        assert_eq!((resumed.stage, &resumed.phase), (2, &Phase::Done));
        assert!(!resumed.is_open());
        assert_eq!(resumed.next_promotion_at(&rollout), None);
        let aborted = second.aborted();
        assert_eq!((aborted.phase.as_str(), aborted.stage), ("aborted", 1));
        assert!(!aborted.is_open());
        // A new policy's rollout has no previous version.
        assert_eq!(Progress::start(1, None, 0).previous_version, None);
    }

    #[test]
    fn a_pause_says_how_many_were_denied_where_and_one_message() {
        assert_eq!(
            pause_reason(&mk_denials(3)),
            "paused: 3 requests denied in staging-1/web, e.g. Policy 'trusted' (AllowedRegistries) denied image nginx:1.27: it is not under ghcr.io/acme."
        );
        assert!(pause_reason(&mk_denials(1)).starts_with("paused: 1 request denied in "));
        assert_eq!(
            pause_reason(&StageDenials {
                count: 2,
                example: None
            }),
            "paused: 2 requests denied"
        );
    }

    proptest! {
        /// A percentage reaches exactly ceil(p × n) namespaces, more as p grows, and every
        /// namespace a smaller percentage reaches.
        #[test]
        fn percentages_reach_nested_prefixes(
            count in 0usize..40,
            low in 1u8..=100,
            high in 1u8..=100,
        ) {
            let (low, high) = (low.min(high), low.max(high));
            let (b, p, c) = (name("shop"), name("p"), name("c"));
            let ns: Vec<Name> = (0..count).map(|i| name(&format!("ns-{i}"))).collect();
            let reach = |pct: u8| {
                let rollout = mk_rollout(vec![mk_stage(None, Namespaces::Percent(pct), Some(60))]);
                match rollout.reached(0, &b, &p, &c, &ns) {
                    Reach::All => ns.iter().cloned().collect::<BTreeSet<_>>(),
                    Reach::Namespaces(set) => set,
                }
            };
            let (small, large) = (reach(low), reach(high));
            prop_assert_eq!(small.len(), percent_of(low, count));
            prop_assert_eq!(large.len(), percent_of(high, count));
            prop_assert!(small.is_subset(&large));
        }
    }
}
