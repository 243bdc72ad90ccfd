//! The per-policy layout (SPEC 3.4): one `ValidatingAdmissionPolicy` and one binding per
//! policy and boundary, both named `<policy>.<boundary>.palisade.dev`.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicyBindingSpec, ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use palisade_policy::{Exception, Mode, Name, Policy};

use crate::cel::PolicyCel;
use crate::render::{labels, match_conditions, resource_rules, strings, BOUNDARY_LABEL};

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

/// Renders `policy` of `boundary` for installation `installation`; `None` when the policy has
/// no admission rules (nothing is installed for it).
pub fn render(boundary: &Name, policy: &Policy, installation: &str) -> Option<Rendered> {
    render_excepted(boundary, policy, installation, &[])
}

/// [`render`] with the exceptions in force in the cluster (SPEC 7): the API server lets the
/// objects they match past the rules they except; other policies' exceptions are ignored.
pub fn render_excepted(
    boundary: &Name,
    policy: &Policy,
    installation: &str,
    exceptions: &[&Exception],
) -> Option<Rendered> {
    let cel = PolicyCel::excepted(policy, exceptions)?;
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
