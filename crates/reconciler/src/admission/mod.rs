//! The admission layouts, as a cluster sees them, behind one trait that only renders and
//! judges: what a layout prepares per cluster, which objects a policy or a boundary's policies
//! become (and which objects the cluster held that the write makes stale), which object and
//! binding judge a policy in a namespace (read from what is installed), and its enforce-mode
//! bindings (what a switch copies). No method takes a client: the pass observes the cluster
//! (`Installed`), asks the layout, and has [`InLayout::write`](crate::InLayout)
//! carry out the [`Writes`]. [`of`] is the one place a [`Layout`] is matched; a fourth layout
//! is a fourth file here, with its tests.

mod per_boundary;
mod per_policy;
mod shared;
pub(crate) mod staged;

pub(crate) use staged::Staging;

pub(crate) use shared::installation_objects;

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use palisade_policy::{Exception, Name, Policy};
use palisade_vap::per_boundary::held_policies;
use palisade_vap::render::POLICY_LABEL;
use palisade_vap::{object_name, Layout, Rendered};
use serde_json::Value;

use crate::installed::{is_ours, is_per_boundary, is_switch, Installed};
use crate::Result;

/// Which policy object and binding judge a policy in a namespace, or why none does (`not
/// enforced: <reason>`).
pub(crate) type Judge = std::result::Result<(String, String), String>;

/// One object a layout wants in the cluster, written by server-side apply as palisade.
#[derive(Clone, Debug)]
pub(crate) enum Object {
    /// A custom resource definition, written first and waited for until established.
    Definition(Value),
    Policy(Box<ValidatingAdmissionPolicy>),
    Binding(Box<ValidatingAdmissionPolicyBinding>),
    /// A parameter object (shared layout) in one namespace.
    Parameters {
        namespace: String,
        name: String,
        object: Value,
    },
}

impl Object {
    /// A policy object and its binding, in the order they are written.
    pub(crate) fn pair(rendered: Rendered) -> [Object; 2] {
        [
            Object::Policy(Box::new(rendered.policy)),
            Object::Binding(Box::new(rendered.binding)),
        ]
    }

    /// The object's name.
    pub(crate) fn name(&self) -> &str {
        match self {
            Object::Definition(value) => value["metadata"]["name"].as_str().unwrap_or_default(),
            Object::Policy(policy) => policy.metadata.name.as_deref().unwrap_or_default(),
            Object::Binding(binding) => binding.metadata.name.as_deref().unwrap_or_default(),
            Object::Parameters { name, .. } => name,
        }
    }
}

/// Objects the cluster held (the pass's read) that a write makes stale, deleted right after
/// it by their uids: bindings before the policies they bind.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Stale {
    pub bindings: Vec<ObjectMeta>,
    pub policies: Vec<ObjectMeta>,
    pub parameters: Vec<ObjectMeta>,
}

impl Stale {
    pub(crate) fn extend(&mut self, other: Stale) {
        self.bindings.extend(other.bindings);
        self.policies.extend(other.policies);
        self.parameters.extend(other.parameters);
    }

    /// Every object of `policy` in `installed`, in every layout: its own policy object and
    /// binding, the per-boundary objects that hold it and no other policy (an object that also
    /// holds others stays until the boundary is written again without it), and its parameter
    /// objects. Switch bindings are not among them.
    pub(crate) fn of_policy(
        installed: &Installed,
        installation: &str,
        boundary: &Name,
        policy: &Name,
    ) -> Stale {
        let own = object_name(boundary, policy);
        let doomed = |meta: &&ObjectMeta| {
            is_ours(meta, installation, boundary)
                && !is_switch(meta)
                && if is_per_boundary(meta) {
                    held_policies(meta.annotations.as_ref()) == [policy.to_string()]
                } else {
                    meta.name.as_deref() == Some(own.as_str())
                }
        };
        Stale {
            bindings: installed.bindings.iter().filter(doomed).cloned().collect(),
            policies: installed.policies.iter().filter(doomed).cloned().collect(),
            parameters: parameters_of(installed, installation, boundary, policy),
        }
    }
}

/// `policy`'s parameter objects of `boundary` in `installed`, in every namespace.
fn parameters_of(
    installed: &Installed,
    installation: &str,
    boundary: &Name,
    policy: &Name,
) -> Vec<ObjectMeta> {
    installed
        .parameters
        .iter()
        .filter(|meta| is_ours(meta, installation, boundary))
        .filter(|meta| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(POLICY_LABEL))
                .is_some_and(|p| p == policy.as_str())
        })
        .cloned()
        .collect()
}

/// What a layout wants done for some of a boundary's policies: the objects to write, in
/// order, and what the write makes stale.
#[derive(Clone, Debug, Default)]
pub(crate) struct Writes {
    pub objects: Vec<Object>,
    pub stale: Stale,
}

impl Writes {
    fn extend(&mut self, other: Writes) {
        self.objects.extend(other.objects);
        self.stale.extend(other.stale);
    }
}

/// What a layout renders for: the boundary, where, and what the cluster held before.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Target<'a> {
    pub installation: &'a str,
    pub boundary: &'a Name,
    /// The exceptions in force in the cluster (SPEC 7).
    pub exceptions: &'a [Exception],
    /// The boundary's namespaces in the cluster, for a layout whose objects live in them
    /// ([`AdmissionLayout::per_namespace`]); empty for the others.
    pub namespaces: &'a [String],
    /// What the cluster held before the write (this pass's read): where stale objects are
    /// found.
    pub before: &'a Installed,
    /// The boundary's policies being rolled out whose stage reached some of its namespaces
    /// in the cluster, not all, by name.
    pub staged: &'a BTreeMap<Name, Staging>,
}

impl Target<'_> {
    /// How `policy` is rolled out here, if its stage reached some namespaces but not all.
    pub(crate) fn staging(&self, policy: &Name) -> Option<&Staging> {
        self.staged.get(policy)
    }

    /// The version objects of `policy` the cluster held that its write makes stale: all but
    /// those of the version rolled out here.
    pub(crate) fn stale_versions(&self, policy: &Name) -> Stale {
        staged::stale_versions(
            self.before,
            self.installation,
            self.boundary,
            policy,
            self.staging(policy).map(|s| s.version),
        )
    }
}

/// What one layout decides in a cluster. Pure: nothing here reads or writes a cluster.
pub(crate) trait AdmissionLayout: Send + Sync {
    /// Installation-wide objects the layout needs before any boundary is written, written on
    /// every pass so that objects changed or deleted by others come back.
    fn prepare(&self, _installation: &str, _identity: &str) -> Vec<Object> {
        Vec::new()
    }

    /// Whether a boundary's policies are written together (one object holds several), so one
    /// policy cannot be written alone.
    fn writes_boundary_together(&self) -> bool {
        false
    }

    /// Whether the layout's objects live in the boundary's namespaces, so [`Target`] must
    /// carry them.
    fn per_namespace(&self) -> bool {
        false
    }

    /// One policy's writes (a policy without admission rules has its objects removed).
    fn write_policy(&self, target: &Target<'_>, policy: &Policy) -> Result<Writes>;

    /// A boundary's writes, its policies in the order given.
    fn write_boundary(&self, target: &Target<'_>, policies: &[Policy]) -> Result<Writes> {
        let mut writes = Writes::default();
        for policy in policies {
            writes.extend(self.write_policy(target, policy)?);
        }
        Ok(writes)
    }

    /// The policy object and binding that judge `policy` in `namespace`, as `installed` (read
    /// after the write) has them, or why none does.
    fn judge(
        &self,
        installed: &Installed,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        namespace: &str,
    ) -> Judge;

    /// The enforce-mode bindings of `policies` in this layout: what a switch to it copies.
    fn enforce_bindings(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding>;
}

/// The layout's value.
pub(crate) fn of(layout: Layout) -> &'static dyn AdmissionLayout {
    match layout {
        Layout::PerPolicy => &per_policy::PerPolicy,
        Layout::PerBoundary => &per_boundary::PerBoundary,
        Layout::Shared => &shared::Shared,
    }
}

/// Whether a binding denies (its actions include `Deny`).
fn denies(binding: &ValidatingAdmissionPolicyBinding) -> bool {
    binding
        .spec
        .as_ref()
        .and_then(|s| s.validation_actions.as_deref())
        .is_some_and(|actions| actions.iter().any(|a| a == "Deny"))
}

/// Builders for the layouts' tests: policies, boundaries and what a cluster holds.
#[cfg(test)]
pub(crate) mod fixtures {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use palisade_policy::{Mode, Name, PlanEntry, Policy, Rule, Scope};
    use palisade_vap::render::{BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL};

    use super::{Object, Target};
    use crate::installed::Installed;

    pub(crate) const INSTALLATION: &str = "main";

    pub(crate) fn name(text: &str) -> Name {
        Name::parse(text).expect("a test name")
    }

    /// A policy of `mode` named `policy` that disallows the `latest` tag (a rule every layout
    /// renders), or with compute plans alone (`rules: false`, nothing to admit).
    pub(crate) fn mk_policy(policy: &str, mode: Mode, rules: bool) -> Policy {
        let rule = if rules {
            Rule::DisallowLatestTag
        } else {
            Rule::AllowedComputePlans(vec![PlanEntry::parse("small").expect("a plan")])
        };
        Policy::new(name(policy), mode, Scope::AllClusters, vec![rule]).expect("a test policy")
    }

    /// The metadata of an object of `boundary` as the cluster lists it, with extra `labels`
    /// and the policies it holds (per-boundary objects).
    pub(crate) fn mk_meta(
        name: &str,
        boundary: &str,
        labels: &[(&str, &str)],
        held: Option<&str>,
    ) -> ObjectMeta {
        let mut all: BTreeMap<String, String> = [
            (MANAGED_BY_LABEL, "palisade"),
            (INSTALLATION_LABEL, INSTALLATION),
            (BOUNDARY_LABEL, boundary),
        ]
        .into_iter()
        .chain(labels.iter().copied())
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        all.retain(|_, v| !v.is_empty());
        ObjectMeta {
            name: Some(name.to_owned()),
            uid: Some(format!("uid-{name}")),
            labels: Some(all),
            annotations: held.map(|h| {
                [(
                    palisade_vap::per_boundary::POLICIES_ANNOTATION.to_owned(),
                    h.to_owned(),
                )]
                .into_iter()
                .collect()
            }),
            ..ObjectMeta::default()
        }
    }

    /// What a cluster holds after `objects` were written (their metadata, as a list reads it).
    pub(crate) fn mk_installed(objects: &[Object]) -> Installed {
        let mut installed = Installed::default();
        for object in objects {
            match object {
                Object::Policy(p) => installed.policies.push(with_uid(&p.metadata)),
                Object::Binding(b) => installed.bindings.push(with_uid(&b.metadata)),
                Object::Parameters {
                    namespace,
                    name,
                    object,
                } => {
                    let mut meta: ObjectMeta =
                        serde_json::from_value(object["metadata"].clone()).expect("metadata");
                    meta.namespace = Some(namespace.clone());
                    meta.name = Some(name.clone());
                    installed.parameters.push(with_uid(&meta));
                }
                Object::Definition(_) => {}
            }
        }
        installed
    }

    fn with_uid(meta: &ObjectMeta) -> ObjectMeta {
        ObjectMeta {
            uid: Some(format!("uid-{}", meta.name.clone().unwrap_or_default())),
            ..meta.clone()
        }
    }

    pub(crate) fn mk_target<'a>(
        boundary: &'a Name,
        namespaces: &'a [String],
        before: &'a Installed,
    ) -> Target<'a> {
        Target {
            installation: INSTALLATION,
            boundary,
            exceptions: &[],
            namespaces,
            before,
            staged: &NONE_STAGED,
        }
    }

    /// No policy being rolled out.
    pub(crate) static NONE_STAGED: std::collections::BTreeMap<Name, super::Staging> =
        std::collections::BTreeMap::new();

    /// The names of the objects, in the order written.
    pub(crate) fn names(objects: &[Object]) -> Vec<String> {
        objects.iter().map(|o| o.name().to_owned()).collect()
    }

    /// The names of the metadata given.
    pub(crate) fn meta_names(metas: &[ObjectMeta]) -> Vec<String> {
        metas.iter().filter_map(|m| m.name.clone()).collect()
    }
}
