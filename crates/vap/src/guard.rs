//! The boundary-label guard (SPEC 3.4): one policy and binding per installation and cluster that
//! deny adding, changing or removing a namespace's `palisade.dev/boundary` label by anyone but
//! palisade's own identity.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use crate::cel::literal;
use crate::layout::per_policy::Rendered;
use crate::render::{BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL};

/// The static message, shown only if the message expression itself fails.
pub const GUARD_STATIC_MESSAGE: &str = "The label palisade.dev/boundary is managed by palisade.";

/// `<installation>.boundary-label-guard.palisade.dev`, the name of both objects.
pub fn guard_name(installation: &str) -> String {
    format!("{installation}.boundary-label-guard.palisade.dev")
}

/// The message a denied namespace request shows:
/// `The label palisade.dev/boundary on namespace '<ns>' is managed by palisade.`
pub fn guard_message(namespace: &str) -> String {
    format!("The label {BOUNDARY_LABEL} on namespace '{namespace}' is managed by palisade.")
}

/// The labels of the guard's objects: palisade's and the installation's (no boundary: the
/// guard belongs to the installation, so a boundary's garbage collection never selects it).
pub fn guard_labels(installation: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), "palisade".to_owned()),
        (INSTALLATION_LABEL.to_owned(), installation.to_owned()),
    ])
}

/// The label's value on `var` (`object` or `oldObject`) as a list of zero or one strings, so
/// "absent" compares unequal to every value without a `null`.
fn label_list(var: &str) -> String {
    let key = literal(BOUNDARY_LABEL);
    format!("has({var}.metadata.labels) && {key} in {var}.metadata.labels ? [{var}.metadata.labels[{key}]] : []")
}

/// Renders the guard of `installation`; `identity` (a user name, as a `SelfSubjectReview`
/// reports it) is the only one allowed to add, change or remove the label.
pub fn boundary_label_guard(installation: &str, identity: &str) -> Rendered {
    let name = guard_name(installation);
    let metadata = ObjectMeta {
        name: Some(name.clone()),
        labels: Some(guard_labels(installation)),
        ..ObjectMeta::default()
    };
    let message_expression = format!(
        "{} + object.metadata.name + {}",
        literal(&format!("The label {BOUNDARY_LABEL} on namespace '")),
        literal("' is managed by palisade.")
    );
    let policy = ValidatingAdmissionPolicy {
        metadata: metadata.clone(),
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                match_policy: Some("Equivalent".to_owned()),
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec![String::new()]),
                    api_versions: Some(vec!["*".to_owned()]),
                    operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
                    // Every way a namespace's labels change: the main resource, and the
                    // status and finalize subresources, whose updates keep the labels sent.
                    resources: Some(
                        ["namespaces", "namespaces/status", "namespaces/finalize"]
                            .map(str::to_owned)
                            .to_vec(),
                    ),
                    scope: Some("Cluster".to_owned()),
                    ..NamedRuleWithOperations::default()
                }]),
                ..MatchResources::default()
            }),
            variables: Some(vec![
                Variable {
                    name: "newLabel".to_owned(),
                    expression: label_list("object"),
                },
                Variable {
                    name: "oldLabel".to_owned(),
                    // oldObject is null on CREATE: `&&` stops before it is read.
                    expression: format!(
                        "request.operation == 'UPDATE' && {}",
                        label_list("oldObject")
                    ),
                },
            ]),
            validations: Some(vec![Validation {
                expression: format!(
                    "request.userInfo.username == {} || variables.newLabel == variables.oldLabel",
                    literal(identity)
                ),
                message: Some(GUARD_STATIC_MESSAGE.to_owned()),
                message_expression: Some(message_expression),
                reason: None,
            }]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    };
    let binding = ValidatingAdmissionPolicyBinding {
        metadata,
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    };
    Rendered { policy, binding }
}

/// `<installation>.parameters-guard.palisade.dev`, the name of both objects of the parameters
/// guard (shared layout).
pub fn parameters_guard_name(installation: &str) -> String {
    format!("{installation}.parameters-guard.palisade.dev")
}

/// The message a denied change of a parameter object shows:
/// `The BoundaryPolicy '<name>' in namespace '<ns>' is managed by palisade.`
pub fn parameters_guard_message(name: &str, namespace: &str) -> String {
    format!("The BoundaryPolicy '{name}' in namespace '{namespace}' is managed by palisade.")
}

/// The static message of the parameters guard, shown only if its message expression fails.
pub const PARAMETERS_GUARD_STATIC_MESSAGE: &str =
    "palisade's BoundaryPolicy parameter objects are managed by palisade.";

/// Renders the shared layout's parameters guard of `installation`: the parameter objects
/// (`BoundaryPolicy`, in the namespaces of boundaries, where tenants may hold every right)
/// can be created, changed or deleted only by `identity` (palisade's own user) and by
/// Kubernetes' controllers (the namespace controller deletes a terminating namespace's
/// content). Without it a tenant with `*` in its namespace could delete or edit them and so
/// switch its boundary's policies off there.
pub fn parameters_guard(installation: &str, identity: &str) -> Rendered {
    use crate::layout::shared::{PARAMS_GROUP, PARAMS_PLURAL};
    let name = parameters_guard_name(installation);
    let metadata = ObjectMeta {
        name: Some(name.clone()),
        labels: Some(guard_labels(installation)),
        ..ObjectMeta::default()
    };
    let (head, rest) = ("The BoundaryPolicy '", "' in namespace '");
    let message_expression = format!(
        "{} + (request.operation == 'DELETE' ? oldObject : object).metadata.name + {} + request.namespace + {}",
        literal(head),
        literal(rest),
        literal("' is managed by palisade.")
    );
    let policy = ValidatingAdmissionPolicy {
        metadata: metadata.clone(),
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                match_policy: Some("Equivalent".to_owned()),
                // Matched on the old object too (UPDATE, DELETE): removing the label does not
                // take an object out of the guard.
                object_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        INSTALLATION_LABEL.to_owned(),
                        installation.to_owned(),
                    )])),
                    ..LabelSelector::default()
                }),
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec![PARAMS_GROUP.to_owned()]),
                    api_versions: Some(vec!["*".to_owned()]),
                    operations: Some(
                        ["CREATE", "UPDATE", "DELETE"]
                            .map(str::to_owned)
                            .to_vec(),
                    ),
                    resources: Some(vec![PARAMS_PLURAL.to_owned()]),
                    scope: Some("Namespaced".to_owned()),
                    ..NamedRuleWithOperations::default()
                }]),
                ..MatchResources::default()
            }),
            validations: Some(vec![Validation {
                expression: format!(
                    "request.userInfo.username == {} || request.userInfo.username == 'system:kube-controller-manager' || request.userInfo.username.startsWith('system:serviceaccount:kube-system:')",
                    literal(identity)
                ),
                message: Some(PARAMETERS_GUARD_STATIC_MESSAGE.to_owned()),
                message_expression: Some(message_expression),
                reason: None,
            }]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    };
    let binding = ValidatingAdmissionPolicyBinding {
        metadata,
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    };
    Rendered { policy, binding }
}
