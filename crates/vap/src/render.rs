//! The Kubernetes objects of one policy in one cluster.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use palisade_policy::{Mode, Name, Policy};

use crate::cel::{self, PolicyCel, MATCH_CONDITIONS};

/// The server-side-apply field manager of every object palisade writes.
pub const FIELD_MANAGER: &str = "palisade";
/// The namespace label that puts a namespace in a boundary.
pub const BOUNDARY_LABEL: &str = "palisade.dev/boundary";
pub const INSTALLATION_LABEL: &str = "palisade.dev/installation";
pub const POLICY_LABEL: &str = "palisade.dev/policy";
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";

/// The subresource through which ephemeral containers are added to a Pod.
pub const EPHEMERAL_CONTAINERS_RESOURCE: &str = "pods/ephemeralcontainers";

/// The Pod status subresource, through which labels could otherwise change unjudged.
pub const POD_STATUS_RESOURCE: &str = "pods/status";

/// A policy's objects, applied policy first, deleted binding first.
#[derive(Clone, Debug, PartialEq)]
pub struct Rendered {
    pub policy: ValidatingAdmissionPolicy,
    pub binding: ValidatingAdmissionPolicyBinding,
}

/// `<policy>.<boundary>.palisade.dev`, the name of both objects.
pub fn object_name(boundary: &Name, policy: &Name) -> String {
    format!("{policy}.{boundary}.palisade.dev")
}

/// The labels that mark an object as palisade's.
pub fn labels(installation: &str, boundary: &Name, policy: &Name) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), "palisade".to_owned()),
        (INSTALLATION_LABEL.to_owned(), installation.to_owned()),
        (BOUNDARY_LABEL.to_owned(), boundary.to_string()),
        (POLICY_LABEL.to_owned(), policy.to_string()),
    ])
}

fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| (*s).to_owned()).collect())
}

/// The rules matching the kinds palisade checks (SPEC 3.1), one per API group.
pub(crate) fn resource_rules() -> Vec<NamedRuleWithOperations> {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (group, resource) in cel::matched_resources() {
        by_group.entry(group).or_default().push(resource);
    }
    // `kubectl debug` adds ephemeral containers through this subresource (SPEC 3.2, v3.1);
    // a Pod's status subresource keeps the labels an update sends (judged only when they
    // change: see `MATCH_CONDITIONS`).
    by_group
        .entry("")
        .or_default()
        .extend([EPHEMERAL_CONTAINERS_RESOURCE, POD_STATUS_RESOURCE]);
    by_group
        .into_iter()
        .map(|(group, resources)| NamedRuleWithOperations {
            api_groups: strings(&[group]),
            api_versions: strings(&["*"]),
            operations: strings(&["CREATE", "UPDATE"]),
            resources: Some(resources.into_iter().map(str::to_owned).collect()),
            scope: Some("Namespaced".to_owned()),
            ..NamedRuleWithOperations::default()
        })
        .collect()
}

/// The exemptions of SPEC 3.1 as match conditions.
pub(crate) fn match_conditions() -> Vec<MatchCondition> {
    MATCH_CONDITIONS
        .iter()
        .map(|(name, expression)| MatchCondition {
            name: (*name).to_owned(),
            expression: (*expression).to_owned(),
        })
        .collect()
}

/// Renders `policy` of `boundary` for installation `installation`; `None` when the policy has
/// no admission rules (nothing is installed for it).
pub fn render(boundary: &Name, policy: &Policy, installation: &str) -> Option<Rendered> {
    let cel = PolicyCel::of(policy)?;
    let name = object_name(boundary, policy.name());
    let metadata = ObjectMeta {
        name: Some(name.clone()),
        labels: Some(labels(installation, boundary, policy.name())),
        ..ObjectMeta::default()
    };
    let PolicyCel {
        variables,
        expression,
        message_expression,
        message,
    } = cel;
    let vap = ValidatingAdmissionPolicy {
        metadata: metadata.clone(),
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                match_policy: Some("Equivalent".to_owned()),
                resource_rules: Some(resource_rules()),
                ..MatchResources::default()
            }),
            match_conditions: Some(match_conditions()),
            variables: Some(
                variables
                    .into_iter()
                    .map(|(name, expression)| Variable { name, expression })
                    .collect(),
            ),
            validations: Some(vec![Validation {
                expression,
                message: Some(message),
                message_expression: Some(message_expression),
                reason: None,
            }]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    };
    let actions: &[&str] = match policy.mode() {
        Mode::Enforce => &["Deny"],
        Mode::Audit => &["Warn", "Audit"],
    };
    let binding = ValidatingAdmissionPolicyBinding {
        metadata,
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name),
            validation_actions: strings(actions),
            match_resources: Some(MatchResources {
                namespace_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        BOUNDARY_LABEL.to_owned(),
                        boundary.to_string(),
                    )])),
                    ..LabelSelector::default()
                }),
                ..MatchResources::default()
            }),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    };
    Some(Rendered {
        policy: vap,
        binding,
    })
}
