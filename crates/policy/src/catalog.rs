//! The plan catalog: for each resource type, its plans in display order.

use std::collections::BTreeMap;

use crate::plan::PlanName;
use crate::resource_type::ResourceType;

/// One plan of the catalog.
#[derive(Clone, Debug, PartialEq)]
pub struct CatalogPlan {
    pub name: PlanName,
    /// vCPU, e.g. `0.5`.
    pub cpu: f64,
    /// Memory in MiB, e.g. `1024`.
    pub memory_mib: u64,
}

impl CatalogPlan {
    /// Memory written the way the docs write it: `1 GiB`, `512 MiB`.
    pub fn memory_display(&self) -> String {
        if self.memory_mib.is_multiple_of(1024) {
            format!("{} GiB", self.memory_mib / 1024)
        } else {
            format!("{} MiB", self.memory_mib)
        }
    }
}

/// The plans of every type that has plans. Static web apps never have plans.
#[derive(Clone, Debug, PartialEq)]
pub struct Catalog {
    plans: BTreeMap<ResourceType, Vec<CatalogPlan>>,
}

/// Why a catalog is not valid.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CatalogError {
    #[error("type {0} takes no plans")]
    TypeWithoutPlans(ResourceType),
    #[error("type {0} lists plan '{1}' twice")]
    DuplicatePlan(ResourceType, PlanName),
    #[error("type {0} has no plans")]
    Empty(ResourceType),
    #[error("plan '{1}' of type {0} must have a positive cpu and memory")]
    NotPositive(ResourceType, PlanName),
}

impl Catalog {
    /// Builds a catalog. Types that are left out have no plans, so every plan of theirs is
    /// unknown.
    pub fn new(plans: BTreeMap<ResourceType, Vec<CatalogPlan>>) -> Result<Self, CatalogError> {
        for (ty, list) in &plans {
            if !ty.has_plans() {
                return Err(CatalogError::TypeWithoutPlans(*ty));
            }
            if list.is_empty() {
                return Err(CatalogError::Empty(*ty));
            }
            for (index, plan) in list.iter().enumerate() {
                if list[..index].iter().any(|other| other.name == plan.name) {
                    return Err(CatalogError::DuplicatePlan(*ty, plan.name.clone()));
                }
                if !plan.cpu.is_finite() || plan.cpu <= 0.0 || plan.memory_mib == 0 {
                    return Err(CatalogError::NotPositive(*ty, plan.name.clone()));
                }
            }
        }
        Ok(Catalog { plans })
    }

    /// The built-in catalog of SPEC 2.1.
    pub fn builtin() -> Self {
        let list = |rows: &[(&str, f64, u64)]| -> Vec<CatalogPlan> {
            rows.iter()
                .map(|&(name, cpu, gib)| CatalogPlan {
                    name: PlanName::from_static(name),
                    cpu,
                    memory_mib: gib * 1024,
                })
                .collect()
        };
        let compute = list(&[
            ("small", 0.5, 1),
            ("medium", 1.0, 2),
            ("large", 2.0, 4),
            ("xlarge", 4.0, 8),
        ]);
        let database = list(&[
            ("small", 1.0, 2),
            ("medium", 2.0, 4),
            ("large", 4.0, 16),
            ("xlarge", 8.0, 32),
            ("memory-optimized", 4.0, 32),
        ]);
        let store = list(&[("small", 0.5, 1), ("medium", 1.0, 4), ("large", 2.0, 8)]);
        let mut plans = BTreeMap::new();
        plans.insert(ResourceType::App, compute.clone());
        plans.insert(ResourceType::ContainerInstance, compute.clone());
        plans.insert(ResourceType::Function, compute);
        plans.insert(ResourceType::Postgresql, database.clone());
        plans.insert(ResourceType::Sqlserver, database);
        plans.insert(ResourceType::Qdrant, store.clone());
        plans.insert(ResourceType::Valkey, store);
        Catalog { plans }
    }

    /// The plans of `ty` in display order; empty for a type without plans.
    pub fn plans(&self, ty: ResourceType) -> &[CatalogPlan] {
        self.plans.get(&ty).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn plan(&self, ty: ResourceType, name: &PlanName) -> Option<&CatalogPlan> {
        self.plans(ty).iter().find(|plan| &plan.name == name)
    }

    pub fn contains(&self, ty: ResourceType, name: &PlanName) -> bool {
        self.plan(ty, name).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_matches_the_spec_table() {
        let catalog = Catalog::builtin();
        let names = |ty| -> Vec<String> {
            catalog
                .plans(ty)
                .iter()
                .map(|p| p.name.to_string())
                .collect()
        };
        assert_eq!(
            names(ResourceType::App),
            ["small", "medium", "large", "xlarge"]
        );
        assert_eq!(
            names(ResourceType::Sqlserver),
            ["small", "medium", "large", "xlarge", "memory-optimized"]
        );
        assert_eq!(names(ResourceType::Valkey), ["small", "medium", "large"]);
        assert!(names(ResourceType::StaticWebApp).is_empty());
        let large = catalog.plan(ResourceType::Postgresql, &PlanName::from_static("large"));
        assert_eq!(
            large.map(|p| (p.cpu, p.memory_display())),
            Some((4.0, "16 GiB".into()))
        );
    }

    #[test]
    fn rejects_duplicates_and_static_web_apps() {
        let plan = CatalogPlan {
            name: PlanName::from_static("small"),
            cpu: 1.0,
            memory_mib: 1,
        };
        let mut plans = BTreeMap::new();
        plans.insert(ResourceType::App, vec![plan.clone(), plan.clone()]);
        assert!(matches!(
            Catalog::new(plans),
            Err(CatalogError::DuplicatePlan(..))
        ));
        let mut plans = BTreeMap::new();
        plans.insert(ResourceType::StaticWebApp, vec![plan]);
        assert!(matches!(
            Catalog::new(plans),
            Err(CatalogError::TypeWithoutPlans(_))
        ));
    }
}
