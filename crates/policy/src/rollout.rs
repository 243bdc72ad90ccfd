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
