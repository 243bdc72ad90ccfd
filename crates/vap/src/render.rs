//! What every layout's objects share: palisade's labels, the field manager, the resources
//! matched (SPEC 3.1) and the exemptions as match conditions. The layouts themselves are in
//! [`crate::layout`].

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, NamedRuleWithOperations, ValidatingAdmissionPolicyBinding,
};
use palisade_policy::Name;

use crate::cel::{self, MATCH_CONDITIONS};

/// The server-side-apply field manager of every object palisade writes.
pub const FIELD_MANAGER: &str = "palisade";
pub use palisade_policy::labels::{
    BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL, POLICY_LABEL, SWITCH_LABEL, VERSION_LABEL,
};

/// The subresource through which ephemeral containers are added to a Pod.
pub const EPHEMERAL_CONTAINERS_RESOURCE: &str = "pods/ephemeralcontainers";

/// The Pod status subresource, through which labels could otherwise change unjudged.
pub const POD_STATUS_RESOURCE: &str = "pods/status";

/// The labels that mark an object as palisade's.
pub fn labels(installation: &str, boundary: &Name, policy: &Name) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), "palisade".to_owned()),
        (INSTALLATION_LABEL.to_owned(), installation.to_owned()),
        (BOUNDARY_LABEL.to_owned(), boundary.to_string()),
        (POLICY_LABEL.to_owned(), policy.to_string()),
    ])
}

pub(crate) fn strings(items: &[&str]) -> Option<Vec<String>> {
    Some(items.iter().map(|s| (*s).to_owned()).collect())
}

/// The rules matching the kinds palisade checks (SPEC 3.1), one per API group.
pub(crate) fn resource_rules() -> Vec<NamedRuleWithOperations> {
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (group, resource) in cel::matched_resources() {
        by_group.entry(group).or_default().push(resource);
    }
    // `kubectl debug` adds ephemeral containers through this subresource (SPEC 3.2, v3.1);
    // a Pod's status subresource keeps the labels an update sends (judged only when they
    // change: see `MATCH_CONDITIONS`).
    by_group
        .entry("")
        .or_default()
        .extend([EPHEMERAL_CONTAINERS_RESOURCE, POD_STATUS_RESOURCE]);
    by_group
        .into_iter()
        .map(|(group, resources)| NamedRuleWithOperations {
            api_groups: strings(&[group]),
            api_versions: strings(&["*"]),
            operations: strings(&["CREATE", "UPDATE"]),
            resources: Some(resources.into_iter().map(str::to_owned).collect()),
            scope: Some("Namespaced".to_owned()),
            ..NamedRuleWithOperations::default()
        })
        .collect()
}

/// The exemptions of SPEC 3.1 as match conditions.
pub(crate) fn match_conditions() -> Vec<MatchCondition> {
    MATCH_CONDITIONS
        .iter()
        .map(|(name, expression)| MatchCondition {
            name: (*name).to_owned(),
            expression: (*expression).to_owned(),
        })
        .collect()
}

/// `switch.<binding>`, the name of `binding`'s switch binding.
pub fn switch_binding_name(binding: &str) -> String {
    format!("switch.{binding}")
}

/// A copy of an enforce-mode `binding` that only warns, written beside it while the cluster
/// changes layout (SPEC 3.4: the new layout's objects are confirmed before the old ones go).
/// While both layouts' objects deny a probe, the API server reports one denial (which one is
/// not specified) but adds every `Warn` binding's warning: this binding's warning is what
/// proves the new policy object is active. Deleted once the switch is done.
pub fn switch_binding(
    binding: &ValidatingAdmissionPolicyBinding,
) -> ValidatingAdmissionPolicyBinding {
    let mut copy = binding.clone();
    let name = switch_binding_name(binding.metadata.name.as_deref().unwrap_or_default());
    copy.metadata.name = Some(name);
    copy.metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(SWITCH_LABEL.to_owned(), "true".to_owned());
    if let Some(spec) = copy.spec.as_mut() {
        spec.validation_actions = strings(&["Warn"]);
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBindingSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn a_switch_binding_only_warns_under_its_own_name() {
        let binding = ValidatingAdmissionPolicyBinding {
            metadata: ObjectMeta {
                name: Some("trusted.shop.palisade.dev".to_owned()),
                labels: Some(BTreeMap::from([(
                    BOUNDARY_LABEL.to_owned(),
                    "shop".to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            spec: Some(ValidatingAdmissionPolicyBindingSpec {
                policy_name: Some("trusted.shop.palisade.dev".to_owned()),
                validation_actions: strings(&["Deny"]),
                ..ValidatingAdmissionPolicyBindingSpec::default()
            }),
        };
        let switch = switch_binding(&binding);
        assert_eq!(
            switch.metadata.name.as_deref(),
            Some("switch.trusted.shop.palisade.dev")
        );
        let spec = switch.spec.unwrap_or_default();
        assert_eq!(spec.validation_actions, Some(vec!["Warn".to_owned()]));
        assert_eq!(
            spec.policy_name.as_deref(),
            Some("trusted.shop.palisade.dev")
        );
        let labels = switch.metadata.labels.unwrap_or_default();
        assert_eq!(labels.get(SWITCH_LABEL).map(String::as_str), Some("true"));
        assert_eq!(labels.get(BOUNDARY_LABEL).map(String::as_str), Some("shop"));
    }
}
