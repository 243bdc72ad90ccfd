//! Exceptions (SPEC 7): one resource, or the objects a match picks, let past one policy of the
//! boundary until a stated time. Pure: times are RFC 3339 UTC texts in the one form the store
//! writes (`2027-01-31T00:00:00.000Z`), so they compare as text, and "now" is always given.

use std::collections::BTreeSet;

use crate::compute_plan::PlanDecision;
use crate::label::{LabelKey, LabelValue};
use crate::{Name, PlanName, ResourceType, RuleKind};

/// How many approved exceptions a boundary may hold.
pub const MAX_PER_BOUNDARY: usize = 100;
/// How many pending requests (`status: requested`) a boundary may hold, apart from
/// [`MAX_PER_BOUNDARY`]: developers' requests never use up the room of approved exceptions.
pub const MAX_REQUESTS_PER_BOUNDARY: usize = 20;
/// The longest reason, in characters.
pub const MAX_REASON_CHARS: usize = 500;
/// The most entries each list of an exception's spec holds (`rules`, `match.clusters`,
/// `match.namespaces`, `match.labels`, `match.images`, `resources`, `plans`).
pub const MAX_LIST_ENTRIES: usize = 64;
/// The largest spec, in bytes (of the `PUT` body, or of an applied document's spec as JSON).
pub const MAX_SPEC_BYTES: usize = 16 * 1024;

/// A resource an exception names: `<type>/<name>`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResourceRef {
    pub resource_type: ResourceType,
    pub name: Name,
}

impl std::fmt::Display for ResourceRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.resource_type, self.name)
    }
}

/// What objects an admission exception matches; every field given must match.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectMatch {
    pub clusters: Vec<Name>,
    pub namespaces: Vec<Name>,
    pub labels: Vec<(LabelKey, LabelValue)>,
    pub images: Vec<String>,
}

/// A validated exception.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exception {
    pub name: Name,
    /// The policy excepted (of the same boundary; it may not exist yet).
    pub policy: Name,
    /// The rule kinds excepted; empty: every rule of the policy.
    pub rules: BTreeSet<RuleKind>,
    /// Admission: the objects let past.
    pub object_match: Option<ObjectMatch>,
    /// Compute plans: the resources let past, to `plans`.
    pub resources: Vec<ResourceRef>,
    pub plans: Vec<PlanName>,
    /// When it ends (normalised RFC 3339 UTC, milliseconds).
    pub expires_at: String,
    pub reason: String,
}

impl ObjectMatch {
    /// Whether an object in `namespace` with these labels is matched (images aside): every
    /// field given holds.
    pub fn matches<'a>(
        &self,
        namespace: Option<&str>,
        label: impl Fn(&str) -> Option<&'a str>,
    ) -> bool {
        (self.namespaces.is_empty()
            || namespace.is_some_and(|ns| self.namespaces.iter().any(|n| n.as_str() == ns)))
            && self
                .labels
                .iter()
                .all(|(k, v)| label(k.as_str()) == Some(v.as_str()))
    }

    /// Whether `image` is excepted for a matched object: every image when none is listed.
    pub fn excepts_image(&self, image: &str) -> bool {
        self.images.is_empty() || self.images.iter().any(|i| i == image)
    }
}

impl Exception {
    /// Whether it excepts rule `kind` (of its policy) from admission.
    pub fn excepts_admission(&self, kind: RuleKind) -> bool {
        self.object_match.is_some() && kind.is_admission() && self.excepts_rule(kind)
    }

    /// Whether it applies in `cluster`: every cluster when none is listed.
    pub fn in_cluster(&self, cluster: &str) -> bool {
        self.object_match.as_ref().is_some_and(|m| {
            m.clusters.is_empty() || m.clusters.iter().any(|c| c.as_str() == cluster)
        })
    }

    /// Whether it is still in force at `now` (same text form as `expires_at`).
    pub fn active_at(&self, now: &str) -> bool {
        now < self.expires_at.as_str()
    }

    fn excepts_rule(&self, kind: RuleKind) -> bool {
        self.rules.is_empty() || self.rules.contains(&kind)
    }

    /// Whether it lets resource `name` of type `ty` use `plan` despite its policy.
    pub fn allows_plan(&self, ty: ResourceType, name: &str, plan: &PlanName) -> bool {
        self.excepts_rule(RuleKind::AllowedComputePlans)
            && self.plans.iter().any(|p| p == plan)
            && self
                .resources
                .iter()
                .any(|r| r.resource_type == ty && r.name.as_str() == name)
    }
}

/// A plan decision after the exceptions in force: the policies still denying, and the
/// exceptions that let the plan past the others, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptedDecision<'a> {
    pub still_denied_by: Vec<Name>,
    pub used: Vec<&'a Exception>,
}

impl ExceptedDecision<'_> {
    pub fn allowed(&self) -> bool {
        self.still_denied_by.is_empty()
    }
}

/// Applies the exceptions active at `now` to a denying decision for resource `name`: each
/// denying policy with an exception for the resource and plan stops denying.
pub fn except_plan<'a>(
    decision: &PlanDecision,
    exceptions: &'a [Exception],
    name: &str,
    now: &str,
) -> ExceptedDecision<'a> {
    let mut used = Vec::new();
    let mut still_denied_by = Vec::new();
    for policy in &decision.denied_by {
        let found = exceptions.iter().find(|e| {
            &e.policy == policy
                && e.active_at(now)
                && e.allows_plan(decision.resource_type, name, &decision.plan)
        });
        match found {
            Some(exception) => used.push(exception),
            None => still_denied_by.push(policy.clone()),
        }
    }
    ExceptedDecision {
        still_denied_by,
        used,
    }
}

/// A save warning of an exception: it is saved, and its writer is told something about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExceptionWarning {
    /// The boundary has no policy of the name the exception excepts from (yet).
    NoSuchPolicy { boundary: String, policy: String },
    /// An applied document whose `expiresAt` has passed, stored unchanged: reported
    /// `unchanged`, not refused (`expires_at` as the document gives it, RFC 3339).
    Expired { name: String, expires_at: String },
    /// `match` selects objects by labels alone: labels are set by whoever creates the object,
    /// so anyone who may create objects in the boundary's namespaces can be let past.
    MatchesByLabelsOnly { name: String },
}

impl ObjectMatch {
    /// Whether it selects objects by their labels alone: no namespace and no image narrows it
    /// (clusters do not: every namespace of the boundary there is still in).
    pub fn by_labels_only(&self) -> bool {
        !self.labels.is_empty() && self.namespaces.is_empty() && self.images.is_empty()
    }
}

impl Exception {
    /// What saving it should tell its writer about the exception itself.
    pub fn save_warnings(&self) -> Vec<ExceptionWarning> {
        let mut warnings = Vec::new();
        if self
            .object_match
            .as_ref()
            .is_some_and(ObjectMatch::by_labels_only)
        {
            warnings.push(ExceptionWarning::MatchesByLabelsOnly {
                name: self.name.to_string(),
            });
        }
        warnings
    }
}

impl std::fmt::Display for ExceptionWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExceptionWarning::NoSuchPolicy { boundary, policy } => write!(
                f,
                "boundary '{boundary}' has no policy '{policy}' (yet): the exception applies once it has"
            ),
            ExceptionWarning::Expired { name, expires_at } => {
                write!(f, "exception '{name}' expired at {expires_at}")
            }
            ExceptionWarning::MatchesByLabelsOnly { name } => write!(
                f,
                "exception '{name}' matches objects by labels alone, which whoever creates an object sets: anyone who may create objects in the boundary's namespaces can be let past; name namespaces or images in match to narrow it"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::parse(s).unwrap()
    }

    fn plan(s: &str) -> PlanName {
        PlanName::parse(s).unwrap()
    }

    fn exception(policy: &str, rules: &[RuleKind], resource: &str, plans: &[&str]) -> Exception {
        Exception {
            name: name(&format!("x-{policy}")),
            policy: name(policy),
            rules: rules.iter().copied().collect(),
            object_match: None,
            resources: vec![ResourceRef {
                resource_type: ResourceType::App,
                name: name(resource),
            }],
            plans: plans.iter().map(|p| plan(p)).collect(),
            expires_at: "2027-01-31T00:00:00.000Z".into(),
            reason: "legacy".into(),
        }
    }

    fn denied(by: &[&str]) -> PlanDecision {
        PlanDecision {
            resource_type: ResourceType::App,
            plan: plan("large"),
            allowed: by.is_empty(),
            allowed_plans: vec![plan("small")],
            denied_by: by.iter().map(|p| name(p)).collect(),
            audit_warnings: vec![],
        }
    }

    const BEFORE: &str = "2027-01-30T23:59:59.999Z";
    const AT: &str = "2027-01-31T00:00:00.000Z";

    /// (case, exceptions, resource, now, still denied by, exceptions used)
    type Case = (
        &'static str,
        Vec<Exception>,
        &'static str,
        &'static str,
        Vec<&'static str>,
        usize,
    );

    #[test]
    fn exceptions_table() {
        let size = exception("size", &[], "reports", &["large"]);
        let plans_only = exception(
            "size",
            &[RuleKind::AllowedComputePlans],
            "reports",
            &["large"],
        );
        let labels_only = exception("size", &[RuleKind::RequiredLabels], "reports", &["large"]);
        let other_plan = exception("size", &[], "reports", &["medium"]);
        let other_policy = exception("cost", &[], "reports", &["large"]);
        let cases: Vec<Case> = vec![
            ("no exception", vec![], "reports", BEFORE, vec!["size"], 0),
            ("excepted", vec![size.clone()], "reports", BEFORE, vec![], 1),
            (
                "rules name the plan rule",
                vec![plans_only],
                "reports",
                BEFORE,
                vec![],
                1,
            ),
            (
                "rules without the plan rule",
                vec![labels_only],
                "reports",
                BEFORE,
                vec!["size"],
                0,
            ),
            (
                "another resource",
                vec![size.clone()],
                "web",
                BEFORE,
                vec!["size"],
                0,
            ),
            (
                "another plan",
                vec![other_plan],
                "reports",
                BEFORE,
                vec!["size"],
                0,
            ),
            (
                "expired at expiresAt exactly",
                vec![size.clone()],
                "reports",
                AT,
                vec!["size"],
                0,
            ),
            (
                "another policy's exception",
                vec![other_policy],
                "reports",
                BEFORE,
                vec!["size"],
                0,
            ),
        ];
        for (case, exceptions, resource, now, still, used) in cases {
            let decided = except_plan(&denied(&["size"]), &exceptions, resource, now);
            let still: Vec<Name> = still.iter().map(|p| name(p)).collect();
            assert_eq!(decided.still_denied_by, still, "{case}");
            assert_eq!(decided.used.len(), used, "{case}");
        }
    }

    #[test]
    fn one_policy_excepted_of_two_still_denies() {
        let exceptions = vec![exception("size", &[], "reports", &["large"])];
        let decided = except_plan(&denied(&["cost", "size"]), &exceptions, "reports", BEFORE);
        assert_eq!(decided.still_denied_by, vec![name("cost")]);
        assert!(!decided.allowed());
    }

    #[test]
    fn a_save_warning_reads_as_the_api_sends_it() {
        let warning = ExceptionWarning::NoSuchPolicy {
            boundary: "shop".into(),
            policy: "size-limits".into(),
        };
        assert_eq!(
            warning.to_string(),
            "boundary 'shop' has no policy 'size-limits' (yet): the exception applies once it has"
        );
    }

    /// A `match` of labels alone is warned about; a namespace or an image narrows it.
    #[test]
    fn a_match_of_labels_alone_is_warned_about() {
        let key = |k: &str| crate::label::LabelKey::parse(k).unwrap();
        let value = |v: &str| crate::label::LabelValue::parse(v).unwrap();
        let with = |object_match: Option<ObjectMatch>| Exception {
            object_match,
            ..exception("trusted", &[], "web", &["large"])
        };
        let labels = vec![(key("app"), value("legacy"))];
        let cases = [
            (None, false),
            (
                Some(ObjectMatch {
                    clusters: vec![],
                    namespaces: vec![],
                    labels: labels.clone(),
                    images: vec![],
                }),
                true,
            ),
            (
                Some(ObjectMatch {
                    clusters: vec![name("prod-1")],
                    namespaces: vec![],
                    labels: labels.clone(),
                    images: vec![],
                }),
                true,
            ),
            (
                Some(ObjectMatch {
                    clusters: vec![],
                    namespaces: vec![name("web")],
                    labels: labels.clone(),
                    images: vec![],
                }),
                false,
            ),
            (
                Some(ObjectMatch {
                    clusters: vec![],
                    namespaces: vec![],
                    labels: labels.clone(),
                    images: vec!["nginx:1.27".into()],
                }),
                false,
            ),
            (
                Some(ObjectMatch {
                    clusters: vec![],
                    namespaces: vec![name("web")],
                    labels: vec![],
                    images: vec![],
                }),
                false,
            ),
        ];
        for (object_match, warned) in cases {
            let warnings = with(object_match.clone()).save_warnings();
            assert_eq!(!warnings.is_empty(), warned, "{object_match:?}");
        }
    }
}
