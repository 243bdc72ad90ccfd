//! The `--catalog FILE` format: YAML mapping of resource type to its ordered plans.
//!
//! ```yaml
//! app:
//!   - {name: small, cpu: 0.5, memory: 1Gi}
//! ```

use std::collections::BTreeMap;

use palisade_policy::catalog::CatalogError;
use palisade_policy::{Catalog, CatalogPlan, PlanName, ResourceType};
use serde::Deserialize;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PlanRow {
    name: String,
    cpu: f64,
    memory: String,
}

/// A catalog file that cannot be used; the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CatalogFileError {
    #[error(transparent)]
    Yaml(#[from] crate::yaml::YamlError),
    #[error("{pointer}: {message}")]
    Field { pointer: String, message: String },
    #[error("the catalog file is empty")]
    Empty,
}

/// Parses `1Gi`, `512Mi`, `1 GiB`, `512 MiB` into MiB.
pub fn parse_memory(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().ok()?;
    match unit.trim() {
        "Gi" | "GiB" => number.checked_mul(1024),
        "Mi" | "MiB" => Some(number),
        _ => None,
    }
}

/// Parses a catalog file's text.
pub fn parse(text: &str) -> Result<Catalog, CatalogFileError> {
    let mut documents = crate::yaml::documents::<BTreeMap<String, Vec<PlanRow>>>(text);
    let rows = match documents.drain(..).next() {
        None => return Err(CatalogFileError::Empty),
        Some((_, result)) => result?,
    };
    let field = |pointer: String, message: String| CatalogFileError::Field { pointer, message };
    let mut plans = BTreeMap::new();
    for (ty, list) in rows {
        let resource_type =
            ResourceType::parse(&ty).map_err(|e| field(format!("/{ty}"), e.to_string()))?;
        let mut out = Vec::with_capacity(list.len());
        for (i, row) in list.into_iter().enumerate() {
            let name = PlanName::parse(&row.name)
                .map_err(|e| field(format!("/{ty}/{i}/name"), e.to_string()))?;
            let memory_mib = parse_memory(&row.memory).ok_or_else(|| {
                field(
                    format!("/{ty}/{i}/memory"),
                    format!("'{}' is not a memory size such as 512Mi or 4Gi", row.memory),
                )
            })?;
            out.push(CatalogPlan {
                name,
                cpu: row.cpu,
                memory_mib,
            });
        }
        plans.insert(resource_type, out);
    }
    Catalog::new(plans).map_err(|e: CatalogError| field(String::new(), e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_catalog() {
        let catalog = parse("app:\n  - {name: tiny, cpu: 0.25, memory: 512Mi}\n  - {name: big, cpu: 8, memory: 32Gi}\n").unwrap();
        let names: Vec<_> = catalog
            .plans(ResourceType::App)
            .iter()
            .map(|p| p.name.to_string())
            .collect();
        assert_eq!(names, ["tiny", "big"]);
        assert!(catalog.plans(ResourceType::Valkey).is_empty());
    }

    #[test]
    fn names_the_bad_field() {
        let error = parse("app:\n  - {name: tiny, cpu: 1, memory: lots}\n").unwrap_err();
        assert_eq!(
            error.to_string(),
            "/app/0/memory: 'lots' is not a memory size such as 512Mi or 4Gi"
        );
        let error = parse("valky:\n  - {name: tiny, cpu: 1, memory: 1Gi}\n").unwrap_err();
        assert!(error
            .to_string()
            .starts_with("/valky: unknown resource type 'valky'"));
        let error = parse("app:\n  - {name: tiny, cpu: 1, memory: 1Gi, disk: 3}\n").unwrap_err();
        assert!(error.to_string().contains("/app/0"), "{error}");
    }
}
