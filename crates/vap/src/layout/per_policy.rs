//! The per-policy layout (SPEC 3.4): one `ValidatingAdmissionPolicy` and one binding per
//! policy and boundary, both named `<policy>.<boundary>.palisade.dev`.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicyBindingSpec, ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use palisade_policy::{Exception, Mode, Name, Policy};

use crate::cel::PolicyCel;
use crate::layout::Rolling;
use crate::render::{
    labels, match_conditions, resource_rules, strings, BOUNDARY_LABEL, VERSION_LABEL,
};

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
    let vap = policy_object(metadata.clone(), cel);
    let binding = binding_object(metadata, name, actions(policy.mode()), boundary, None);
    Some(Rendered {
        policy: vap,
        binding,
    })
}

/// The validation actions of a binding in `mode`.
fn actions(mode: Mode) -> &'static [&'static str] {
    match mode {
        Mode::Enforce => &["Deny"],
        Mode::Audit => &["Warn", "Audit"],
    }
}

/// The policy object of `cel`, with `metadata`.
fn policy_object(metadata: ObjectMeta, cel: PolicyCel) -> ValidatingAdmissionPolicy {
    let PolicyCel {
        variables,
        expression,
        message_expression,
        message,
    } = cel;
    ValidatingAdmissionPolicy {
        metadata,
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
    }
}

/// A binding of policy object `policy_name` with `actions` to the namespaces of `boundary`;
/// with `names`, only to (`In`) or all but (`NotIn`) the namespaces of those names, by the
/// name the API server sets (`kubernetes.io/metadata.name`), which no tenant can change.
fn binding_object(
    metadata: ObjectMeta,
    policy_name: String,
    actions: &[&str],
    boundary: &Name,
    names: Option<(&str, &BTreeSet<Name>)>,
) -> ValidatingAdmissionPolicyBinding {
    let match_expressions = names.map(|(operator, names)| {
        vec![LabelSelectorRequirement {
            key: NAMESPACE_NAME_LABEL.to_owned(),
            operator: operator.to_owned(),
            values: Some(names.iter().map(ToString::to_string).collect()),
        }]
    });
    ValidatingAdmissionPolicyBinding {
        metadata,
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(policy_name),
            validation_actions: strings(actions),
            match_resources: Some(MatchResources {
                namespace_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        BOUNDARY_LABEL.to_owned(),
                        boundary.to_string(),
                    )])),
                    match_expressions,
                }),
                ..MatchResources::default()
            }),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    }
}

/// The label the API server sets on every namespace: its name.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

/// `<policy>.<boundary>.v<version>.palisade.dev`: the objects of a version being rolled out
/// (SPEC 8), beside the ones of the version in force before, which keep their names.
pub fn version_object_name(boundary: &Name, policy: &Name, version: u64) -> String {
    format!("{policy}.{boundary}.v{version}.palisade.dev")
}

/// `<policy>.<boundary>.v<version>.audit.palisade.dev`: the binding that runs a version being
/// rolled out in audit where its stage has not reached.
pub fn version_audit_binding_name(boundary: &Name, policy: &Name, version: u64) -> String {
    format!("{policy}.{boundary}.v{version}.audit.palisade.dev")
}

/// A policy change being rolled out (SPEC 8) in this layout, while its stage has reached some
/// of the boundary's namespaces in the cluster (not all: then it is [`render_excepted`] of the
/// new version).
#[derive(Clone, Debug, PartialEq)]
pub struct Staged {
    /// The version in force before, exactly as before (its names, its mode), bound to every
    /// namespace of the boundary but the reached ones. `None` for a new policy, or one whose
    /// previous version had no admission rules.
    pub previous: Option<Rendered>,
    /// The new version's policy object.
    pub policy: ValidatingAdmissionPolicy,
    /// Its bindings: in its own mode to the reached namespaces (none when none is reached), and
    /// in audit (warnings and audit annotations) to every other namespace of the boundary.
    pub bindings: Vec<ValidatingAdmissionPolicyBinding>,
}

/// The annotation of a version's binding that names the namespaces it judges in
/// (`web,api`): what a later pass reads back to know which of them the version holds already.
pub const REACHED_ANNOTATION: &str = "palisade.dev/reached";

/// The annotation of the same binding that names the reached namespaces the version before
/// had left when it was written.
pub const LEFT_ANNOTATION: &str = "palisade.dev/left";

/// Renders a rollout (`rolling`: the version, the namespaces of `boundary` its stage reached,
/// maybe none, and of those the ones `previous` has left) over `previous` in a cluster.
/// `previous` still judges the reached namespaces it has not left, beside the new version,
/// until the new version is surely in force there (make before break). `None` when the version
/// has no admission rules (nothing of it is installed). The new version's binding for the
/// reached namespaces names them in its annotation [`REACHED_ANNOTATION`].
pub fn render_staged(
    boundary: &Name,
    previous: Option<&Policy>,
    rolling: Rolling<'_>,
    installation: &str,
    exceptions: &[&Exception],
) -> Option<Staged> {
    let Rolling {
        current,
        version,
        reached,
        left,
    } = rolling;
    let cel = PolicyCel::excepted(current, exceptions)?;
    let previous = previous.and_then(|previous| {
        let mut rendered = render_excepted(boundary, previous, installation, exceptions)?;
        if !left.is_empty() {
            let metadata = rendered.binding.metadata.clone();
            let policy_name = object_name(boundary, previous.name());
            rendered.binding = binding_object(
                metadata,
                policy_name,
                actions(previous.mode()),
                boundary,
                Some(("NotIn", left)),
            );
        }
        Some(rendered)
    });
    let name = version_object_name(boundary, current.name(), version);
    let metadata = |name: String| {
        let mut labels = labels(installation, boundary, current.name());
        labels.insert(VERSION_LABEL.to_owned(), version.to_string());
        ObjectMeta {
            name: Some(name),
            labels: Some(labels),
            ..ObjectMeta::default()
        }
    };
    let policy = policy_object(metadata(name.clone()), cel);
    let mut bindings = Vec::with_capacity(2);
    if !reached.is_empty() {
        let mut meta = metadata(name.clone());
        let joined =
            |set: &BTreeSet<Name>| set.iter().map(Name::as_str).collect::<Vec<_>>().join(",");
        meta.annotations = Some(
            [
                (REACHED_ANNOTATION.to_owned(), joined(reached)),
                (LEFT_ANNOTATION.to_owned(), joined(left)),
            ]
            .into(),
        );
        bindings.push(binding_object(
            meta,
            name.clone(),
            actions(current.mode()),
            boundary,
            Some(("In", reached)),
        ));
    }
    let outside = (!reached.is_empty()).then_some(("NotIn", reached));
    bindings.push(binding_object(
        metadata(version_audit_binding_name(
            boundary,
            current.name(),
            version,
        )),
        name,
        actions(Mode::Audit),
        boundary,
        outside,
    ));
    Some(Staged {
        previous,
        policy,
        bindings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_policy::{Rule, Scope};

    fn name(text: &str) -> Name {
        Name::parse(text).unwrap()
    }

    fn mk_policy(mode: Mode) -> Policy {
        Policy::new(
            name("trusted"),
            mode,
            Scope::AllClusters,
            vec![Rule::DisallowLatestTag],
        )
        .unwrap()
    }

    /// (name, policy name, actions, `kubernetes.io/metadata.name` operator and values).
    fn shape(binding: &ValidatingAdmissionPolicyBinding) -> (String, String, Vec<String>, String) {
        let spec = binding.spec.as_ref().unwrap();
        let selector = spec
            .match_resources
            .as_ref()
            .unwrap()
            .namespace_selector
            .as_ref()
            .unwrap();
        assert_eq!(
            selector.match_labels.as_ref().unwrap()[BOUNDARY_LABEL],
            "shop"
        );
        let names = match &selector.match_expressions {
            None => "all".to_owned(),
            Some(expressions) => {
                assert_eq!(expressions.len(), 1);
                assert_eq!(expressions[0].key, NAMESPACE_NAME_LABEL);
                format!(
                    "{} {}",
                    expressions[0].operator,
                    expressions[0].values.as_ref().unwrap().join(",")
                )
            }
        };
        (
            binding.metadata.name.clone().unwrap(),
            spec.policy_name.clone().unwrap(),
            spec.validation_actions.clone().unwrap(),
            names,
        )
    }

    fn row(
        name: &str,
        policy: &str,
        actions: &[&str],
        names: &str,
    ) -> (String, String, Vec<String>, String) {
        (
            name.to_owned(),
            policy.to_owned(),
            actions.iter().map(|a| (*a).to_owned()).collect(),
            names.to_owned(),
        )
    }

    #[test]
    fn a_stage_splits_the_boundary_between_the_versions_by_namespace_name() {
        let boundary = name("shop");
        let reached: BTreeSet<Name> = [name("web"), name("api")].into();
        // The version before has left `web` already; in `api` both judge for a moment.
        let left: BTreeSet<Name> = [name("web")].into();
        let previous = mk_policy(Mode::Enforce);
        let current = mk_policy(Mode::Enforce);
        let rolling = Rolling {
            current: &current,
            version: 4,
            reached: &reached,
            left: &left,
        };
        let staged = render_staged(&boundary, Some(&previous), rolling, "inst", &[]).unwrap();
        let before = staged.previous.unwrap();
        // The previous version keeps its names and mode, everywhere but the namespaces it left.
        assert_eq!(
            before.policy,
            render(&boundary, &previous, "inst").unwrap().policy
        );
        assert_eq!(
            shape(&before.binding),
            row(
                "trusted.shop.palisade.dev",
                "trusted.shop.palisade.dev",
                &["Deny"],
                "NotIn web"
            )
        );
        assert_eq!(
            staged.policy.metadata.name.as_deref(),
            Some("trusted.shop.v4.palisade.dev")
        );
        let bindings: Vec<_> = staged.bindings.iter().map(shape).collect();
        assert_eq!(
            bindings,
            [
                row(
                    "trusted.shop.v4.palisade.dev",
                    "trusted.shop.v4.palisade.dev",
                    &["Deny"],
                    "In api,web"
                ),
                row(
                    "trusted.shop.v4.audit.palisade.dev",
                    "trusted.shop.v4.palisade.dev",
                    &["Warn", "Audit"],
                    "NotIn api,web"
                ),
            ]
        );
        assert_eq!(
            staged.bindings[0].metadata.annotations,
            Some(
                [
                    (REACHED_ANNOTATION.to_owned(), "api,web".to_owned()),
                    (LEFT_ANNOTATION.to_owned(), "web".to_owned()),
                ]
                .into()
            )
        );
        // The new version's object validates as the version does when it is in force.
        assert_eq!(
            staged.policy.spec,
            render(&boundary, &mk_policy(Mode::Enforce), "inst")
                .unwrap()
                .policy
                .spec
        );
    }

    #[test]
    fn before_a_stage_reaches_a_namespace_the_new_version_only_audits() {
        let boundary = name("shop");
        let none = BTreeSet::new();
        let previous = mk_policy(Mode::Audit);
        let current = mk_policy(Mode::Enforce);
        let rolling = |current| Rolling {
            current,
            version: 2,
            reached: &none,
            left: &none,
        };
        let staged =
            render_staged(&boundary, Some(&previous), rolling(&current), "inst", &[]).unwrap();
        // Nothing reached: the previous version exactly as before.
        assert_eq!(staged.previous, render(&boundary, &previous, "inst"));
        let bindings: Vec<_> = staged.bindings.iter().map(shape).collect();
        assert_eq!(
            bindings,
            [row(
                "trusted.shop.v2.audit.palisade.dev",
                "trusted.shop.v2.palisade.dev",
                &["Warn", "Audit"],
                "all"
            )]
        );
        // A new policy has no previous version.
        let new = render_staged(&boundary, None, rolling(&previous), "inst", &[]).unwrap();
        assert_eq!(new.previous, None);
    }
}
