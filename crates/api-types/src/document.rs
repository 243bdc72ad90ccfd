//! `BoundaryPolicy` documents (SPEC 1): the serde shape, and their conversion into a validated
//! `palisade_policy::Policy` with save warnings.

use std::collections::BTreeMap;

use palisade_policy::image_ref::RegistryPrefix;
use palisade_policy::label::{LabelKey, LabelRequirement, LabelValue};
use palisade_policy::policy::{self, blocked_type_warnings, RuleError};
use palisade_policy::rollout::{self, Namespaces, Promote, Rollout, Stage, StageDuration};
use palisade_policy::{Catalog, Mode, Name, PlanEntry, Policy, Rule, RuleKind, SaveWarning, Scope};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub const API_VERSION: &str = "palisade.dev/v1";
pub const KIND: &str = "BoundaryPolicy";

/// A whole policy document, as kept in git and sent to `POST /v1/apply`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PolicyDocument {
    pub api_version: String,
    pub kind: String,
    pub metadata: PolicyMetadata,
    pub spec: PolicySpec,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyMetadata {
    pub name: String,
    pub boundary: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// The `spec` of a policy: also the body of `PUT /v1/boundaries/{b}/policies/{p}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<ModeDoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ScopeDoc>,
    pub rules: Vec<RuleDoc>,
    /// Staged rollout of a change (SPEC 8); omitted: a change applies everywhere at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollout: Option<RolloutDoc>,
}

/// `spec.rollout`: the stages a change goes through, how they are promoted, and how many
/// denials a stage may have and still be promoted automatically.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RolloutDoc {
    pub stages: Vec<StageDoc>,
    /// `auto` (the default) or `manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub promote: Option<PromoteDoc>,
    /// Automatic promotion only while the stage denied at most this many requests (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_denials: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum PromoteDoc {
    Auto,
    Manual,
}

/// One stage: it reaches `clusters` (omitted: every cluster of the policy's scope) and there
/// `namespaces` (a percentage such as `25%`, or a list of names; omitted: every namespace of
/// the boundary), and runs `for` (`1h`, `30m`, `1h30m`; at least 10s) before automatic
/// promotion. `{}` last: everywhere.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StageDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<NamespacesDoc>,
    #[serde(default, rename = "for", skip_serializing_if = "Option::is_none")]
    pub duration: Option<String>,
}

/// A stage's namespaces: `25%`, or names.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(
    untagged,
    expecting = "must be a percentage such as 25%, or a list of namespace names"
)]
pub enum NamespacesDoc {
    Percent(String),
    Names(Vec<String>),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ModeDoc {
    Enforce,
    Audit,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScopeDoc {
    pub clusters: Vec<String>,
}

/// One rule: exactly one of the four fields is set.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RuleDoc {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_compute_plans: Option<PlansDoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_labels: Option<LabelsDoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_registries: Option<RegistriesDoc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disallow_latest_tag: Option<EmptyDoc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlansDoc {
    pub plans: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsDoc {
    pub labels: Vec<LabelDoc>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelDoc {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RegistriesDoc {
    pub registries: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EmptyDoc {}

/// A document that cannot be saved: `pointer` names the field, `message` says why. Shown as
/// `<pointer>: <message>`, or `the body <message>` when the pointer is empty (the whole
/// document).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", shown(.pointer, .message))]
pub struct DocumentError {
    pub pointer: String,
    pub message: String,
}

fn shown(pointer: &str, message: &str) -> String {
    if pointer.is_empty() {
        format!("the body {message}")
    } else {
        format!("{pointer}: {message}")
    }
}

pub(crate) fn error(pointer: impl Into<String>, message: impl ToString) -> DocumentError {
    DocumentError {
        pointer: pointer.into(),
        message: message.to_string(),
    }
}

/// `bytes` as one JSON value; a syntax error is an error of the whole document.
/// A JSON body as a value, its nesting bounded before it is parsed.
pub(crate) fn json_value(bytes: &[u8]) -> Result<serde_json::Value, DocumentError> {
    crate::nesting::check_json(bytes).map_err(|e| error("", e))?;
    serde_json::from_slice(bytes).map_err(|e| error("", format!("is not valid JSON: {e}")))
}

/// What every document's header must be: `apiVersion` ours, `kind` `expected_kind`, and the
/// metadata's `name` and `boundary` valid names, answered as (name, boundary).
pub(crate) fn check_header(
    [api_version, kind]: [&str; 2],
    expected_kind: &str,
    [name, boundary]: [&str; 2],
) -> Result<(Name, Name), DocumentError> {
    if api_version != API_VERSION {
        return Err(error(
            "/apiVersion",
            format!("must be {API_VERSION}, got '{api_version}'"),
        ));
    }
    if kind != expected_kind {
        return Err(error(
            "/kind",
            format!("must be {expected_kind}, got '{kind}'"),
        ));
    }
    let name = Name::parse(name).map_err(|e| error("/metadata/name", e))?;
    let boundary = Name::parse(boundary).map_err(|e| error("/metadata/boundary", e))?;
    Ok((name, boundary))
}

/// A saved policy: its boundary, the validated policy and the save warnings.
#[derive(Clone, Debug, PartialEq)]
pub struct ValidPolicy {
    pub boundary: Name,
    pub policy: Policy,
    pub warnings: Vec<SaveWarning>,
}

impl PolicyDocument {
    /// Parses a JSON document; errors carry the pointer of the field.
    /// Nesting deeper than [`crate::nesting::MAX_DEPTH`] is refused before it is parsed.
    pub fn from_json(bytes: &[u8]) -> Result<Self, DocumentError> {
        crate::json::typed(&json_value(bytes)?)
    }

    /// Validates the document into a policy, with its save warnings (SPEC 1).
    pub fn validate(&self, catalog: &Catalog) -> Result<ValidPolicy, DocumentError> {
        let (name, boundary) = check_header(
            [&self.api_version, &self.kind],
            KIND,
            [&self.metadata.name, &self.metadata.boundary],
        )?;
        self.metadata.validate()?;
        let (policy, warnings) = self.spec.validate_at("/spec", name, catalog)?;
        Ok(ValidPolicy {
            boundary,
            policy,
            warnings,
        })
    }
}

/// The most bytes of annotation keys and values together, as Kubernetes allows.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

impl PolicyMetadata {
    /// Labels and annotations are kept for GitOps tools, so they follow Kubernetes' rules:
    /// label keys and values the label syntax, annotation keys the same qualified-name syntax,
    /// annotation values any string, at most 256 KiB of annotations in all.
    fn validate(&self) -> Result<(), DocumentError> {
        for (key, value) in &self.labels {
            let at = format!("/metadata/labels/{}", crate::pointer::escape(key));
            LabelKey::parse(key).map_err(|e| error(&at, e))?;
            LabelValue::parse(value).map_err(|e| error(&at, e))?;
        }
        for key in self.annotations.keys() {
            let at = format!("/metadata/annotations/{}", crate::pointer::escape(key));
            LabelKey::parse(key)
                .map_err(|e| error(at, e.to_string().replacen("label key", "annotation key", 1)))?;
        }
        let size: usize = self
            .annotations
            .iter()
            .map(|(key, value)| key.len() + value.len())
            .sum();
        if size > MAX_ANNOTATIONS_BYTES {
            return Err(error(
                "/metadata/annotations",
                format!("must be at most {MAX_ANNOTATIONS_BYTES} bytes of keys and values in all, got {size}"),
            ));
        }
        Ok(())
    }
}

impl PolicySpec {
    /// Parses a JSON spec (the body of a policy PUT); pointers are relative to the body.
    /// Nesting deeper than [`crate::nesting::MAX_DEPTH`] is refused before it is parsed.
    pub fn from_json(bytes: &[u8]) -> Result<Self, DocumentError> {
        crate::json::typed(&json_value(bytes)?)
    }

    /// Validates the spec of policy `name`, pointers relative to the spec itself.
    pub fn validate(
        &self,
        name: Name,
        catalog: &Catalog,
    ) -> Result<(Policy, Vec<SaveWarning>), DocumentError> {
        self.validate_at("", name, catalog)
    }

    fn validate_at(
        &self,
        base: &str,
        name: Name,
        catalog: &Catalog,
    ) -> Result<(Policy, Vec<SaveWarning>), DocumentError> {
        let mut normalisations = Vec::new();
        let mode = match self.mode {
            None | Some(ModeDoc::Enforce) => Mode::Enforce,
            Some(ModeDoc::Audit) => Mode::Audit,
        };
        let scope = match &self.scope {
            None => Scope::AllClusters,
            Some(scope) => {
                Scope::Clusters(names(&scope.clusters, &format!("{base}/scope/clusters"))?)
            }
        };
        if self.rules.is_empty() {
            return Err(error(
                format!("{base}/rules"),
                "must list at least one rule",
            ));
        }
        let mut rules = Vec::with_capacity(self.rules.len());
        for (index, rule) in self.rules.iter().enumerate() {
            let at = format!("{base}/rules/{index}");
            rules.push(rule.validate(&at, &mut normalisations)?);
        }
        let rollout = match &self.rollout {
            None => None,
            Some(rollout) => Some(rollout.validate(&format!("{base}/rollout"), &scope)?),
        };
        let policy = Policy::new(name, mode, scope, rules).map_err(|e| match e {
            policy::PolicyError::NoRules => error(format!("{base}/rules"), e),
            policy::PolicyError::DuplicateRuleKind { index, .. } => {
                error(format!("{base}/rules/{index}"), e)
            }
            policy::PolicyError::EmptyScope => error(format!("{base}/scope/clusters"), e),
            policy::PolicyError::DuplicateCluster { index, .. } => {
                error(format!("{base}/scope/clusters/{index}"), e)
            }
        })?;
        let mut warnings = normalisations;
        warnings.extend(policy.content_warnings(catalog));
        if policy.mode() == Mode::Enforce {
            warnings.extend(blocked_type_warnings(
                std::slice::from_ref(&policy),
                catalog,
            ));
        }
        warnings.sort_by_key(SaveWarning::group);
        let policy = match rollout {
            Some(rollout) => {
                if policy.plan_entries().is_some() {
                    warnings.push(SaveWarning::PlansAtOnce);
                }
                policy.with_rollout(rollout)
            }
            None => policy,
        };
        Ok((policy, warnings))
    }
}

impl RolloutDoc {
    /// Validates the rollout of a policy of `scope`; pointers start at `at`.
    fn validate(&self, at: &str, scope: &Scope) -> Result<Rollout, DocumentError> {
        let mut stages = Vec::with_capacity(self.stages.len());
        for (s, stage) in self.stages.iter().enumerate() {
            let clusters = match &stage.clusters {
                None => None,
                Some(list) => Some(names(list, &format!("{at}/stages/{s}/clusters"))?),
            };
            let namespaces = match &stage.namespaces {
                None => Namespaces::All,
                Some(NamespacesDoc::Percent(text)) => Namespaces::Percent(
                    rollout::parse_percent(text)
                        .map_err(|e| error(format!("{at}/stages/{s}/namespaces"), e))?,
                ),
                Some(NamespacesDoc::Names(list)) => {
                    Namespaces::Named(names(list, &format!("{at}/stages/{s}/namespaces"))?)
                }
            };
            let duration = match &stage.duration {
                None => None,
                Some(text) => Some(
                    StageDuration::parse(text)
                        .map_err(|e| error(format!("{at}/stages/{s}/for"), e))?,
                ),
            };
            stages.push(Stage {
                clusters,
                namespaces,
                duration,
            });
        }
        let promote = match self.promote {
            None | Some(PromoteDoc::Auto) => Promote::Auto,
            Some(PromoteDoc::Manual) => Promote::Manual,
        };
        Rollout::new(stages, promote, self.max_denials.unwrap_or(0), scope, None)
            .map_err(|(place, e)| error(format!("{at}{}", place.pointer()), e))
    }
}

/// The names of `list`, each one's error at `<at>/<index>`.
fn names(list: &[String], at: &str) -> Result<Vec<Name>, DocumentError> {
    list.iter()
        .enumerate()
        .map(|(i, text)| Name::parse(text).map_err(|e| error(format!("{at}/{i}"), e)))
        .collect()
}

/// A rollout in its document form.
fn rollout_doc(rollout: &Rollout) -> RolloutDoc {
    let stages = rollout
        .stages()
        .iter()
        .map(|stage| StageDoc {
            clusters: stage
                .clusters
                .as_ref()
                .map(|c| c.iter().map(ToString::to_string).collect()),
            namespaces: match &stage.namespaces {
                Namespaces::All => None,
                Namespaces::Percent(p) => Some(NamespacesDoc::Percent(format!("{p}%"))),
                Namespaces::Named(names) => Some(NamespacesDoc::Names(
                    names.iter().map(ToString::to_string).collect(),
                )),
            },
            duration: stage.duration.map(|d| d.to_string()),
        })
        .collect();
    RolloutDoc {
        stages,
        promote: Some(match rollout.promote() {
            Promote::Auto => PromoteDoc::Auto,
            Promote::Manual => PromoteDoc::Manual,
        }),
        max_denials: Some(rollout.max_denials()),
    }
}

fn list_error(at: &str, list: &str, e: RuleError) -> DocumentError {
    match e {
        RuleError::Empty => error(format!("{at}/{list}"), "must not be empty"),
        RuleError::TooMany { .. } => error(format!("{at}/{list}"), e),
        RuleError::Duplicate { index, first } => error(
            format!("{at}/{list}/{index}"),
            format!("duplicates entry {first}"),
        ),
    }
}

impl RuleDoc {
    fn kinds(&self) -> Vec<RuleKind> {
        let mut kinds = Vec::new();
        if self.allowed_compute_plans.is_some() {
            kinds.push(RuleKind::AllowedComputePlans);
        }
        if self.required_labels.is_some() {
            kinds.push(RuleKind::RequiredLabels);
        }
        if self.allowed_registries.is_some() {
            kinds.push(RuleKind::AllowedRegistries);
        }
        if self.disallow_latest_tag.is_some() {
            kinds.push(RuleKind::DisallowLatestTag);
        }
        kinds
    }

    fn validate(
        &self,
        at: &str,
        normalisations: &mut Vec<SaveWarning>,
    ) -> Result<Rule, DocumentError> {
        let kinds = self.kinds();
        if kinds.len() != 1 {
            return Err(error(
                at,
                format!(
                    "a rule must have exactly one of allowedComputePlans, requiredLabels, allowedRegistries, disallowLatestTag; found {}",
                    if kinds.is_empty() { "none".to_owned() } else {
                        kinds.iter().map(|k| k.document_key()).collect::<Vec<_>>().join(", ")
                    }
                ),
            ));
        }
        if let Some(plans) = &self.allowed_compute_plans {
            let at = format!("{at}/allowedComputePlans");
            let entries = plans
                .plans
                .iter()
                .enumerate()
                .map(|(i, p)| PlanEntry::parse(p).map_err(|e| error(format!("{at}/plans/{i}"), e)))
                .collect::<Result<Vec<_>, _>>()?;
            return Rule::allowed_compute_plans(entries).map_err(|e| list_error(&at, "plans", e));
        }
        if let Some(labels) = &self.required_labels {
            let at = format!("{at}/requiredLabels");
            let mut requirements = Vec::with_capacity(labels.labels.len());
            for (i, label) in labels.labels.iter().enumerate() {
                let key = LabelKey::parse(&label.key)
                    .map_err(|e| error(format!("{at}/labels/{i}/key"), e))?;
                let value = match &label.value {
                    None => None,
                    Some(value) => {
                        let value = LabelValue::parse(value)
                            .map_err(|e| error(format!("{at}/labels/{i}/value"), e))?;
                        if value.as_str().is_empty() {
                            normalisations.push(SaveWarning::EmptyLabelValue(key.clone()));
                        }
                        Some(value)
                    }
                };
                requirements.push(LabelRequirement::new(key, value));
            }
            return Rule::required_labels(requirements).map_err(|e| list_error(&at, "labels", e));
        }
        if let Some(registries) = &self.allowed_registries {
            let at = format!("{at}/allowedRegistries");
            let mut prefixes = Vec::with_capacity(registries.registries.len());
            for (i, text) in registries.registries.iter().enumerate() {
                let (prefix, trimmed) = RegistryPrefix::parse(text)
                    .map_err(|e| error(format!("{at}/registries/{i}"), e))?;
                if trimmed {
                    normalisations.push(SaveWarning::RegistryTrimmed {
                        given: text.clone(),
                        saved: prefix.clone(),
                    });
                }
                prefixes.push(prefix);
            }
            return Rule::allowed_registries(prefixes)
                .map_err(|e| list_error(&at, "registries", e));
        }
        Ok(Rule::DisallowLatestTag)
    }
}

/// Renders a policy back into its document form (what a read-back returns).
pub fn spec_of(policy: &Policy) -> PolicySpec {
    let rules = policy
        .rules()
        .iter()
        .map(|rule| match rule {
            Rule::AllowedComputePlans(entries) => RuleDoc {
                allowed_compute_plans: Some(PlansDoc {
                    plans: entries.iter().map(ToString::to_string).collect(),
                }),
                ..RuleDoc::default()
            },
            Rule::RequiredLabels(labels) => RuleDoc {
                required_labels: Some(LabelsDoc {
                    labels: labels
                        .iter()
                        .map(|l| LabelDoc {
                            key: l.key().to_string(),
                            value: l.value().map(ToString::to_string),
                        })
                        .collect(),
                }),
                ..RuleDoc::default()
            },
            Rule::AllowedRegistries(prefixes) => RuleDoc {
                allowed_registries: Some(RegistriesDoc {
                    registries: prefixes.iter().map(ToString::to_string).collect(),
                }),
                ..RuleDoc::default()
            },
            Rule::DisallowLatestTag => RuleDoc {
                disallow_latest_tag: Some(EmptyDoc {}),
                ..RuleDoc::default()
            },
        })
        .collect();
    PolicySpec {
        mode: Some(match policy.mode() {
            Mode::Enforce => ModeDoc::Enforce,
            Mode::Audit => ModeDoc::Audit,
        }),
        scope: match policy.scope() {
            Scope::AllClusters => None,
            Scope::Clusters(clusters) => Some(ScopeDoc {
                clusters: clusters.iter().map(ToString::to_string).collect(),
            }),
        },
        rules,
        rollout: policy.rollout().map(rollout_doc),
    }
}
