//! Whether a cluster can enforce admission rules (SPEC 3.4), decided from what it reports.

/// The oldest minor version whose `admissionregistration.k8s.io/v1` serves
/// ValidatingAdmissionPolicy (GA in 1.30).
pub const OLDEST_MINOR: u32 = 30;

// The `not enforced` and `error` reasons, defined once in the core.
pub use palisade_policy::reason::{
    ADMITTED_VIOLATING, DENIED_EXCEPTED, NOT_SERVED, NOT_WARNED, PROBE_REFUSED, WARNED_EXCEPTED,
};

/// Whether admission rules are enforced in a cluster, with the reason when not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    Enforced,
    NotEnforced(String),
}

/// What `probe` learnt of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterProbe {
    /// `/version`'s `gitVersion`, e.g. `v1.37.2`.
    pub kubernetes_version: String,
    /// The minor version (`37` for 1.37).
    pub minor: u32,
    pub admission: Admission,
}

/// The answer of a dry-run create of an object that violates one policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnforcementProbe {
    /// Denied with the policy's message (audit mode: admitted with its warning).
    Enforced,
    /// `not enforced: <reason>`: the violating object was admitted ([`ADMITTED_VIOLATING`]).
    NotEnforced(String),
    /// During a switch of layout: denied with the policy's message, but the new layout's
    /// objects did not take part (its switch binding did not warn): the earlier layout still
    /// enforces the policy, and its objects must stay.
    EnforcedByEarlierLayout,
    /// Refused for another reason (another policy's message, a missing service account, ...):
    /// the probe proves nothing either way; the status is `error: <reason>`.
    Inconclusive(String),
}

/// A minor version as `/version` reports it (`30`, `30+`).
pub fn parse_minor(minor: &str) -> Option<u32> {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// `Some(reason)` when Kubernetes `major.minor` is too old to enforce anything.
pub fn too_old(major: &str, minor: u32) -> Option<String> {
    let major_number = parse_minor(major)?;
    (major_number == 1 && minor < OLDEST_MINOR).then(|| {
        palisade_policy::reason::too_old(
            &format!("{major_number}.{minor}"),
            &format!("1.{OLDEST_MINOR}"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_before_1_30_are_too_old() {
        assert_eq!(
            too_old("1", 29).as_deref(),
            Some("Kubernetes 1.29 is older than 1.30")
        );
        assert_eq!(
            too_old("1", 27).as_deref(),
            Some("Kubernetes 1.27 is older than 1.30")
        );
        assert_eq!(too_old("1", 30), None);
        assert_eq!(too_old("1", 37), None);
        assert_eq!(too_old("2", 0), None);
        assert_eq!(parse_minor("29+"), Some(29));
        assert_eq!(parse_minor("x"), None);
    }
}
