//! The per-boundary layout (`serve --admission-layout per-boundary`; docs/decisions.md, "One
//! policy object per boundary"): a boundary's policies of one mode share ONE
//! `ValidatingAdmissionPolicy` and one binding, at most [`POLICIES_PER_OBJECT`] policies each,
//! instead of one of each per policy.
//!
//! Each policy keeps its own validation, with the same expression and message expression as
//! in [`super::per_policy`]: the object holds them in policy order, the variables and match
//! conditions once. What the API server answers after `denied request: ` is therefore exactly
//! the per-policy layout's text (the message names the policy); only the object and binding
//! names in Kubernetes' wrapper differ.
//!
//! Why at most 5: the API server gives one evaluation of a policy object one runtime cost
//! budget for all its validations and message expressions, and each expression a limit of its
//! own that is a tenth of it; one palisade policy is two expressions, so an object of at most
//! 5 policies never runs out of budget where 5 objects of one policy each would not.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use palisade_policy::{Exception, Mode, Name, Policy};

use crate::cel::literal;
use crate::layout::per_policy::{self, render_excepted, Rendered, Staged};
use crate::layout::shared::MODE_LABEL;
pub use crate::layout::Rolling;
use crate::render::{labels, POLICY_LABEL};

/// The most policies one object holds (the API server's per-object cost budget).
pub const POLICIES_PER_OBJECT: usize = 5;

pub use palisade_policy::labels::POLICIES_ANNOTATION;

/// `<mode>-<n>.<boundary>.boundary.palisade.dev` (n from 1), the name of both objects. A
/// per-policy name (`<policy>.<boundary>.palisade.dev`) has one label fewer, so the two never
/// meet.
pub fn boundary_object_name(boundary: &Name, mode: Mode, n: usize) -> String {
    format!("{}-{n}.{boundary}.boundary.palisade.dev", mode.as_str())
}

/// One policy object of a boundary and the policies it holds, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct BoundaryObjects {
    pub policies: Vec<Name>,
    pub rendered: Rendered,
}

/// The policies an object holds, from its annotation (empty when it has none).
pub fn held_policies(annotations: Option<&BTreeMap<String, String>>) -> Vec<String> {
    annotations
        .and_then(|a| a.get(POLICIES_ANNOTATION))
        .map(|list| {
            list.split(',')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Renders `policies` of `boundary` (in the order given; policies without admission rules are
/// left out) as the boundary's objects: enforce-mode objects first, then audit-mode ones, at
/// most [`POLICIES_PER_OBJECT`] policies each.
pub fn render_boundary(
    boundary: &Name,
    policies: &[Policy],
    installation: &str,
) -> Vec<BoundaryObjects> {
    render_boundary_excepted(boundary, policies, installation, &[])
}

/// [`render_boundary`] with the exceptions in force in the cluster (SPEC 7).
pub fn render_boundary_excepted(
    boundary: &Name,
    policies: &[Policy],
    installation: &str,
    exceptions: &[&Exception],
) -> Vec<BoundaryObjects> {
    render_guarded(
        boundary,
        policies,
        installation,
        exceptions,
        &BTreeMap::new(),
    )
}

/// The boundary's objects while some of its policies are being rolled out: `policies` are the
/// versions in force before (a new policy being rolled out is not among them), rendered in the
/// boundary's objects as [`render_boundary_excepted`] renders them, each rolling one's
/// validation skipping the reached namespaces (`request.namespace in [...] || ...`): the
/// objects, their names and every message outside the stages stay as they were. Each new
/// version has objects of its own beside them, as in the per-policy layout
/// ([`per_policy::render_staged`], without a previous version), in the order of `rolling`.
pub fn render_boundary_staged(
    boundary: &Name,
    policies: &[Policy],
    rolling: &BTreeMap<Name, Rolling<'_>>,
    installation: &str,
    exceptions: &[&Exception],
) -> (Vec<BoundaryObjects>, Vec<Staged>) {
    let guards: BTreeMap<Name, &BTreeSet<Name>> = rolling
        .iter()
        .map(|(name, r)| (name.clone(), r.left))
        .collect();
    let objects = render_guarded(boundary, policies, installation, exceptions, &guards);
    let staged = rolling
        .values()
        .filter_map(|r| per_policy::render_staged(boundary, None, *r, installation, exceptions))
        .collect();
    (objects, staged)
}

/// `expression` that admits, without judging, requests into the namespaces `skipped`.
fn skipping(expression: &str, skipped: &BTreeSet<Name>) -> String {
    if skipped.is_empty() {
        return expression.to_owned();
    }
    let list: Vec<String> = skipped.iter().map(|n| literal(n.as_str())).collect();
    format!(
        "request.namespace in [{}] || ({expression})",
        list.join(", ")
    )
}

/// The boundary's objects, each policy named in `guards` skipping the namespaces given there.
fn render_guarded(
    boundary: &Name,
    policies: &[Policy],
    installation: &str,
    exceptions: &[&Exception],
    guards: &BTreeMap<Name, &BTreeSet<Name>>,
) -> Vec<BoundaryObjects> {
    let mut objects = Vec::new();
    for mode in [Mode::Enforce, Mode::Audit] {
        let rendered: Vec<(Name, Rendered)> = policies
            .iter()
            .filter(|p| p.mode() == mode)
            .filter_map(|p| {
                let mut rendered = render_excepted(boundary, p, installation, exceptions)?;
                if let (Some(skipped), Some(spec)) =
                    (guards.get(p.name()), rendered.policy.spec.as_mut())
                {
                    for validation in spec.validations.iter_mut().flatten() {
                        validation.expression = skipping(&validation.expression, skipped);
                    }
                }
                Some((p.name().clone(), rendered))
            })
            .collect();
        for (index, chunk) in rendered.chunks(POLICIES_PER_OBJECT).enumerate() {
            let name = boundary_object_name(boundary, mode, index + 1);
            objects.push(merge(&name, boundary, installation, mode, chunk));
        }
    }
    objects
}

/// One object of `chunk`'s policies (at least one): the first policy's object with every
/// policy's validation, and variables by name once (every policy declares the same ones).
fn merge(
    name: &str,
    boundary: &Name,
    installation: &str,
    mode: Mode,
    chunk: &[(Name, Rendered)],
) -> BoundaryObjects {
    let names: Vec<Name> = chunk.iter().map(|(n, _)| n.clone()).collect();
    let list = names.iter().map(Name::as_str).collect::<Vec<_>>().join(",");
    // The per-policy labels, with the mode instead of a policy.
    let mut object_labels = labels(installation, boundary, &names[0]);
    object_labels.remove(POLICY_LABEL);
    object_labels.insert(MODE_LABEL.to_owned(), mode.as_str().to_owned());
    let metadata = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
        name: Some(name.to_owned()),
        labels: Some(object_labels),
        annotations: Some(BTreeMap::from([(POLICIES_ANNOTATION.to_owned(), list)])),
        ..Default::default()
    };
    let mut spec = chunk[0].1.policy.spec.clone().unwrap_or_default();
    let mut validations = Vec::new();
    let mut variables = Vec::new();
    for (_, rendered) in chunk {
        let Some(own) = &rendered.policy.spec else {
            continue;
        };
        validations.extend(own.validations.iter().flatten().cloned());
        for variable in own.variables.iter().flatten() {
            if !variables.iter().any(
                |v: &k8s_openapi::api::admissionregistration::v1::Variable| v.name == variable.name,
            ) {
                variables.push(variable.clone());
            }
        }
    }
    spec.validations = Some(validations);
    spec.variables = Some(variables);
    let mut binding_spec = chunk[0].1.binding.spec.clone().unwrap_or_default();
    binding_spec.policy_name = Some(name.to_owned());
    BoundaryObjects {
        policies: names,
        rendered: Rendered {
            policy: ValidatingAdmissionPolicy {
                metadata: metadata.clone(),
                spec: Some(spec),
                status: None,
            },
            binding: ValidatingAdmissionPolicyBinding {
                metadata,
                spec: Some(binding_spec),
            },
        },
    }
}

/// The name of the object that holds `policy` when `policies` are rendered with
/// [`render_boundary`]; `None` when it holds no admission rules or is not among them.
pub fn object_holding(boundary: &Name, policies: &[Policy], policy: &Name) -> Option<String> {
    render_boundary(boundary, policies, "")
        .into_iter()
        .find(|object| object.policies.contains(policy))
        .and_then(|object| object.rendered.policy.metadata.name)
}
