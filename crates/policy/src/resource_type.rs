//! The platform's resource types and which of them the compute-plan rule checks.

use std::fmt;

/// A resource type of the platform.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ResourceType {
    App,
    ContainerInstance,
    Postgresql,
    Sqlserver,
    Qdrant,
    Valkey,
    Function,
    StaticWebApp,
}

/// The text is not a resource type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown resource type '{0}'; known types are app, container_instance, postgresql, sqlserver, qdrant, valkey, function, static_web_app")]
pub struct UnknownResourceType(pub String);

impl ResourceType {
    /// Whether resources of this type run as workloads in a cluster (SPEC 5): they take
    /// labels and a placement. Databases, caches and vector stores are managed services with
    /// no workload in the namespaces.
    pub fn is_workload(self) -> bool {
        matches!(
            self,
            ResourceType::App
                | ResourceType::Function
                | ResourceType::StaticWebApp
                | ResourceType::ContainerInstance
        )
    }

    /// Every type, in the order the docs list them.
    pub const ALL: [ResourceType; 8] = [
        ResourceType::App,
        ResourceType::ContainerInstance,
        ResourceType::Postgresql,
        ResourceType::Sqlserver,
        ResourceType::Qdrant,
        ResourceType::Valkey,
        ResourceType::Function,
        ResourceType::StaticWebApp,
    ];

    /// The types whose plans the API checks (SPEC 2.1), in display order.
    pub const CHECKED: [ResourceType; 6] = [
        ResourceType::App,
        ResourceType::ContainerInstance,
        ResourceType::Postgresql,
        ResourceType::Sqlserver,
        ResourceType::Qdrant,
        ResourceType::Valkey,
    ];

    pub fn parse(text: &str) -> Result<Self, UnknownResourceType> {
        Self::ALL
            .into_iter()
            .find(|ty| ty.as_str() == text)
            .ok_or_else(|| UnknownResourceType(text.to_owned()))
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ResourceType::App => "app",
            ResourceType::ContainerInstance => "container_instance",
            ResourceType::Postgresql => "postgresql",
            ResourceType::Sqlserver => "sqlserver",
            ResourceType::Qdrant => "qdrant",
            ResourceType::Valkey => "valkey",
            ResourceType::Function => "function",
            ResourceType::StaticWebApp => "static_web_app",
        }
    }

    /// True for the types whose create and plan moves the API refuses when disallowed.
    pub fn is_plan_checked(self) -> bool {
        Self::CHECKED.contains(&self)
    }

    /// False only for static web apps, which take no plan.
    pub fn has_plans(self) -> bool {
        self != ResourceType::StaticWebApp
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_type() {
        for ty in ResourceType::ALL {
            assert_eq!(ResourceType::parse(ty.as_str()), Ok(ty));
        }
        assert!(ResourceType::parse("valky").is_err());
        assert!(!ResourceType::Function.is_plan_checked());
        assert!(!ResourceType::StaticWebApp.has_plans());
    }
}
