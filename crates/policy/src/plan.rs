//! Plan names and the entries of an `allowedComputePlans` rule (`small`, `valkey/small`).

use std::fmt;

use crate::name::is_dns_label;
use crate::resource_type::ResourceType;

/// A compute plan's name, such as `small` or `memory-optimized` (a DNS-1123 label).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PlanName(String);

/// Why a text is not a plan name or plan entry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanEntryError {
    #[error("plan name '{0}' is not a DNS label (lowercase letters, digits and '-', at most 63 characters)")]
    InvalidPlanName(String),
    #[error("unknown resource type '{0}' in plan entry '{1}'")]
    UnknownType(String, String),
    #[error("resource type '{0}' has no plans")]
    TypeWithoutPlans(String),
}

impl PlanName {
    pub fn parse(text: &str) -> Result<Self, PlanEntryError> {
        if text.len() <= crate::name::MAX_NAME_LEN && is_dns_label(text) {
            Ok(PlanName(text.to_owned()))
        } else {
            Err(PlanEntryError::InvalidPlanName(text.to_owned()))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Used by the built-in catalog, whose names are known to be valid.
    pub(crate) fn from_static(name: &str) -> PlanName {
        PlanName(name.to_owned())
    }
}

impl fmt::Display for PlanName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// One entry of an `allowedComputePlans` rule.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PlanEntry {
    /// `small`: applies to every resource type.
    Untyped(PlanName),
    /// `valkey/small`: applies only to its type.
    Typed(ResourceType, PlanName),
}

impl PlanEntry {
    /// Parses `small` or `<type>/<plan>`.
    pub fn parse(text: &str) -> Result<Self, PlanEntryError> {
        match text.split_once('/') {
            None => Ok(PlanEntry::Untyped(PlanName::parse(text)?)),
            Some((ty, plan)) => {
                let ty = ResourceType::parse(ty)
                    .map_err(|_| PlanEntryError::UnknownType(ty.to_owned(), text.to_owned()))?;
                if !ty.has_plans() {
                    return Err(PlanEntryError::TypeWithoutPlans(ty.as_str().to_owned()));
                }
                Ok(PlanEntry::Typed(ty, PlanName::parse(plan)?))
            }
        }
    }

    /// True when this entry applies to resources of type `ty`.
    pub fn applies_to(&self, ty: ResourceType) -> bool {
        match self {
            PlanEntry::Untyped(_) => true,
            PlanEntry::Typed(own, _) => *own == ty,
        }
    }

    pub fn plan(&self) -> &PlanName {
        match self {
            PlanEntry::Untyped(plan) | PlanEntry::Typed(_, plan) => plan,
        }
    }
}

impl fmt::Display for PlanEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanEntry::Untyped(plan) => write!(f, "{plan}"),
            PlanEntry::Typed(ty, plan) => write!(f, "{ty}/{plan}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_typed_and_untyped_entries() {
        assert_eq!(
            PlanEntry::parse("valkey/small").map(|e| e.to_string()),
            Ok("valkey/small".to_owned())
        );
        assert!(PlanEntry::parse("small")
            .is_ok_and(|e| e.applies_to(ResourceType::Qdrant) && e.applies_to(ResourceType::App)));
        assert!(PlanEntry::parse("valkey/small").is_ok_and(|e| !e.applies_to(ResourceType::App)));
        assert_eq!(
            PlanEntry::parse("valky/small"),
            Err(PlanEntryError::UnknownType(
                "valky".into(),
                "valky/small".into()
            ))
        );
        assert_eq!(
            PlanEntry::parse("static_web_app/small"),
            Err(PlanEntryError::TypeWithoutPlans("static_web_app".into()))
        );
        assert!(PlanEntry::parse("Small").is_err());
        assert!(PlanEntry::parse("valkey/").is_err());
        assert!(PlanEntry::parse("a/b/c").is_err());
    }
}
