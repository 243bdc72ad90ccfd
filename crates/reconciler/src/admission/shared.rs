//! One policy and two bindings per installation (`palisade_vap::shared`); each policy's rules
//! in a parameter object in every namespace of its boundary.

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use palisade_policy::{Exception, Name, Policy};
use palisade_vap::per_boundary::Rolling;
use palisade_vap::shared::{
    parameters_definition, parameters_excepted, parameters_name, parameters_staged,
    shared_binding_name, shared_objects, shared_policy_name,
};

use super::{
    parameters_of, staged, AdmissionLayout, Judge, Object, Staging, Stale, Target, Writes,
};
use crate::installed::{is_ours, Installed};
use crate::Result;

pub(super) struct Shared;

/// The installation's shared objects: the parameters' definition, then the policy and its two
/// bindings.
pub(crate) fn installation_objects(installation: &str) -> Vec<Object> {
    let shared = shared_objects(installation);
    vec![
        Object::Definition(parameters_definition()),
        Object::Policy(Box::new(shared.policy)),
        Object::Binding(Box::new(shared.enforce)),
        Object::Binding(Box::new(shared.audit)),
    ]
}

impl AdmissionLayout for Shared {
    /// The shared objects and the parameters guard: only palisade and Kubernetes' controllers
    /// may change this installation's parameter objects.
    fn prepare(&self, installation: &str, identity: &str) -> Vec<Object> {
        let mut objects = installation_objects(installation);
        objects.extend(Object::pair(palisade_vap::parameters_guard(
            installation,
            identity,
        )));
        objects
    }

    fn per_namespace(&self) -> bool {
        true
    }

    /// The policy's parameter object in every namespace of the boundary; a policy without
    /// admission rules has its parameter objects removed.
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
        namespace: &str,
    ) -> Judge {
        let name = parameters_name(installation, policy.name());
        let present = installed.parameters.iter().any(|m| {
            m.namespace.as_deref() == Some(namespace)
                && m.name.as_deref() == Some(name.as_str())
                && is_ours(m, installation, boundary)
        });
        if present {
            Ok((
                shared_policy_name(installation),
                shared_binding_name(installation, policy.mode()),
            ))
        } else {
            Err(format!(
                "palisade's parameters of policy '{}' are not in namespace '{namespace}'",
                policy.name()
            ))
        }
    }

    fn enforce_bindings(
        &self,
        installation: &str,
        _boundary: &Name,
        _policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding> {
        vec![shared_objects(installation).enforce]
    }
}

/// The policy's parameter object in every namespace of the boundary.
fn written(target: &Target<'_>, policy: &Policy, exceptions: &[&Exception]) -> Writes {
    let name = parameters_name(target.installation, policy.name());
    let mut objects = Vec::with_capacity(target.namespaces.len());
    for namespace in target.namespaces {
        let rendered = parameters_excepted(
            target.boundary,
            policy,
            target.installation,
            namespace,
            exceptions,
        );
        let Some(object) = rendered else {
            return Writes {
                objects: Vec::new(),
                stale: Stale {
                    parameters: parameters_of(
                        target.before,
                        target.installation,
                        target.boundary,
                        policy.name(),
                    ),
                    ..Stale::default()
                },
            };
        };
        objects.push(Object::Parameters {
            namespace: namespace.clone(),
            name: name.clone(),
            object,
        });
    }
    Writes {
        objects,
        stale: Stale::default(),
    }
}

/// A policy being rolled out: the version in force before keeps its parameter objects where
/// the stage has not reached (a new policy has none), and loses them where it has; the new
/// version judges from objects of its own everywhere.
fn staged_writes(
    target: &Target<'_>,
    policy: &Policy,
    staging: &Staging,
    exceptions: &[&Exception],
) -> Writes {
    let name = parameters_name(target.installation, policy.name());
    // The new version's objects first (make before break).
    let mut objects = staged::version_objects(
        target.boundary,
        policy,
        staging,
        target.installation,
        exceptions,
    );
    let mut kept = Vec::with_capacity(target.namespaces.len());
    for namespace in target.namespaces {
        let rolling = Rolling {
            current: policy,
            version: staging.version,
            reached: &staging.reached,
            left: &staging.left,
        };
        let rendered = parameters_staged(
            target.boundary,
            staging.previous.as_ref(),
            rolling,
            target.installation,
            namespace,
            exceptions,
        );
        if let Some(object) = rendered {
            kept.push(namespace.as_str());
            objects.push(Object::Parameters {
                namespace: namespace.clone(),
                name: name.clone(),
                object,
            });
        }
    }
    let mut stale = Stale {
        parameters: parameters_of(
            target.before,
            target.installation,
            target.boundary,
            policy.name(),
        ),
        ..Stale::default()
    };
    stale
        .parameters
        .retain(|m| m.namespace.as_deref().is_none_or(|n| !kept.contains(&n)));
    Writes { objects, stale }
}

#[cfg(test)]
mod tests {
    use palisade_policy::Mode;
    use palisade_vap::render::POLICY_LABEL;
    use palisade_vap::shared::{shared_binding_name, shared_policy_name};
    use palisade_vap::Layout;

    use super::super::fixtures::*;
    use super::super::{of, Object};
    use crate::installed::Installed;

    #[test]
    fn prepare_writes_the_definition_first_then_the_shared_objects_and_the_guard() {
        let objects = of(Layout::Shared).prepare(INSTALLATION, "system:serviceaccount:p:p");
        assert!(matches!(objects[0], Object::Definition(_)));
        assert_eq!(objects.len(), 6);
        assert!(matches!(objects[4], Object::Policy(_)));
        assert!(matches!(objects[5], Object::Binding(_)));
        assert!(of(Layout::PerPolicy).prepare(INSTALLATION, "x").is_empty());
    }

    #[test]
    fn a_policy_has_one_parameter_object_per_namespace_of_the_boundary() {
        let layout = of(Layout::Shared);
        assert!(layout.per_namespace());
        let shop = name("shop");
        let namespaces = ["shop-a".to_owned(), "shop-b".to_owned()];
        let before = Installed::default();
        let tags = mk_policy("tags", Mode::Audit, true);
        let writes = layout
            .write_policy(&mk_target(&shop, &namespaces, &before), &tags)
            .expect("writes");
        let placed: Vec<(String, String)> = writes
            .objects
            .iter()
            .map(|o| match o {
                Object::Parameters {
                    namespace, name, ..
                } => (namespace.clone(), name.clone()),
                other => panic!("not a parameter object: {other:?}"),
            })
            .collect();
        assert_eq!(
            placed,
            [
                ("shop-a".to_owned(), "tags.main".to_owned()),
                ("shop-b".to_owned(), "tags.main".to_owned())
            ]
        );
        let installed = mk_installed(&writes.objects);
        assert_eq!(
            layout.judge(&installed, INSTALLATION, &shop, &tags, "shop-b"),
            Ok((
                shared_policy_name(INSTALLATION),
                shared_binding_name(INSTALLATION, Mode::Audit)
            ))
        );
        assert_eq!(
            layout.judge(&installed, INSTALLATION, &shop, &tags, "shop-c"),
            Err("palisade's parameters of policy 'tags' are not in namespace 'shop-c'".to_owned())
        );
    }

    #[test]
    fn a_policy_without_admission_rules_removes_only_its_own_parameter_objects() {
        let layout = of(Layout::Shared);
        let shop = name("shop");
        let mut mine = mk_meta("plans.main", "shop", &[(POLICY_LABEL, "plans")], None);
        mine.namespace = Some("shop-a".to_owned());
        let mut other = mk_meta("tags.main", "shop", &[(POLICY_LABEL, "tags")], None);
        other.namespace = Some("shop-a".to_owned());
        let before = Installed {
            parameters: vec![mine, other],
            ..Installed::default()
        };
        let namespaces = ["shop-a".to_owned()];
        let writes = layout
            .write_policy(
                &mk_target(&shop, &namespaces, &before),
                &mk_policy("plans", Mode::Enforce, false),
            )
            .expect("writes");
        assert!(writes.objects.is_empty());
        assert_eq!(meta_names(&writes.stale.parameters), ["plans.main"]);
        assert!(writes.stale.policies.is_empty() && writes.stale.bindings.is_empty());
    }
}
