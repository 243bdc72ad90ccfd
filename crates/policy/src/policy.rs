//! A boundary policy: its name, mode, scope and rules, validated on construction.

use std::fmt;

use crate::catalog::Catalog;
use crate::image_ref::RegistryPrefix;
use crate::label::{LabelKey, LabelRequirement};
use crate::name::Name;
use crate::plan::PlanEntry;
use crate::resource_type::ResourceType;
use crate::rollout::Rollout;

/// At most this many plan entries in one rule.
pub const MAX_PLAN_ENTRIES: usize = 256;
/// At most this many labels in one rule.
pub const MAX_LABELS: usize = 64;
/// At most this many registry prefixes in one rule.
pub const MAX_REGISTRIES: usize = 64;

/// `enforce` denies; `audit` only reports what it would deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Mode {
    #[default]
    Enforce,
    Audit,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Audit => "audit",
        }
    }
}

/// The clusters a policy's admission rules are installed in.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Scope {
    /// Every cluster attached to the boundary.
    #[default]
    AllClusters,
    Clusters(Vec<Name>),
}

impl Scope {
    pub fn includes(&self, cluster: &Name) -> bool {
        match self {
            Scope::AllClusters => true,
            Scope::Clusters(clusters) => clusters.contains(cluster),
        }
    }
}

/// The four rule kinds, named as in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleKind {
    AllowedComputePlans,
    RequiredLabels,
    AllowedRegistries,
    DisallowLatestTag,
}

impl RuleKind {
    /// The name used in messages: `RequiredLabels`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::AllowedComputePlans => "AllowedComputePlans",
            RuleKind::RequiredLabels => "RequiredLabels",
            RuleKind::AllowedRegistries => "AllowedRegistries",
            RuleKind::DisallowLatestTag => "DisallowLatestTag",
        }
    }

    /// The key used in policy documents: `requiredLabels`.
    pub fn document_key(self) -> &'static str {
        match self {
            RuleKind::AllowedComputePlans => "allowedComputePlans",
            RuleKind::RequiredLabels => "requiredLabels",
            RuleKind::AllowedRegistries => "allowedRegistries",
            RuleKind::DisallowLatestTag => "disallowLatestTag",
        }
    }

    /// True for the rules Kubernetes enforces.
    pub fn is_admission(self) -> bool {
        self != RuleKind::AllowedComputePlans
    }
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One rule of a policy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    AllowedComputePlans(Vec<PlanEntry>),
    RequiredLabels(Vec<LabelRequirement>),
    AllowedRegistries(Vec<RegistryPrefix>),
    DisallowLatestTag,
}

/// Why a rule's list is not valid. `index` is the position in the list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    #[error("must not be empty")]
    Empty,
    #[error("duplicates entry {first}")]
    Duplicate { index: usize, first: usize },
    #[error("must have at most {max} entries, got {got}")]
    TooMany { max: usize, got: usize },
}

fn check_list<T, K: PartialEq>(
    items: &[T],
    max: usize,
    key: impl Fn(&T) -> K,
) -> Result<(), RuleError> {
    if items.is_empty() {
        return Err(RuleError::Empty);
    }
    if items.len() > max {
        return Err(RuleError::TooMany {
            max,
            got: items.len(),
        });
    }
    for (index, item) in items.iter().enumerate() {
        let item_key = key(item);
        if let Some(first) = items[..index]
            .iter()
            .position(|other| key(other) == item_key)
        {
            return Err(RuleError::Duplicate { index, first });
        }
    }
    Ok(())
}

impl Rule {
    pub fn allowed_compute_plans(entries: Vec<PlanEntry>) -> Result<Rule, RuleError> {
        check_list(&entries, MAX_PLAN_ENTRIES, Clone::clone)?;
        Ok(Rule::AllowedComputePlans(entries))
    }

    /// Labels are duplicates when their keys are equal.
    pub fn required_labels(labels: Vec<LabelRequirement>) -> Result<Rule, RuleError> {
        check_list(&labels, MAX_LABELS, |label| label.key().clone())?;
        Ok(Rule::RequiredLabels(labels))
    }

    pub fn allowed_registries(prefixes: Vec<RegistryPrefix>) -> Result<Rule, RuleError> {
        check_list(&prefixes, MAX_REGISTRIES, Clone::clone)?;
        Ok(Rule::AllowedRegistries(prefixes))
    }

    pub fn kind(&self) -> RuleKind {
        match self {
            Rule::AllowedComputePlans(_) => RuleKind::AllowedComputePlans,
            Rule::RequiredLabels(_) => RuleKind::RequiredLabels,
            Rule::AllowedRegistries(_) => RuleKind::AllowedRegistries,
            Rule::DisallowLatestTag => RuleKind::DisallowLatestTag,
        }
    }
}

/// Why a policy is not valid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("a policy needs at least one rule")]
    NoRules,
    #[error("rule kind {kind} appears twice (rules {first} and {index})")]
    DuplicateRuleKind {
        kind: RuleKind,
        index: usize,
        first: usize,
    },
    #[error("scope.clusters must not be empty; omit scope for every cluster")]
    EmptyScope,
    #[error("scope.clusters lists cluster '{name}' twice")]
    DuplicateCluster { index: usize, name: Name },
}

/// A validated boundary policy. The boundary it belongs to is kept by the caller.
#[derive(Clone, Debug, PartialEq)]
pub struct Policy {
    name: Name,
    mode: Mode,
    scope: Scope,
    rules: Vec<Rule>,
    rollout: Option<Rollout>,
}

impl Policy {
    pub fn new(
        name: Name,
        mode: Mode,
        scope: Scope,
        rules: Vec<Rule>,
    ) -> Result<Self, PolicyError> {
        if rules.is_empty() {
            return Err(PolicyError::NoRules);
        }
        for (index, rule) in rules.iter().enumerate() {
            if let Some(first) = rules[..index]
                .iter()
                .position(|other| other.kind() == rule.kind())
            {
                return Err(PolicyError::DuplicateRuleKind {
                    kind: rule.kind(),
                    index,
                    first,
                });
            }
        }
        if let Scope::Clusters(clusters) = &scope {
            if clusters.is_empty() {
                return Err(PolicyError::EmptyScope);
            }
            for (index, cluster) in clusters.iter().enumerate() {
                if clusters[..index].contains(cluster) {
                    return Err(PolicyError::DuplicateCluster {
                        index,
                        name: cluster.clone(),
                    });
                }
            }
        }
        Ok(Policy {
            name,
            mode,
            scope,
            rules,
            rollout: None,
        })
    }

    /// The policy with the staged rollout of its changes (SPEC 8), validated against its
    /// scope by [`Rollout::new`].
    pub fn with_rollout(mut self, rollout: Rollout) -> Self {
        self.rollout = Some(rollout);
        self
    }

    /// How a change of it is rolled out; `None`: everywhere at once.
    pub fn rollout(&self) -> Option<&Rollout> {
        self.rollout.as_ref()
    }

    pub fn name(&self) -> &Name {
        &self.name
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn scope(&self) -> &Scope {
        &self.scope
    }

    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The entries of the `allowedComputePlans` rule, if the policy has one.
    pub fn plan_entries(&self) -> Option<&[PlanEntry]> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::AllowedComputePlans(entries) => Some(entries.as_slice()),
            _ => None,
        })
    }

    /// True when the policy has a rule that Kubernetes enforces.
    pub fn has_admission_rules(&self) -> bool {
        self.rules.iter().any(|rule| rule.kind().is_admission())
    }

    /// Whether the clusters judge by `other` exactly as by this policy: the same mode, scope
    /// and admission rules (its `allowedComputePlans` and `rollout` aside). A change between
    /// two such versions is not rolled out (SPEC 8).
    pub fn judges_as(&self, other: &Policy) -> bool {
        let admission = |p: &Policy| -> Vec<Rule> {
            p.rules
                .iter()
                .filter(|r| r.kind().is_admission())
                .cloned()
                .collect()
        };
        self.mode == other.mode && self.scope == other.scope && admission(self) == admission(other)
    }

    /// Whether the policy is installed in `cluster` (SPEC 3.4): it has admission rules and
    /// its scope includes the cluster. The one answer the reconciler, the statuses and the
    /// preview share.
    pub fn installs_in(&self, cluster: &Name) -> bool {
        self.has_admission_rules() && self.scope().includes(cluster)
    }

    /// Save warnings that concern this policy alone: plan entries that name no plan of any
    /// type they apply to, and registry prefixes that name a repository. Normalisations are
    /// reported by the parser that made them.
    pub fn content_warnings(&self, catalog: &Catalog) -> Vec<SaveWarning> {
        let mut warnings = Vec::new();
        for rule in &self.rules {
            match rule {
                Rule::AllowedComputePlans(entries) => {
                    for entry in entries {
                        let names_a_plan = ResourceType::ALL
                            .into_iter()
                            .filter(|ty| entry.applies_to(*ty))
                            .any(|ty| catalog.contains(ty, entry.plan()));
                        if !names_a_plan {
                            warnings.push(SaveWarning::UnknownPlanEntry(entry.clone()));
                        }
                    }
                }
                Rule::AllowedRegistries(prefixes) => {
                    for prefix in prefixes.iter().filter(|p| p.component_count() >= 3) {
                        warnings.push(SaveWarning::RepositoryPrefix(prefix.clone()));
                    }
                }
                Rule::RequiredLabels(_) | Rule::DisallowLatestTag => {}
            }
        }
        warnings
    }
}

/// A save warning (SPEC 1): the policy is saved, and the user is told something about it.
/// Built here, in the core, and turned into text only at the edge (`Display`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SaveWarning {
    /// A required label's empty value is saved as "any value".
    EmptyLabelValue(LabelKey),
    /// A registry prefix was saved without its trailing `/`.
    RegistryTrimmed {
        given: String,
        saved: RegistryPrefix,
    },
    /// An allowed-plans entry names no plan of any type it applies to.
    UnknownPlanEntry(PlanEntry),
    /// Together with the boundary's other enforce-mode policies, no plan of this type is
    /// allowed: every create of it is refused.
    BlockedType(ResourceType),
    /// A registry prefix of three or more components names a repository.
    RepositoryPrefix(RegistryPrefix),
    /// The policy has a rollout and an `allowedComputePlans` rule: the rule is palisade's own
    /// API and applies at once (SPEC 8).
    PlansAtOnce,
}

impl SaveWarning {
    /// The documented order of a save's warnings: normalisations, plan entries, blocked
    /// types, repositories.
    pub fn group(&self) -> u8 {
        match self {
            SaveWarning::EmptyLabelValue(_) | SaveWarning::RegistryTrimmed { .. } => 0,
            SaveWarning::UnknownPlanEntry(_) => 1,
            SaveWarning::BlockedType(_) => 2,
            SaveWarning::RepositoryPrefix(_) => 3,
            SaveWarning::PlansAtOnce => 4,
        }
    }
}

impl std::fmt::Display for SaveWarning {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SaveWarning::EmptyLabelValue(key) => {
                write!(f, "label '{key}' value \"\" saved as any value")
            }
            SaveWarning::RegistryTrimmed { given, saved } => {
                write!(f, "registry prefix '{given}' saved as '{saved}'")
            }
            SaveWarning::UnknownPlanEntry(entry) => {
                write!(f, "plan entry '{entry}' names no plan of any type it applies to")
            }
            SaveWarning::PlansAtOnce => f.write_str(
                "allowedComputePlans applies at once: rollout stages the admission rules only",
            ),
            SaveWarning::BlockedType(ty) => {
                write!(f, "creates of {ty} are now refused: no policy allows any {ty} plan")
            }
            SaveWarning::RepositoryPrefix(prefix) => write!(
                f,
                "registry prefix '{prefix}' names a repository: its tagged images ({prefix}:tag) are not under it"
            ),
        }
    }
}

/// The save warnings of a policy saved among others: its own warnings with the
/// blocked-type warnings replaced by `blocked` (decided on the whole boundary), in the
/// documented order (see [`SaveWarning::group`]).
pub fn save_warnings(own: Vec<SaveWarning>, blocked: Vec<SaveWarning>) -> Vec<SaveWarning> {
    let mut warnings: Vec<SaveWarning> = own
        .into_iter()
        .filter(|w| !matches!(w, SaveWarning::BlockedType(_)))
        .chain(blocked)
        .collect();
    warnings.sort_by_key(SaveWarning::group);
    warnings
}

/// A blocked-type warning for every checked type that the enforce-mode policies together
/// leave without any allowed plan, in type order.
pub fn blocked_type_warnings(policies: &[Policy], catalog: &Catalog) -> Vec<SaveWarning> {
    ResourceType::CHECKED
        .into_iter()
        .filter(|ty| crate::compute_plan::allowed_plans(policies, catalog, *ty).is_empty())
        .map(SaveWarning::BlockedType)
        .collect()
}
