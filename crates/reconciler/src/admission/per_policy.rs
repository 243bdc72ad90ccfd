//! One policy object and binding per policy and boundary (SPEC 3.4), both named
//! `<policy>.<boundary>.palisade.dev`.

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use palisade_policy::{Exception, Mode, Name, Policy};
use palisade_vap::per_boundary::Rolling;
use palisade_vap::per_policy::render_staged;
use palisade_vap::{object_name, render, render_excepted};

use super::{denies, staged, AdmissionLayout, Judge, Object, Staging, Stale, Target, Writes};
use crate::installed::{is_ours, Installed};
use crate::Result;

pub(super) struct PerPolicy;

impl AdmissionLayout for PerPolicy {
    fn write_policy(&self, target: &Target<'_>, policy: &Policy) -> Result<Writes> {
        let exceptions: Vec<&Exception> = target.exceptions.iter().collect();
        let mut writes = match target.staging(policy.name()) {
            Some(staging) => staged_writes(target, policy, staging, &exceptions),
            None => written(target, policy, &exceptions),
        };
        writes.stale.extend(target.stale_versions(policy.name()));
        Ok(writes)
    }

    fn judge(
        &self,
        installed: &Installed,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        _namespace: &str,
    ) -> Judge {
        let name = object_name(boundary, policy.name());
        let present = installed.policies.iter().any(|m| {
            m.name.as_deref() == Some(name.as_str()) && is_ours(m, installation, boundary)
        });
        if present {
            Ok((name.clone(), name))
        } else {
            Err(format!(
                "palisade's ValidatingAdmissionPolicy '{name}' is not installed"
            ))
        }
    }

    fn enforce_bindings(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding> {
        policies
            .iter()
            .filter(|p| p.mode() == Mode::Enforce)
            .filter_map(|p| render(boundary, p, installation))
            .map(|r| r.binding)
            .filter(denies)
            .collect()
    }
}

/// The policy's object and binding of one name.
fn written(target: &Target<'_>, policy: &Policy, exceptions: &[&Exception]) -> Writes {
    match render_excepted(target.boundary, policy, target.installation, exceptions) {
        Some(rendered) => Writes {
            objects: Object::pair(rendered).into(),
            stale: Stale::default(),
        },
        // No admission rules: whatever an earlier version wrote goes, in every layout.
        None => Writes {
            objects: Vec::new(),
            stale: Stale::of_policy(
                target.before,
                target.installation,
                target.boundary,
                policy.name(),
            ),
        },
    }
}

/// A policy being rolled out: the version in force before keeps its object and binding of one
/// name, bound to every namespace but the reached ones, beside the new version's objects. A
/// new policy has no such objects: whatever it had goes.
fn staged_writes(
    target: &Target<'_>,
    policy: &Policy,
    staging: &Staging,
    exceptions: &[&Exception],
) -> Writes {
    let rolling = Rolling {
        current: policy,
        version: staging.version,
        reached: &staging.reached,
        left: &staging.left,
    };
    let rendered = render_staged(
        target.boundary,
        staging.previous.as_ref(),
        rolling,
        target.installation,
        exceptions,
    );
    let Some(rendered) = rendered else {
        return written(target, policy, exceptions);
    };
    // The new version's objects first: the API server never sees the version before leave a
    // namespace before the new version's binding for it.
    let mut writes = Writes {
        objects: staged::version_objects(
            target.boundary,
            policy,
            staging,
            target.installation,
            exceptions,
        ),
        stale: Stale::default(),
    };
    match rendered.previous {
        Some(previous) => writes.objects.extend(Object::pair(previous)),
        None => {
            let own = object_name(target.boundary, policy.name());
            let mut stale = Stale::of_policy(
                target.before,
                target.installation,
                target.boundary,
                policy.name(),
            );
            stale
                .bindings
                .retain(|m| m.name.as_deref() == Some(own.as_str()));
            stale
                .policies
                .retain(|m| m.name.as_deref() == Some(own.as_str()));
            stale.parameters.clear();
            writes.stale = stale;
        }
    }
    writes
}

#[cfg(test)]
mod tests {
    use palisade_policy::Mode;
    use palisade_vap::render::POLICY_LABEL;
    use palisade_vap::shared::MODE_LABEL;

    use super::super::fixtures::*;
    use super::super::{of, Stale};
    use palisade_vap::Layout;

    #[test]
    fn a_policy_becomes_its_object_then_its_binding_of_one_name() {
        let layout = of(Layout::PerPolicy);
        let (shop, before) = (name("shop"), Default::default());
        let policy = mk_policy("tags", Mode::Enforce, true);
        let writes = layout
            .write_policy(&mk_target(&shop, &[], &before), &policy)
            .expect("writes");
        assert_eq!(
            names(&writes.objects),
            ["tags.shop.palisade.dev", "tags.shop.palisade.dev"]
        );
        assert!(matches!(writes.objects[0], super::Object::Policy(_)));
        assert!(matches!(writes.objects[1], super::Object::Binding(_)));
        assert_eq!(writes.stale, Stale::default());
    }

    #[test]
    fn a_policy_without_admission_rules_removes_its_objects_in_every_layout_and_no_others() {
        let layout = of(Layout::PerPolicy);
        let shop = name("shop");
        let own = mk_meta(
            "plans.shop.palisade.dev",
            "shop",
            &[(POLICY_LABEL, "plans")],
            None,
        );
        let other = mk_meta(
            "tags.shop.palisade.dev",
            "shop",
            &[(POLICY_LABEL, "tags")],
            None,
        );
        let held_alone = mk_meta(
            "shop.enforce-0",
            "shop",
            &[(MODE_LABEL, "enforce")],
            Some("plans"),
        );
        let held_with = mk_meta(
            "shop.enforce-1",
            "shop",
            &[(MODE_LABEL, "enforce")],
            Some("plans,tags"),
        );
        let other_boundary = mk_meta(
            "plans.web.palisade.dev",
            "web",
            &[(POLICY_LABEL, "plans")],
            None,
        );
        let mut params = mk_meta("plans.main", "shop", &[(POLICY_LABEL, "plans")], None);
        params.namespace = Some("shop-a".to_owned());
        let before = crate::installed::Installed {
            policies: vec![
                own.clone(),
                other.clone(),
                held_alone.clone(),
                held_with.clone(),
                other_boundary,
            ],
            bindings: vec![own, other, held_alone, held_with],
            parameters: vec![params],
            namespaces: Vec::new(),
            ..Default::default()
        };
        let writes = layout
            .write_policy(
                &mk_target(&shop, &[], &before),
                &mk_policy("plans", Mode::Enforce, false),
            )
            .expect("writes");
        assert!(writes.objects.is_empty());
        let both = ["plans.shop.palisade.dev", "shop.enforce-0"];
        assert_eq!(meta_names(&writes.stale.policies), both);
        assert_eq!(meta_names(&writes.stale.bindings), both);
        assert_eq!(meta_names(&writes.stale.parameters), ["plans.main"]);
    }

    #[test]
    fn a_policy_is_judged_by_its_object_only_when_it_is_palisades_of_the_boundary() {
        let layout = of(Layout::PerPolicy);
        let (shop, policy) = (name("shop"), mk_policy("tags", Mode::Enforce, true));
        let writes = layout
            .write_policy(&mk_target(&shop, &[], &Default::default()), &policy)
            .expect("writes");
        let installed = mk_installed(&writes.objects);
        assert_eq!(
            layout.judge(&installed, INSTALLATION, &shop, &policy, "shop-a"),
            Ok((
                "tags.shop.palisade.dev".to_owned(),
                "tags.shop.palisade.dev".to_owned()
            ))
        );
        let elsewhere = layout.judge(&installed, "other", &shop, &policy, "shop-a");
        assert_eq!(
            elsewhere,
            Err(
                "palisade's ValidatingAdmissionPolicy 'tags.shop.palisade.dev' is not installed"
                    .to_owned()
            )
        );
    }

    #[test]
    fn only_enforce_mode_policies_have_bindings_a_switch_copies() {
        let layout = of(Layout::PerPolicy);
        let policies = [
            mk_policy("tags", Mode::Enforce, true),
            mk_policy("audited", Mode::Audit, true),
            mk_policy("plans", Mode::Enforce, false),
        ];
        let bindings = layout.enforce_bindings(INSTALLATION, &name("shop"), &policies);
        let names: Vec<_> = bindings
            .iter()
            .filter_map(|b| b.metadata.name.clone())
            .collect();
        assert_eq!(names, ["tags.shop.palisade.dev"]);
    }
}
