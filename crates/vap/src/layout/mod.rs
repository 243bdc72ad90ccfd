//! How a boundary's policies become admission objects in a cluster (SPEC 3.4). Three layouts,
//! one module each, render the same validations (so the text after `denied request: ` is the
//! same in every layout); they differ in how many objects the API server matches every request
//! against, and in what a policy change rewrites:
//!
//! - [`per_policy`]: one policy object and one binding per policy and boundary;
//! - [`per_boundary`]: one of each per boundary and mode, at most 5 policies per object;
//! - [`shared`]: one policy and two bindings per installation, each policy's rules in parameter
//!   objects in its boundary's namespaces.
//!
//! [`choose`] is the `auto` choice between them, from the cluster's Kubernetes version, its
//! number of boundaries and how often its policies change: pure, with its figures from
//! docs/benchmarks.md.

pub mod per_boundary;
pub mod per_policy;
pub mod shared;

/// A policy whose change is being rolled out (SPEC 8), in a cluster where its stage has
/// reached the namespaces `reached` of its boundary (some, not all: once all are reached the
/// new version is rendered as any policy is).
#[derive(Clone, Copy, Debug)]
pub struct Rolling<'a> {
    /// The version being rolled out.
    pub current: &'a palisade_policy::Policy,
    pub version: u64,
    pub reached: &'a std::collections::BTreeSet<palisade_policy::Name>,
    /// Of `reached`, the namespaces the version before has left (make before break).
    pub left: &'a std::collections::BTreeSet<palisade_policy::Name>,
}

use std::fmt;
use std::time::Duration;

/// A layout palisade writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layout {
    /// One `ValidatingAdmissionPolicy` and one binding per policy and boundary; the names of
    /// SPEC 3.4, and what a cluster whose layout palisade never recorded is taken to hold (the
    /// default before `auto`).
    #[default]
    PerPolicy,
    /// One policy object and one binding per boundary and mode, holding at most 5 policies.
    PerBoundary,
    /// One policy and two bindings per installation; each policy's rules in a parameter
    /// object in each namespace of its boundary.
    Shared,
}

impl Layout {
    pub const ALL: [Layout; 3] = [Layout::PerPolicy, Layout::PerBoundary, Layout::Shared];

    pub fn as_str(self) -> &'static str {
        match self {
            Layout::PerPolicy => "per-policy",
            Layout::PerBoundary => "per-boundary",
            Layout::Shared => "shared",
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Layout {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Layout::ALL
            .into_iter()
            .find(|layout| layout.as_str() == text)
            .ok_or_else(|| {
                format!(
                    "unknown admission layout '{text}': expected auto, per-policy, per-boundary or shared"
                )
            })
    }
}

/// `serve --admission-layout`: one layout for every cluster, or `auto` (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LayoutChoice {
    /// Per cluster, the layout [`choose`] picks.
    #[default]
    Auto,
    Fixed(Layout),
}

impl LayoutChoice {
    pub fn as_str(self) -> &'static str {
        match self {
            LayoutChoice::Auto => "auto",
            LayoutChoice::Fixed(layout) => layout.as_str(),
        }
    }
}

impl std::str::FromStr for LayoutChoice {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text == "auto" {
            return Ok(LayoutChoice::Auto);
        }
        text.parse().map(LayoutChoice::Fixed)
    }
}

/// The first minor version with the fix of kubernetes #135757 (a concurrent map access that
/// crashes the API server when a policy object is recompiled while requests are evaluated;
/// fixed by kubernetes PR #135759 in 1.36.0, not backported).
pub const FIXED_CHURN_CRASH_MINOR: u32 = 36;

/// Where `auto` moves a cluster between the per-boundary and the shared layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    /// From this many boundaries on, `shared` (Kubernetes 1.36 and later).
    pub shared_from: usize,
    /// Back to `per-boundary` below this many (a band, so a cluster near the crossing does not
    /// switch back and forth).
    pub per_boundary_below: usize,
    /// The same two on Kubernetes older than 1.36.
    pub shared_from_before_fix: usize,
    pub per_boundary_below_before_fix: usize,
    /// On Kubernetes older than 1.36: `shared` once the cluster's policies changed this often
    /// within the last hour...
    pub churn_changes_per_hour: usize,
    /// ...until they have not changed for this long.
    pub churn_quiet: Duration,
}

impl Default for Thresholds {
    /// From docs/benchmarks.md ("The per-boundary layout", "The shared layout"): the validating
    /// step per create of the per-boundary layout grows by about 4.4 µs (1.37) and 5.1 µs (1.30)
    /// per boundary, the shared layout's is flat (about 1.1 ms on 1.37, 3.1 ms on 1.30); they
    /// cross at about 200 boundaries on 1.37 and 500 on 1.30. The per-policy layout is never the
    /// cheapest (1 boundary: 0.34 against 0.23 ms on 1.37, 1.70 against 0.58 ms on 1.30).
    fn default() -> Self {
        Thresholds {
            shared_from: 200,
            per_boundary_below: 180,
            shared_from_before_fix: 500,
            per_boundary_below_before_fix: 450,
            churn_changes_per_hour: 30,
            churn_quiet: Duration::from_secs(24 * 3600),
        }
    }
}

/// What `auto` decides from, for one cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterFacts {
    /// The API server's minor version (Kubernetes 1.<minor>).
    pub kubernetes_minor: u32,
    /// Boundaries attached to the cluster.
    pub boundaries: usize,
    /// Changes of the cluster's policies palisade applied within the last hour.
    pub policy_changes_last_hour: usize,
    /// How long ago the last of those changes was; `None` when palisade saw none.
    pub since_last_change: Option<Duration>,
}

/// The layout a cluster gets and why, as the cluster shows it (`shared: 212 boundaries`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    pub layout: Layout,
    pub reason: String,
}

impl fmt::Display for Choice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.layout, self.reason)
    }
}

/// The reason shown for a layout set by `serve --admission-layout`.
pub const CHOSEN_BY_FLAG: &str = "chosen by --admission-layout";

/// The layout of a cluster. `current` is the layout its objects are in now (`None` when
/// palisade has not recorded one); it only matters for the band around each crossing.
///
/// `auto`: `per-boundary` below the crossing, `shared` from it; on Kubernetes older than 1.36
/// also `shared` while the cluster's policies change often (docs/decisions.md, "`auto` and
/// kubernetes #135757"): every policy change in the other layouts recompiles a policy object,
/// which is what crashes those API servers, and the shared layout never recompiles.
pub fn choose(
    choice: LayoutChoice,
    facts: &ClusterFacts,
    current: Option<Layout>,
    thresholds: &Thresholds,
) -> Choice {
    if let LayoutChoice::Fixed(layout) = choice {
        return Choice {
            layout,
            reason: CHOSEN_BY_FLAG.to_owned(),
        };
    }
    let before_fix = facts.kubernetes_minor < FIXED_CHURN_CRASH_MINOR;
    let boundaries = match facts.boundaries {
        1 => "1 boundary".to_owned(),
        n => format!("{n} boundaries"),
    };
    if before_fix {
        let version = format!("Kubernetes 1.{}", facts.kubernetes_minor);
        if facts.policy_changes_last_hour >= thresholds.churn_changes_per_hour {
            return Choice {
                layout: Layout::Shared,
                reason: format!(
                    "{boundaries}; {} policy changes within the last hour on {version} (kubernetes#135757)",
                    facts.policy_changes_last_hour
                ),
            };
        }
        let churned_recently = facts
            .since_last_change
            .is_some_and(|since| since < thresholds.churn_quiet);
        let below_count = facts.boundaries < thresholds.per_boundary_below_before_fix;
        if current == Some(Layout::Shared) && churned_recently && below_count {
            return Choice {
                layout: Layout::Shared,
                reason: format!(
                    "{boundaries}; policies changed often on {version} and not yet quiet for {} hours (kubernetes#135757)",
                    thresholds.churn_quiet.as_secs() / 3600
                ),
            };
        }
    }
    let (from, below) = if before_fix {
        (
            thresholds.shared_from_before_fix,
            thresholds.per_boundary_below_before_fix,
        )
    } else {
        (thresholds.shared_from, thresholds.per_boundary_below)
    };
    let shared =
        facts.boundaries >= from || (current == Some(Layout::Shared) && facts.boundaries >= below);
    Choice {
        layout: if shared {
            Layout::Shared
        } else {
            Layout::PerBoundary
        },
        reason: boundaries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(minor: u32, boundaries: usize) -> ClusterFacts {
        ClusterFacts {
            kubernetes_minor: minor,
            boundaries,
            policy_changes_last_hour: 0,
            since_last_change: None,
        }
    }

    #[test]
    fn auto_picks_the_cheapest_measured_layout_with_a_band_around_each_crossing() {
        use Layout::{PerBoundary as B, Shared as S};
        let t = Thresholds::default();
        // (minor, boundaries, current, expected)
        let cases: &[(u32, usize, Option<Layout>, Layout)] = &[
            (37, 0, None, B),
            (37, 1, None, B),
            (37, 10, None, B),
            (37, 100, None, B),
            (37, 199, None, B),
            (37, 200, None, S),
            (37, 300, None, S),
            (37, 199, Some(B), B),
            (37, 199, Some(S), S),
            (37, 180, Some(S), S),
            (37, 179, Some(S), B),
            (37, 300, Some(Layout::PerPolicy), S),
            (37, 5, Some(Layout::PerPolicy), B),
            (36, 250, None, S),
            (35, 250, None, B),
            (30, 300, None, B),
            (30, 499, Some(B), B),
            (30, 500, Some(B), S),
            (30, 450, Some(S), S),
            (30, 449, Some(S), B),
        ];
        for &(minor, boundaries, current, expected) in cases {
            let choice = choose(LayoutChoice::Auto, &facts(minor, boundaries), current, &t);
            assert_eq!(
                choice.layout, expected,
                "1.{minor}, {boundaries} boundaries, now {current:?}"
            );
        }
    }

    #[test]
    fn the_reason_names_the_count() {
        let t = Thresholds::default();
        let shown = |b| choose(LayoutChoice::Auto, &facts(37, b), None, &t).to_string();
        assert_eq!(shown(212), "shared: 212 boundaries");
        assert_eq!(shown(1), "per-boundary: 1 boundary");
        assert_eq!(shown(0), "per-boundary: 0 boundaries");
        assert_eq!(
            choose(
                LayoutChoice::Fixed(Layout::PerPolicy),
                &facts(37, 500),
                Some(Layout::Shared),
                &t
            )
            .to_string(),
            "per-policy: chosen by --admission-layout"
        );
    }

    #[test]
    fn churn_moves_clusters_without_the_fix_to_shared_until_quiet() {
        let t = Thresholds::default();
        let hour = Duration::from_secs(3600);
        let churn = |minor, changes, since: Option<Duration>, current| {
            let facts = ClusterFacts {
                kubernetes_minor: minor,
                boundaries: 3,
                policy_changes_last_hour: changes,
                since_last_change: since,
            };
            choose(LayoutChoice::Auto, &facts, current, &t)
        };
        let choice = churn(30, 30, Some(Duration::ZERO), Some(Layout::PerBoundary));
        assert_eq!(
            choice.to_string(),
            "shared: 3 boundaries; 30 policy changes within the last hour on Kubernetes 1.30 (kubernetes#135757)"
        );
        assert_eq!(
            churn(30, 29, Some(Duration::ZERO), Some(Layout::PerBoundary)).layout,
            Layout::PerBoundary
        );
        // Fixed upstream: churn does not matter.
        assert_eq!(
            churn(36, 1000, Some(Duration::ZERO), Some(Layout::PerBoundary)).layout,
            Layout::PerBoundary
        );
        // Once shared for churn, it stays until a day without changes.
        let staying = churn(30, 0, Some(23 * hour), Some(Layout::Shared));
        assert_eq!(
            staying.to_string(),
            "shared: 3 boundaries; policies changed often on Kubernetes 1.30 and not yet quiet for 24 hours (kubernetes#135757)"
        );
        assert_eq!(
            churn(30, 0, Some(24 * hour), Some(Layout::Shared)).layout,
            Layout::PerBoundary
        );
        assert_eq!(
            churn(30, 0, None, Some(Layout::Shared)).layout,
            Layout::PerBoundary
        );
    }

    #[test]
    fn layout_names_parse_back() {
        for layout in Layout::ALL {
            assert_eq!(layout.as_str().parse::<Layout>(), Ok(layout));
            assert_eq!(
                layout.as_str().parse::<LayoutChoice>(),
                Ok(LayoutChoice::Fixed(layout))
            );
        }
        assert_eq!("auto".parse::<LayoutChoice>(), Ok(LayoutChoice::Auto));
        assert_eq!(
            "everything".parse::<LayoutChoice>(),
            Err("unknown admission layout 'everything': expected auto, per-policy, per-boundary or shared".to_owned())
        );
    }
}
