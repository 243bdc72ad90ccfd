//! The shared layout (docs/decisions.md, "Admission objects shared by boundaries"): per
//! installation and cluster ONE `ValidatingAdmissionPolicy` that reads each policy's rules from
//! a parameter object, two bindings (enforce: `Deny`; audit: `Warn`, `Audit`), and per policy
//! and boundary namespace one `BoundaryPolicy` (`palisade.dev/v1`, a namespaced custom
//! resource) holding the policy's rules and its message texts.
//!
//! The bindings leave `paramRef.namespace` unset, so the API server looks a request's
//! parameters up in the request's own namespace: what every request is matched against is the
//! same 1 policy and 2 bindings however many boundaries share the cluster, and a policy change
//! writes parameter objects only, so the API server never recompiles (the CEL is fixed).
//!
//! Every message text is made here, by `palisade_policy::message`, and carried in the
//! parameters; the CEL only picks the first violation and inserts the image or the value found,
//! exactly as the per-policy CEL does.

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, ParamKind, ParamRef, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};
use palisade_policy::image_ref::RegistryPrefix;
use palisade_policy::message::{self, MAX_MESSAGE_BYTES};
use palisade_policy::{Exception, Mode, Name, Policy, Rule, RuleKind};
use serde_json::{json, Value};

use crate::cel::{EPHEMERAL_REQUEST, IMAGES, NOT_LATEST, POD_SPEC};
use crate::layout::Rolling;
use crate::render::{
    labels, match_conditions, resource_rules, BOUNDARY_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL,
};

/// The parameters' API group, version, kind and resource.
pub const PARAMS_GROUP: &str = "palisade.dev";
pub const PARAMS_VERSION: &str = "v1";
pub const PARAMS_KIND: &str = "BoundaryPolicy";
pub const PARAMS_PLURAL: &str = "boundarypolicies";
/// `boundarypolicies.palisade.dev`, the custom resource definition's name.
pub const PARAMS_CRD: &str = "boundarypolicies.palisade.dev";
pub use palisade_policy::labels::MODE_LABEL;

/// The static message, shown only if the message expression itself fails (it does not on any
/// input the corpus knows).
pub const SHARED_STATIC_MESSAGE: &str = "A palisade policy denied the request.";

/// `<installation>.policies.palisade.dev`, the shared `ValidatingAdmissionPolicy`.
pub fn shared_policy_name(installation: &str) -> String {
    format!("{installation}.policies.palisade.dev")
}

/// `<installation>.enforce.palisade.dev` or `<installation>.audit.palisade.dev`.
pub fn shared_binding_name(installation: &str, mode: Mode) -> String {
    format!("{installation}.{}.palisade.dev", mode.as_str())
}

/// `<policy>.<installation>`, a policy's parameter object in each namespace of its boundary.
pub fn parameters_name(installation: &str, policy: &Name) -> String {
    format!("{policy}.{installation}")
}

/// The shared objects of one installation in one cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct SharedObjects {
    pub policy: ValidatingAdmissionPolicy,
    pub enforce: ValidatingAdmissionPolicyBinding,
    pub audit: ValidatingAdmissionPolicyBinding,
}

/// The labels of the shared objects: palisade's and the installation's, no boundary (a
/// boundary's garbage collection never selects them).
fn installation_labels(installation: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        (MANAGED_BY_LABEL.to_owned(), "palisade".to_owned()),
        (INSTALLATION_LABEL.to_owned(), installation.to_owned()),
    ])
}

/// Whether label `l` (a parameter's `{key, value?}`) holds on the object.
const LABEL_OK: &str = "(has(object.metadata.labels) && l.key in object.metadata.labels && (!has(l.value) || object.metadata.labels[l.key] == l.value))";

/// Whether image `i` is under one of rule `r`'s registries.
const REGISTRY_OK: &str = "r.registries.exists(p, i == p || i.startsWith(p + '/'))";

/// Whether exception `x` (of rule `r`, in the request's namespace) matches the object by its
/// own labels (SPEC 7).
const EXCEPTION_MATCHES: &str = "(!has(x.labels) || x.labels.all(l, has(object.metadata.labels) && l.key in object.metadata.labels && object.metadata.labels[l.key] == l.value))";

/// Whether exception `x` lists image `i` (every image when it lists none).
const EXCEPTION_IMAGE: &str = "(!has(x.images) || size(x.images) == 0 || i in x.images)";

/// The images rule `r` judges: every image, less those an exception of `r` lets past.
fn rule_images() -> String {
    format!("variables.images.filter(i, !(has(r.exceptions) && r.exceptions.exists(x, {EXCEPTION_MATCHES} && {EXCEPTION_IMAGE})))")
}

fn rule_ok() -> String {
    let images = rule_images();
    format!(
        "(r.kind == 'RequiredLabels' ? ({EPHEMERAL_REQUEST} || r.labels.all(l, {LABEL_OK}) || (has(r.exceptions) && r.exceptions.exists(x, {EXCEPTION_MATCHES} && variables.images.all(i, {EXCEPTION_IMAGE})))) : (r.kind == 'AllowedRegistries' ? {images}.all(i, {REGISTRY_OK}) : (r.kind == 'DisallowLatestTag' ? {images}.all(i, {NOT_LATEST}) : false)))"
    )
}

/// The raw message of the first failed rule `r`: the first failed label's, or the rule's
/// head + the first failing image + its tail.
fn raw_message() -> String {
    let images = rule_images();
    format!(
        "[variables.failed[0]].map(r, r.kind == 'RequiredLabels' ? [r.labels.filter(l, !{LABEL_OK})[0]].map(l, has(l.value) ? l.head + (has(object.metadata.labels) && l.key in object.metadata.labels ? (object.metadata.labels[l.key] == '' ? '\"\"' : object.metadata.labels[l.key]) : '<unset>') : l.missing)[0] : r.head + {images}.filter(i, !(r.kind == 'AllowedRegistries' ? {REGISTRY_OK} : {NOT_LATEST}))[0] + r.tail)[0]"
    )
}

/// Renders the installation's shared policy and its two bindings.
pub fn shared_objects(installation: &str) -> SharedObjects {
    let name = shared_policy_name(installation);
    let metadata = |name: String| ObjectMeta {
        name: Some(name),
        labels: Some(installation_labels(installation)),
        ..ObjectMeta::default()
    };
    let variables = [
        ("podSpec", POD_SPEC.to_owned()),
        ("images", IMAGES.to_owned()),
        (
            "failed",
            format!("params.spec.rules.filter(r, !{})", rule_ok()),
        ),
        ("raw", raw_message()),
    ];
    let policy = ValidatingAdmissionPolicy {
        metadata: metadata(name.clone()),
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            param_kind: Some(ParamKind {
                api_version: Some(format!("{PARAMS_GROUP}/{PARAMS_VERSION}")),
                kind: Some(PARAMS_KIND.to_owned()),
            }),
            // The bindings' namespaces, here too: while the API server cannot resolve the
            // parameters' kind (the definition deleted, or not yet discovered), the policy
            // fails closed on what it matches, and this keeps that to boundaries' namespaces.
            match_constraints: Some(MatchResources {
                match_policy: Some("Equivalent".to_owned()),
                resource_rules: Some(resource_rules()),
                namespace_selector: Some(boundary_namespaces()),
                ..MatchResources::default()
            }),
            match_conditions: Some(match_conditions()),
            variables: Some(
                variables
                    .into_iter()
                    .map(|(name, expression)| Variable {
                        name: name.to_owned(),
                        expression,
                    })
                    .collect(),
            ),
            validations: Some(vec![Validation {
                expression: "size(variables.failed) == 0".to_owned(),
                // Parameters are untyped when the policy is compiled: `string(...)` makes the
                // message a string for the type check.
                message_expression: Some(format!(
                    "string(variables.raw.contains('\\n') || size(bytes(string(variables.raw))) > {MAX_MESSAGE_BYTES} ? variables.failed[0].static : variables.raw)"
                )),
                message: Some(SHARED_STATIC_MESSAGE.to_owned()),
                reason: None,
            }]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    };
    let binding = |mode: Mode, actions: &[&str]| ValidatingAdmissionPolicyBinding {
        metadata: metadata(shared_binding_name(installation, mode)),
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name.clone()),
            validation_actions: Some(actions.iter().map(|a| (*a).to_owned()).collect()),
            param_ref: Some(ParamRef {
                // No namespace: the parameters are looked up in the request's namespace.
                selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([
                        (INSTALLATION_LABEL.to_owned(), installation.to_owned()),
                        (MODE_LABEL.to_owned(), mode.as_str().to_owned()),
                    ])),
                    ..LabelSelector::default()
                }),
                // A namespace of a boundary without policies of this mode has none.
                parameter_not_found_action: Some("Allow".to_owned()),
                ..ParamRef::default()
            }),
            match_resources: Some(MatchResources {
                namespace_selector: Some(boundary_namespaces()),
                ..MatchResources::default()
            }),
        }),
    };
    SharedObjects {
        enforce: binding(Mode::Enforce, &["Deny"]),
        audit: binding(Mode::Audit, &["Warn", "Audit"]),
        policy,
    }
}

/// Namespaces labelled for some boundary.
fn boundary_namespaces() -> LabelSelector {
    LabelSelector {
        match_expressions: Some(vec![LabelSelectorRequirement {
            key: BOUNDARY_LABEL.to_owned(),
            operator: "Exists".to_owned(),
            values: None,
        }]),
        ..LabelSelector::default()
    }
}

/// The custom resource definition of the parameters (`BoundaryPolicy`, namespaced), with a
/// structural schema of what [`parameters`] writes.
pub fn parameters_definition() -> Value {
    let string = json!({"type": "string"});
    let label = json!({
        "type": "object",
        "required": ["key"],
        "properties": {"key": string, "value": string, "missing": string, "head": string},
    });
    let exception = json!({
        "type": "object",
        "properties": {
            "name": string,
            "labels": {"type": "array", "maxItems": 64, "items": {
                "type": "object", "required": ["key", "value"],
                "properties": {"key": string, "value": string},
            }},
            "images": {"type": "array", "maxItems": 64, "items": string},
        },
    });
    let rule = json!({
        "type": "object",
        "required": ["kind", "static"],
        "properties": {
            "kind": string, "static": string, "head": string, "tail": string,
            "registries": {"type": "array", "items": string},
            "labels": {"type": "array", "items": label},
            "exceptions": {"type": "array", "maxItems": 100, "items": exception},
        },
    });
    let spec = json!({
        "type": "object",
        "required": ["policy", "boundary", "mode", "rules"],
        "properties": {
            "policy": string, "boundary": string, "mode": string,
            "rules": {"type": "array", "items": rule},
        },
    });
    let schema = json!({
        "type": "object",
        "description": "One palisade policy's admission rules, written by palisade into each namespace of the policy's boundary; read by palisade's ValidatingAdmissionPolicy.",
        "properties": {"spec": spec},
    });
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": PARAMS_CRD,
            "labels": {MANAGED_BY_LABEL: "palisade"},
        },
        "spec": {
            "group": PARAMS_GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": PARAMS_PLURAL,
                "singular": "boundarypolicy",
                "kind": PARAMS_KIND,
                "listKind": "BoundaryPolicyList",
            },
            "versions": [{
                "name": PARAMS_VERSION,
                "served": true,
                "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Policy", "type": "string", "jsonPath": ".spec.policy"},
                    {"name": "Mode", "type": "string", "jsonPath": ".spec.mode"},
                ],
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    })
}

/// The parameters of `rule`, `None` for a rule that is not an admission rule.
fn rule_parameters(policy: &Name, rule: &Rule) -> Option<Value> {
    let split = |full: String| -> (String, String) {
        let (head, tail) = full.split_once('\u{0}').unwrap_or((&full, ""));
        (head.to_owned(), tail.to_owned())
    };
    let kind = rule.kind();
    let static_message = message::static_message(policy, kind);
    Some(match rule {
        Rule::AllowedComputePlans(_) => return None,
        Rule::RequiredLabels(requirements) => {
            let labels: Vec<Value> = requirements
                .iter()
                .map(|requirement| {
                    let key = requirement.key().as_str();
                    match requirement.value() {
                        None => json!({
                            "key": key,
                            "missing": message::label_missing(policy, key),
                        }),
                        Some(value) => {
                            let full = message::label_wrong(policy, key, value.as_str(), Some(""));
                            let head = full.strip_suffix("\"\"").unwrap_or(&full);
                            json!({"key": key, "value": value.as_str(), "head": head})
                        }
                    }
                })
                .collect();
            json!({"kind": kind.as_str(), "static": static_message, "labels": labels})
        }
        Rule::AllowedRegistries(prefixes) => {
            let prefixes: Vec<&str> = prefixes.iter().map(RegistryPrefix::as_str).collect();
            let (head, tail) = split(message::image_not_under(policy, "\u{0}", &prefixes));
            json!({"kind": kind.as_str(), "static": static_message, "registries": prefixes,
                   "head": head, "tail": tail})
        }
        Rule::DisallowLatestTag => {
            let (head, tail) = split(message::image_latest(policy, "\u{0}"));
            json!({"kind": RuleKind::DisallowLatestTag.as_str(), "static": static_message,
                   "head": head, "tail": tail})
        }
    })
}

/// The parameter object of `policy` of `boundary` for one namespace of the boundary; `None`
/// when the policy has no admission rules (nothing is written for it).
pub fn parameters(
    boundary: &Name,
    policy: &Policy,
    installation: &str,
    namespace: &str,
) -> Option<Value> {
    parameters_excepted(boundary, policy, installation, namespace, &[])
}

/// [`parameters`] with the exceptions in force in the cluster (SPEC 7): each rule carries the
/// exceptions of this policy that except it and apply in `namespace`, as their labels and
/// images (the namespace is decided here, the rest by the shared CEL).
pub fn parameters_excepted(
    boundary: &Name,
    policy: &Policy,
    installation: &str,
    namespace: &str,
    exceptions: &[&Exception],
) -> Option<Value> {
    let rules: Vec<Value> = policy
        .rules()
        .iter()
        .filter_map(|rule| {
            let mut parameters = rule_parameters(policy.name(), rule)?;
            let excepting: Vec<Value> = exceptions
                .iter()
                .filter(|x| &x.policy == policy.name() && x.excepts_admission(rule.kind()))
                .filter_map(|x| {
                    let m = x.object_match.as_ref()?;
                    let here = m.namespaces.is_empty()
                        || m.namespaces.iter().any(|n| n.as_str() == namespace);
                    here.then(|| {
                        let labels: Vec<Value> = m
                            .labels
                            .iter()
                            .map(|(k, v)| json!({"key": k.as_str(), "value": v.as_str()}))
                            .collect();
                        json!({"name": x.name.as_str(), "labels": labels, "images": m.images})
                    })
                })
                .collect();
            if !excepting.is_empty() {
                parameters["exceptions"] = Value::Array(excepting);
            }
            Some(parameters)
        })
        .collect();
    if rules.is_empty() {
        return None;
    }
    let mode = policy.mode().as_str();
    let mut labels = labels(installation, boundary, policy.name());
    labels.insert(MODE_LABEL.to_owned(), mode.to_owned());
    Some(json!({
        "apiVersion": format!("{PARAMS_GROUP}/{PARAMS_VERSION}"),
        "kind": PARAMS_KIND,
        "metadata": {
            "name": parameters_name(installation, policy.name()),
            "namespace": namespace,
            "labels": labels,
        },
        "spec": {
            "policy": policy.name().as_str(),
            "boundary": boundary.as_str(),
            "mode": mode,
            "rules": rules,
        },
    }))
}

/// The parameter object of a policy being rolled out (SPEC 8) over `previous`, for one
/// namespace of its boundary: where the stage has not reached, `previous`'s exactly as before
/// (none for a new policy); where it has, none, for there the new version judges from objects of
/// its own ([`crate::per_policy::render_staged`], without a previous version), as it does in
/// audit everywhere else, so that what it denies is counted apart from the shared objects.
pub fn parameters_staged(
    boundary: &Name,
    previous: Option<&Policy>,
    rolling: Rolling<'_>,
    installation: &str,
    namespace: &str,
    exceptions: &[&Exception],
) -> Option<Value> {
    if rolling.left.iter().any(|n| n.as_str() == namespace) {
        return None;
    }
    parameters_excepted(boundary, previous?, installation, namespace, exceptions)
}
