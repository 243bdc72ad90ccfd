//! One ValidatingAdmissionPolicy and one binding for all of a boundary's policies, merged from
//! the objects palisade renders per policy: their validations in order, their variables, match
//! conditions and match constraints once (they must agree). For benchmarks that measure what
//! such a layout would cost; palisade does not install it.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{Patch, PatchParams};
use kube::Api;
use palisade_policy::{Name, Policy};
use serde_json::{json, Value};

/// The spec of one policy object holding the validations of `specs`, in order.
pub fn merged_spec(specs: &[Value]) -> Value {
    let mut merged = specs[0].clone();
    let mut validations = Vec::new();
    let mut variables: Vec<Value> = Vec::new();
    for spec in specs {
        for key in ["matchConditions", "matchConstraints", "failurePolicy"] {
            assert_eq!(spec[key], specs[0][key], "the policies differ in {key}");
        }
        validations.extend(spec["validations"].as_array().cloned().unwrap_or_default());
        for variable in spec["variables"].as_array().cloned().unwrap_or_default() {
            match variables.iter().find(|v| v["name"] == variable["name"]) {
                Some(known) => assert_eq!(*known, variable, "two variables of one name differ"),
                None => variables.push(variable),
            }
        }
    }
    merged["validations"] = json!(validations);
    merged["variables"] = json!(variables);
    merged
}

/// Server-side applies the merged object of `boundary`'s `policies` (all enforced) and its
/// binding, labelled as the installation's (without a policy label), named
/// `merged.<boundary>.boundary.palisade.dev`.
pub async fn apply_merged(
    client: &kube::Client,
    installation: &str,
    boundary: &Name,
    policies: &[Policy],
) {
    let rendered: Vec<_> = policies
        .iter()
        .filter_map(|p| palisade_vap::render(boundary, p, installation))
        .collect();
    let specs: Vec<Value> = rendered
        .iter()
        .map(|r| serde_json::to_value(r.policy.spec.as_ref().unwrap()).unwrap())
        .collect();
    let mut labels = rendered[0]
        .policy
        .metadata
        .labels
        .clone()
        .unwrap_or_default();
    labels.remove("palisade.dev/policy");
    let name = format!("merged.{boundary}.boundary.palisade.dev");
    let policy = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": labels},
        "spec": merged_spec(&specs),
    });
    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {"namespaceSelector": {"matchLabels": {"palisade.dev/boundary": boundary.as_str()}}},
        },
    });
    let params = PatchParams::apply("palisade-bench").force();
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(policy))
        .await
        .unwrap();
    Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(binding))
        .await
        .unwrap();
}
