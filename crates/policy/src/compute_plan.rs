//! Allowed compute plans (SPEC 2): the decision for a create or plan move, the plan picker's
//! options, and which plans of an update need checking.

use crate::catalog::{Catalog, CatalogPlan};
use crate::name::Name;
use crate::plan::{PlanEntry, PlanName};
use crate::policy::{Mode, Policy};
use crate::resource_type::ResourceType;

/// The plan cannot be decided on: it is not in the catalog, or the type takes no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("plan '{plan}' is not a plan of {resource_type}; the catalog has {}", .catalog.join(", "))]
    NotInCatalog {
        resource_type: ResourceType,
        plan: String,
        catalog: Vec<String>,
    },
    #[error("{0} takes no plan")]
    TypeWithoutPlans(ResourceType),
}

/// The answer for (policies, type, plan).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanDecision {
    pub resource_type: ResourceType,
    pub plan: PlanName,
    /// True unless an enforce-mode policy denies the plan.
    pub allowed: bool,
    /// allowed(T) in catalog order.
    pub allowed_plans: Vec<PlanName>,
    /// Enforce-mode policies that speak about the type and do not name the plan, by name.
    pub denied_by: Vec<Name>,
    /// `Policy 'watch' (audit) would deny: <message>`, by policy name.
    pub audit_warnings: Vec<crate::Warning>,
}

impl PlanDecision {
    /// The 422 message, when denied.
    pub fn message(&self) -> Option<String> {
        (!self.allowed).then(|| denial_message(&self.plan, &self.allowed_plans))
    }
}

/// `Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it.
/// Allowed plans: small, medium.`
pub fn denial_message(plan: &PlanName, allowed_plans: &[PlanName]) -> String {
    let allowed = if allowed_plans.is_empty() {
        "none".to_owned()
    } else {
        allowed_plans
            .iter()
            .map(PlanName::as_str)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "Compute plan '{plan}' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: {allowed}."
    )
}

/// The policy's entries that apply to `ty`, or `None` when it does not speak about `ty`.
fn entries_for(
    policy: &Policy,
    ty: ResourceType,
) -> Option<impl Iterator<Item = &PlanEntry> + Clone> {
    let entries = policy.plan_entries()?;
    let mut applying = entries
        .iter()
        .filter(move |entry| entry.applies_to(ty))
        .peekable();
    applying.peek()?;
    Some(applying)
}

fn names(policy: &Policy, ty: ResourceType, plan: &PlanName) -> Option<bool> {
    entries_for(policy, ty).map(|mut entries| entries.any(|entry| entry.plan() == plan))
}

fn check_plan<'c>(
    catalog: &'c Catalog,
    ty: ResourceType,
    plan: &PlanName,
) -> Result<&'c CatalogPlan, PlanError> {
    if !ty.has_plans() {
        return Err(PlanError::TypeWithoutPlans(ty));
    }
    catalog
        .plan(ty, plan)
        .ok_or_else(|| PlanError::NotInCatalog {
            resource_type: ty,
            plan: plan.to_string(),
            catalog: catalog
                .plans(ty)
                .iter()
                .map(|p| p.name.to_string())
                .collect(),
        })
}

/// allowed(T): the catalog plans of `ty` named by every enforce-mode policy that speaks
/// about `ty` (all of them when none does), in catalog order.
pub fn allowed_plans(policies: &[Policy], catalog: &Catalog, ty: ResourceType) -> Vec<PlanName> {
    allowed_with(policies, catalog, ty, None)
}

fn allowed_with(
    policies: &[Policy],
    catalog: &Catalog,
    ty: ResourceType,
    extra: Option<&Policy>,
) -> Vec<PlanName> {
    let enforcing = policies
        .iter()
        .filter(|p| p.mode() == Mode::Enforce)
        .chain(extra);
    catalog
        .plans(ty)
        .iter()
        .filter(|plan| {
            enforcing
                .clone()
                .all(|policy| names(policy, ty, &plan.name) != Some(false))
        })
        .map(|plan| plan.name.clone())
        .collect()
}

/// Policies of `mode` that speak about `ty` and do not name `plan`, in name order.
fn deniers<'p>(
    policies: &'p [Policy],
    ty: ResourceType,
    plan: &PlanName,
    mode: Mode,
) -> Vec<&'p Policy> {
    let mut found: Vec<&Policy> = policies
        .iter()
        .filter(|p| p.mode() == mode && names(p, ty, plan) == Some(false))
        .collect();
    found.sort_by(|a, b| a.name().cmp(b.name()));
    found
}

/// The decision of SPEC 2.3 for a create or plan move of `ty` to `plan`. Functions are decided
/// the same way; the caller decides whether to enforce (`ResourceType::is_plan_checked`).
pub fn decide(
    policies: &[Policy],
    catalog: &Catalog,
    ty: ResourceType,
    plan: &PlanName,
) -> Result<PlanDecision, PlanError> {
    check_plan(catalog, ty, plan)?;
    let denied_by: Vec<Name> = deniers(policies, ty, plan, Mode::Enforce)
        .into_iter()
        .map(|p| p.name().clone())
        .collect();
    let audit_warnings = deniers(policies, ty, plan, Mode::Audit)
        .into_iter()
        .map(|audit| {
            let allowed = allowed_with(policies, catalog, ty, Some(audit));
            crate::Warning::AuditWouldDeny {
                policy: audit.name().to_string(),
                message: denial_message(plan, &allowed),
            }
        })
        .collect();
    Ok(PlanDecision {
        resource_type: ty,
        plan: plan.clone(),
        allowed: denied_by.is_empty(),
        allowed_plans: allowed_plans(policies, catalog, ty),
        denied_by,
        audit_warnings,
    })
}

/// Every decision of SPEC 2.3 for one set of policies, made once (when the policies change):
/// deciding is then a lookup among a type's catalog plans, whatever the number of policies.
/// [`CompiledPlans::decide`] answers exactly what [`decide`] answers for the same policies and
/// catalog (a property test holds them equal).
#[derive(Clone, Debug, PartialEq)]
pub struct CompiledPlans {
    /// Per type, in `ResourceType::ALL` order: each catalog plan and its decision.
    by_type: Vec<Vec<(PlanName, PlanDecision)>>,
}

impl CompiledPlans {
    /// Decides every plan of every type of `catalog` under `policies`.
    pub fn new(policies: &[Policy], catalog: &Catalog) -> Self {
        let by_type = ResourceType::ALL
            .iter()
            .map(|&ty| {
                catalog
                    .plans(ty)
                    .iter()
                    .filter_map(|plan| {
                        decide(policies, catalog, ty, &plan.name)
                            .ok()
                            .map(|decision| (plan.name.clone(), decision))
                    })
                    .collect()
            })
            .collect();
        CompiledPlans { by_type }
    }

    /// The decision for `plan` of `ty`; `None` when the catalog has no such plan (then
    /// [`decide`] says why).
    pub fn decide(&self, ty: ResourceType, plan: &PlanName) -> Option<&PlanDecision> {
        let index = ResourceType::ALL.iter().position(|&t| t == ty)?;
        self.by_type
            .get(index)?
            .iter()
            .find(|(name, _)| name == plan)
            .map(|(_, decision)| decision)
    }
}

/// One option of the plan picker (SPEC 2.5).
#[derive(Clone, Debug, PartialEq)]
pub struct PickerOption<'c> {
    pub plan: &'c CatalogPlan,
    pub allowed: bool,
    /// Enforce-mode policies that disallow the plan, by name.
    pub denied_by: Vec<Name>,
    /// Audit-mode policies that would disallow it, by name.
    pub audit_denied_by: Vec<Name>,
}

impl PickerOption<'_> {
    /// `Disallowed by boundary policy 'a'` / `Disallowed by boundary policies 'a', 'b'`.
    pub fn reason(&self) -> Option<String> {
        (!self.denied_by.is_empty()).then(|| {
            format!(
                "Disallowed by boundary {}",
                quoted_policies(&self.denied_by)
            )
        })
    }

    /// `Would be disallowed by audit policy 'watch'`.
    pub fn audit_warning(&self) -> Option<String> {
        (!self.audit_denied_by.is_empty()).then(|| {
            format!(
                "Would be disallowed by audit {}",
                quoted_policies(&self.audit_denied_by)
            )
        })
    }
}

fn quoted_policies(names: &[Name]) -> String {
    let list = names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() == 1 {
        format!("policy {list}")
    } else {
        format!("policies {list}")
    }
}

/// The picker's options for `ty`, in catalog order. Empty for types without plans.
pub fn picker_options<'c>(
    policies: &[Policy],
    catalog: &'c Catalog,
    ty: ResourceType,
) -> Vec<PickerOption<'c>> {
    let names_of = |list: Vec<&Policy>| list.into_iter().map(|p| p.name().clone()).collect();
    catalog
        .plans(ty)
        .iter()
        .map(|plan| {
            let denied_by: Vec<Name> = names_of(deniers(policies, ty, &plan.name, Mode::Enforce));
            PickerOption {
                plan,
                allowed: denied_by.is_empty(),
                denied_by,
                audit_denied_by: names_of(deniers(policies, ty, &plan.name, Mode::Audit)),
            }
        })
        .collect()
}

/// The plans a resource has: one, or one per container-instance component (in order).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plans {
    Single(PlanName),
    Components(Vec<(Name, PlanName)>),
    /// Static web apps.
    None,
}

/// A plan that a create or update must check: the component it belongs to, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanCheck {
    pub component: Option<Name>,
    pub plan: PlanName,
}

/// The plans to check when a resource goes from `old` (none: a create) to `new` (SPEC 2.2).
/// Components are matched by name: a new name is a create of that component; an unchanged
/// plan, a removed component or any other change needs no check. Request order is kept.
pub fn plan_checks(old: Option<&Plans>, new: &Plans) -> Vec<PlanCheck> {
    match new {
        Plans::None => Vec::new(),
        Plans::Single(plan) => match old {
            Some(Plans::Single(current)) if current == plan => Vec::new(),
            _ => vec![PlanCheck {
                component: None,
                plan: plan.clone(),
            }],
        },
        Plans::Components(components) => {
            let previous = match old {
                Some(Plans::Components(previous)) => previous.as_slice(),
                _ => &[],
            };
            components
                .iter()
                .filter(|(name, plan)| {
                    !previous
                        .iter()
                        .any(|(old_name, old_plan)| old_name == name && old_plan == plan)
                })
                .map(|(name, plan)| PlanCheck {
                    component: Some(name.clone()),
                    plan: plan.clone(),
                })
                .collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Rule, Scope};

    fn plan(text: &str) -> PlanName {
        PlanName::parse(text).unwrap()
    }

    fn policy(name: &str, mode: Mode, entries: &[&str]) -> Policy {
        let entries = entries
            .iter()
            .map(|e| PlanEntry::parse(e).unwrap())
            .collect();
        Policy::new(
            Name::parse(name).unwrap(),
            mode,
            Scope::AllClusters,
            vec![Rule::allowed_compute_plans(entries).unwrap()],
        )
        .unwrap()
    }

    #[test]
    fn the_reference_example() {
        let policies = [policy("size-limits", Mode::Enforce, &["small", "medium"])];
        let decision = decide(
            &policies,
            &Catalog::builtin(),
            ResourceType::App,
            &plan("large"),
        )
        .unwrap();
        assert!(!decision.allowed);
        assert_eq!(
            decision.message().unwrap(),
            "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium."
        );
        assert_eq!(decision.denied_by, [Name::parse("size-limits").unwrap()]);
    }

    #[test]
    fn a_policy_that_names_no_plan_of_the_type_allows_nothing() {
        let policies = [policy("odd", Mode::Enforce, &["huge"])];
        let decision = decide(
            &policies,
            &Catalog::builtin(),
            ResourceType::Valkey,
            &plan("small"),
        )
        .unwrap();
        assert!(decision
            .message()
            .unwrap()
            .ends_with("Allowed plans: none."));
    }

    #[test]
    fn typed_entries_only_apply_to_their_type() {
        let policies = [policy("cache", Mode::Enforce, &["valkey/small"])];
        let catalog = Catalog::builtin();
        assert!(
            decide(&policies, &catalog, ResourceType::App, &plan("xlarge"))
                .unwrap()
                .allowed
        );
        assert!(
            !decide(&policies, &catalog, ResourceType::Valkey, &plan("medium"))
                .unwrap()
                .allowed
        );
    }

    #[test]
    fn unknown_plans_are_refused_before_policies() {
        let error = decide(
            &[],
            &Catalog::builtin(),
            ResourceType::Valkey,
            &plan("xlarge"),
        );
        assert_eq!(
            error.unwrap_err().to_string(),
            "plan 'xlarge' is not a plan of valkey; the catalog has small, medium, large"
        );
    }

    #[test]
    fn picker_reasons_name_every_denier() {
        let policies = [
            policy("b", Mode::Enforce, &["small"]),
            policy("a", Mode::Enforce, &["small", "medium"]),
            policy("watch", Mode::Audit, &["small", "large"]),
        ];
        let catalog = Catalog::builtin();
        let options = picker_options(&policies, &catalog, ResourceType::App);
        let reasons: Vec<_> = options
            .iter()
            .map(|o| (o.reason(), o.audit_warning()))
            .collect();
        assert_eq!(reasons[0], (None, None));
        assert_eq!(
            reasons[1],
            (
                Some("Disallowed by boundary policy 'b'".into()),
                Some("Would be disallowed by audit policy 'watch'".into())
            )
        );
        assert_eq!(
            reasons[2],
            (
                Some("Disallowed by boundary policies 'a', 'b'".into()),
                None
            )
        );
    }

    #[test]
    fn components_are_matched_by_name() {
        let n = |t: &str| Name::parse(t).unwrap();
        let old = Plans::Components(vec![
            (n("web"), plan("small")),
            (n("worker"), plan("large")),
        ]);
        let new = Plans::Components(vec![
            (n("worker"), plan("large")),
            (n("api"), plan("small")),
            (n("web"), plan("medium")),
        ]);
        assert_eq!(
            plan_checks(Some(&old), &new),
            [
                PlanCheck {
                    component: Some(n("api")),
                    plan: plan("small")
                },
                PlanCheck {
                    component: Some(n("web")),
                    plan: plan("medium")
                },
            ]
        );
        assert!(plan_checks(
            Some(&Plans::Single(plan("large"))),
            &Plans::Single(plan("large"))
        )
        .is_empty());
        assert_eq!(plan_checks(None, &Plans::Single(plan("large"))).len(), 1);
    }

    mod compiled {
        use super::*;
        use proptest::prelude::*;

        const ENTRIES: [&str; 9] = [
            "small",
            "medium",
            "large",
            "xlarge",
            "huge",
            "valkey/small",
            "postgresql/large",
            "container_instance/medium",
            "function/small",
        ];

        fn policies() -> impl Strategy<Value = Vec<Policy>> {
            proptest::collection::vec(
                (
                    proptest::bool::ANY,
                    proptest::sample::subsequence(ENTRIES.to_vec(), 1..ENTRIES.len()),
                ),
                0..8,
            )
            .prop_map(|list| {
                list.into_iter()
                    .enumerate()
                    .map(|(i, (audit, entries))| {
                        let mode = if audit { Mode::Audit } else { Mode::Enforce };
                        policy(&format!("p{i}"), mode, &entries)
                    })
                    .collect()
            })
        }

        proptest! {
            #[test]
            fn a_compiled_decision_is_the_decision(policies in policies()) {
                let catalog = Catalog::builtin();
                let compiled = CompiledPlans::new(&policies, &catalog);
                for ty in ResourceType::ALL {
                    for plan in catalog.plans(ty) {
                        let expected = decide(&policies, &catalog, ty, &plan.name).unwrap();
                        prop_assert_eq!(compiled.decide(ty, &plan.name), Some(&expected));
                    }
                    prop_assert_eq!(compiled.decide(ty, &PlanName::parse("nope").unwrap()), None);
                }
            }
        }
    }
}
