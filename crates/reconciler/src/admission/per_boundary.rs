//! One policy object and binding per boundary and mode, at most 5 policies each
//! (`palisade_vap::per_boundary`): a boundary's policies are written together, and an object
//! is found again by the policies it holds (its annotation).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use palisade_policy::{Exception, Name, Policy};
use palisade_vap::per_boundary::{held_policies, render_boundary_staged, Rolling};
use palisade_vap::render_boundary;

use super::{denies, AdmissionLayout, Judge, Object, Stale, Target, Writes};
use crate::installed::{is_ours, is_per_boundary, is_switch, Installed};
use crate::{ReconcileError, Result};

pub(super) struct PerBoundary;

impl AdmissionLayout for PerBoundary {
    fn writes_boundary_together(&self) -> bool {
        true
    }

    fn write_policy(&self, _target: &Target<'_>, policy: &Policy) -> Result<Writes> {
        Err(ReconcileError::WholeBoundary(policy.name().to_string()))
    }

    /// The boundary's objects, enforce-mode objects first, each policy object before its
    /// binding; stale: the boundary's per-boundary objects the cluster held that the rendering
    /// no longer has. A policy moving from one object to another is in both for that moment,
    /// never in neither; an unchanged rendering writes the same objects again (which changes
    /// nothing).
    fn write_boundary(&self, target: &Target<'_>, policies: &[Policy]) -> Result<Writes> {
        let exceptions: Vec<&Exception> = target.exceptions.iter().collect();
        // A policy being rolled out: the boundary's objects hold the version in force before
        // (skipping the reached namespaces), and the new version has objects of its own.
        let before: Vec<Policy> = policies
            .iter()
            .filter_map(|p| match target.staging(p.name()) {
                Some(staging) => staging.previous.clone(),
                None => Some(p.clone()),
            })
            .collect();
        let rolling: BTreeMap<Name, Rolling<'_>> = policies
            .iter()
            .filter_map(|p| {
                let staging = target.staging(p.name())?;
                let rolling = Rolling {
                    current: p,
                    version: staging.version,
                    reached: &staging.reached,
                    left: &staging.left,
                };
                Some((p.name().clone(), rolling))
            })
            .collect();
        let (rendered, staged) = render_boundary_staged(
            target.boundary,
            &before,
            &rolling,
            target.installation,
            &exceptions,
        );
        // The new versions' objects first (make before break).
        let mut objects: Vec<Object> = Vec::new();
        for version in staged {
            objects.push(Object::Policy(Box::new(version.policy)));
            objects.extend(
                version
                    .bindings
                    .into_iter()
                    .map(|b| Object::Binding(Box::new(b))),
            );
        }
        objects.extend(rendered.into_iter().flat_map(|o| Object::pair(o.rendered)));
        let written: BTreeSet<&str> = objects.iter().map(Object::name).collect();
        let doomed = |meta: &&ObjectMeta| {
            is_ours(meta, target.installation, target.boundary)
                && is_per_boundary(meta)
                && !is_switch(meta)
                && meta.name.as_deref().is_some_and(|n| !written.contains(n))
        };
        let mut stale = Stale {
            bindings: target
                .before
                .bindings
                .iter()
                .filter(doomed)
                .cloned()
                .collect(),
            policies: target
                .before
                .policies
                .iter()
                .filter(doomed)
                .cloned()
                .collect(),
            parameters: Vec::new(),
        };
        for policy in policies {
            stale.extend(target.stale_versions(policy.name()));
        }
        Ok(Writes { objects, stale })
    }

    /// The first object by name that holds the policy (a change may leave it in two for a
    /// moment).
    fn judge(
        &self,
        installed: &Installed,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        _namespace: &str,
    ) -> Judge {
        let holder = installed
            .policies
            .iter()
            .filter(|m| is_ours(m, installation, boundary) && is_per_boundary(m))
            .filter(|m| {
                held_policies(m.annotations.as_ref())
                    .iter()
                    .any(|h| h == policy.name().as_str())
            })
            .filter_map(|m| m.name.clone())
            .min();
        match holder {
            Some(name) => Ok((name.clone(), name)),
            None => Err(format!(
                "no ValidatingAdmissionPolicy of palisade's holding policy '{}' is installed",
                policy.name()
            )),
        }
    }

    fn enforce_bindings(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding> {
        render_boundary(boundary, policies, installation)
            .into_iter()
            .map(|o| o.rendered.binding)
            .filter(denies)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use palisade_policy::Mode;
    use palisade_vap::render::{POLICY_LABEL, SWITCH_LABEL};
    use palisade_vap::shared::MODE_LABEL;
    use palisade_vap::Layout;

    use super::super::fixtures::*;
    use super::super::of;
    use crate::installed::Installed;
    use crate::ReconcileError;

    #[test]
    fn a_policy_alone_is_refused_the_boundary_is_written_together() {
        let layout = of(Layout::PerBoundary);
        let (shop, before) = (name("shop"), Installed::default());
        let tags = mk_policy("tags", Mode::Enforce, true);
        assert!(layout.writes_boundary_together());
        assert!(matches!(
            layout.write_policy(&mk_target(&shop, &[], &before), &tags),
            Err(ReconcileError::WholeBoundary(p)) if p == "tags"
        ));
        let policies = [tags, mk_policy("audited", Mode::Audit, true)];
        let writes = layout
            .write_boundary(&mk_target(&shop, &[], &before), &policies)
            .expect("writes");
        // One object and binding per mode, enforce first.
        let names = names(&writes.objects);
        assert_eq!(names.len(), 4, "{names:?}");
        assert_eq!(names[0], names[1]);
        assert_eq!(names[2], names[3]);
        assert!(names[0].contains("enforce"), "{names:?}");
        assert_eq!(writes.stale, super::super::Stale::default());
    }

    #[test]
    fn objects_the_rendering_no_longer_has_are_stale_but_not_switch_bindings_or_other_layouts() {
        let layout = of(Layout::PerBoundary);
        let shop = name("shop");
        let policies = [mk_policy("tags", Mode::Enforce, true)];
        let fresh = layout
            .write_boundary(&mk_target(&shop, &[], &Installed::default()), &policies)
            .expect("writes");
        let mut before = mk_installed(&fresh.objects);
        let gone = mk_meta(
            "shop.audit-0",
            "shop",
            &[(MODE_LABEL, "audit")],
            Some("old"),
        );
        let switch = mk_meta(
            "shop.audit-0.switch",
            "shop",
            &[(MODE_LABEL, "audit"), (SWITCH_LABEL, "true")],
            Some("old"),
        );
        let per_policy = mk_meta(
            "old.shop.palisade.dev",
            "shop",
            &[(POLICY_LABEL, "old")],
            None,
        );
        let other_boundary = mk_meta("web.audit-0", "web", &[(MODE_LABEL, "audit")], Some("x"));
        before
            .policies
            .extend([gone.clone(), per_policy.clone(), other_boundary]);
        before.bindings.extend([gone, switch, per_policy]);
        let writes = layout
            .write_boundary(&mk_target(&shop, &[], &before), &policies)
            .expect("writes");
        assert_eq!(meta_names(&writes.stale.policies), ["shop.audit-0"]);
        assert_eq!(meta_names(&writes.stale.bindings), ["shop.audit-0"]);
    }

    #[test]
    fn a_policy_is_judged_by_the_first_object_holding_it() {
        let layout = of(Layout::PerBoundary);
        let shop = name("shop");
        let tags = mk_policy("tags", Mode::Enforce, true);
        let installed = Installed {
            policies: vec![
                mk_meta(
                    "shop.enforce-1",
                    "shop",
                    &[(MODE_LABEL, "enforce")],
                    Some("tags"),
                ),
                mk_meta(
                    "shop.enforce-0",
                    "shop",
                    &[(MODE_LABEL, "enforce")],
                    Some("a,tags"),
                ),
                mk_meta(
                    "shop.enforce-2",
                    "shop",
                    &[(MODE_LABEL, "enforce")],
                    Some("other"),
                ),
            ],
            ..Installed::default()
        };
        assert_eq!(
            layout.judge(&installed, INSTALLATION, &shop, &tags, "shop-a"),
            Ok(("shop.enforce-0".to_owned(), "shop.enforce-0".to_owned()))
        );
        let missing = mk_policy("missing", Mode::Enforce, true);
        assert_eq!(
            layout.judge(&installed, INSTALLATION, &shop, &missing, "shop-a"),
            Err(
                "no ValidatingAdmissionPolicy of palisade's holding policy 'missing' is installed"
                    .to_owned()
            )
        );
    }
}
