//! Admission evaluation of any Kubernetes object (SPEC 3): the same verdict and messages the
//! rendered ValidatingAdmissionPolicies give on a real API server.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::exception::Exception;
use crate::image_ref::ImageRef;
use crate::message;
use crate::name::Name;
use crate::policy::{Mode, Policy, Rule, RuleKind};

/// The kinds admission rules check, with their API group.
pub const CHECKED_KINDS: [(&str, &str, &str); 7] = [
    ("", "Pod", "pods"),
    ("apps", "Deployment", "deployments"),
    ("apps", "ReplicaSet", "replicasets"),
    ("apps", "StatefulSet", "statefulsets"),
    ("apps", "DaemonSet", "daemonsets"),
    ("batch", "Job", "jobs"),
    ("batch", "CronJob", "cronjobs"),
];

/// Where a kind keeps its pod spec.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodSpecLocation {
    /// `spec` (Pod).
    Spec,
    /// `spec.template.spec` (Deployment, ReplicaSet, StatefulSet, DaemonSet, Job).
    Template,
    /// `spec.jobTemplate.spec.template.spec` (CronJob).
    JobTemplate,
}

impl PodSpecLocation {
    /// The checked kind's pod-spec location; `None` for kinds that are not checked.
    pub fn of(group: &str, kind: &str) -> Option<Self> {
        CHECKED_KINDS
            .iter()
            .find(|(g, k, _)| *g == group && *k == kind)
            .map(|_| match kind {
                "Pod" => PodSpecLocation::Spec,
                "CronJob" => PodSpecLocation::JobTemplate,
                _ => PodSpecLocation::Template,
            })
    }

    /// The JSON path segments to the pod spec.
    pub fn path(self) -> &'static [&'static str] {
        match self {
            PodSpecLocation::Spec => &["spec"],
            PodSpecLocation::Template => &["spec", "template", "spec"],
            PodSpecLocation::JobTemplate => &["spec", "jobTemplate", "spec", "template", "spec"],
        }
    }
}

/// What the rules read of an object, extracted once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AdmissionObject {
    pub api_version: String,
    pub kind: String,
    pub name: Option<String>,
    pub namespace: Option<String>,
    /// Where the pod spec is; `None` when the kind is not checked.
    pub pod_spec: Option<PodSpecLocation>,
    pub terminating: bool,
    labels: BTreeMap<String, String>,
    /// Images of `containers`, then of `initContainers`, then the references of the image
    /// volumes (SPEC 3.1, v3.2), in order.
    images: Vec<String>,
    /// Images of a Pod's `ephemeralContainers` (SPEC 3.2, v3.1), in order.
    ephemeral_images: Vec<String>,
}

/// The object is not a Kubernetes object the rules can read; `pointer` names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{pointer}: {problem}")]
pub struct ObjectError {
    pub pointer: String,
    pub problem: String,
}

fn object_error(pointer: impl Into<String>, problem: impl Into<String>) -> ObjectError {
    ObjectError {
        pointer: pointer.into(),
        problem: problem.into(),
    }
}

/// `value` at `pointer`, a JSON Pointer of plain segments (no `~` escapes: the fixed paths the
/// rules read). Unlike `Value::pointer` it allocates nothing, which matters when a preview
/// reads a hundred thousand objects.
pub(crate) fn at<'v>(value: &'v Value, pointer: &str) -> Option<&'v Value> {
    pointer
        .split('/')
        .skip(1)
        .try_fold(value, |current, segment| match current {
            Value::Object(map) => map.get(segment),
            Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
            _ => None,
        })
}

fn string_field(object: &Value, pointer: &str) -> Result<Option<String>, ObjectError> {
    match at(object, pointer) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(object_error(pointer, "must be a string")),
    }
}

impl AdmissionObject {
    /// Reads an object as JSON (decoded from YAML or JSON). Only the fields the rules read are
    /// checked for their types.
    pub fn from_json(object: &Value) -> Result<Self, ObjectError> {
        if !object.is_object() {
            return Err(object_error("", "a Kubernetes object must be a mapping"));
        }
        let api_version = string_field(object, "/apiVersion")?
            .filter(|v| !v.is_empty())
            .ok_or_else(|| object_error("/apiVersion", "is required"))?;
        let kind = string_field(object, "/kind")?
            .filter(|v| !v.is_empty())
            .ok_or_else(|| object_error("/kind", "is required"))?;
        let group = api_version
            .rsplit_once('/')
            .map(|(group, _)| group)
            .unwrap_or("");
        let pod_spec = PodSpecLocation::of(group, &kind);
        let name = string_field(object, "/metadata/name")?;
        let namespace = string_field(object, "/metadata/namespace")?;
        let terminating = !matches!(
            at(object, "/metadata/deletionTimestamp"),
            None | Some(Value::Null)
        );
        // The labels admission sees: the API server defaults some kinds first (SPEC 4.2).
        let source = crate::defaulting::label_source(object);
        let labels_pointer = source.pointer;
        let mut labels = BTreeMap::new();
        match at(object, labels_pointer) {
            None | Some(Value::Null) => {}
            Some(Value::Object(map)) => {
                for (key, value) in map {
                    match value {
                        Value::String(text) => {
                            labels.insert(key.clone(), text.clone());
                        }
                        _ => {
                            return Err(object_error(
                                format!("{labels_pointer}/{}", escape_pointer(key)),
                                "label values must be strings (quote them in YAML)",
                            ))
                        }
                    }
                }
            }
            Some(_) => return Err(object_error(labels_pointer, "must be a mapping")),
        }
        for (key, value) in source.generated {
            labels.entry(key.to_owned()).or_insert(value);
        }
        let mut images = Vec::new();
        let mut ephemeral_images = Vec::new();
        if let Some(location) = pod_spec {
            let spec_pointer: String = location.path().iter().map(|s| format!("/{s}")).collect();
            if let Some(spec) = at(object, &spec_pointer).filter(|v| !v.is_null()) {
                for list in ["containers", "initContainers"] {
                    container_images(spec, &spec_pointer, list, &mut images)?;
                }
                volume_images(spec, &spec_pointer, &mut images)?;
                // Only a Pod runs ephemeral containers (a template cannot hold them).
                if location == PodSpecLocation::Spec {
                    container_images(
                        spec,
                        &spec_pointer,
                        "ephemeralContainers",
                        &mut ephemeral_images,
                    )?;
                }
            }
        }
        Ok(AdmissionObject {
            api_version,
            kind,
            name,
            namespace,
            pod_spec,
            terminating,
            labels,
            images,
            ephemeral_images,
        })
    }

    pub fn is_checked(&self) -> bool {
        self.pod_spec.is_some()
    }

    /// Images of `containers`, then `initContainers`, then image volumes' references, in order.
    pub fn images(&self) -> impl Iterator<Item = &str> {
        self.images.iter().map(String::as_str)
    }

    /// Images of a Pod's `ephemeralContainers`, in order.
    pub fn ephemeral_images(&self) -> impl Iterator<Item = &str> {
        self.ephemeral_images.iter().map(String::as_str)
    }

    /// The images the image rules judge in `request`: on the `ephemeralcontainers`
    /// subresource only the ephemeral containers' (the others were judged when the Pod was
    /// made), otherwise containers, init containers, image volumes, then ephemeral containers
    /// (SPEC 3.2).
    pub fn judged_images<'a>(
        &'a self,
        request: &AdmissionRequest,
    ) -> Box<dyn Iterator<Item = &'a str> + 'a> {
        match request.subresource {
            Subresource::EphemeralContainers => Box::new(self.ephemeral_images()),
            Subresource::None => Box::new(self.images().chain(self.ephemeral_images())),
        }
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).map(String::as_str)
    }
}

/// Appends the images of the pod spec's container list `list` (`None`: the list is absent).
fn container_images(
    spec: &Value,
    spec_pointer: &str,
    list: &str,
    images: &mut Vec<String>,
) -> Result<(), ObjectError> {
    let list_pointer = format!("{spec_pointer}/{list}");
    match spec.get(list) {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(containers)) => {
            for (index, container) in containers.iter().enumerate() {
                let image = string_field(container, "/image").map_err(|_| {
                    object_error(format!("{list_pointer}/{index}/image"), "must be a string")
                })?;
                images.push(image.unwrap_or_default());
            }
            Ok(())
        }
        Some(_) => Err(object_error(list_pointer, "must be a list")),
    }
}

/// Appends the `reference` of each image volume of the pod spec (SPEC 3.1, v3.2: the node
/// pulls it like a container's image), in the order of `volumes`; a volume of another kind is
/// skipped, an image volume without a reference counts as `''` (as a container without an
/// image does).
fn volume_images(
    spec: &Value,
    spec_pointer: &str,
    images: &mut Vec<String>,
) -> Result<(), ObjectError> {
    let list_pointer = format!("{spec_pointer}/volumes");
    match spec.get("volumes") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::Array(volumes)) => {
            for (index, volume) in volumes.iter().enumerate() {
                match volume.get("image") {
                    None | Some(Value::Null) => {}
                    Some(source) => {
                        let reference = string_field(source, "/reference").map_err(|_| {
                            object_error(
                                format!("{list_pointer}/{index}/image/reference"),
                                "must be a string",
                            )
                        })?;
                        images.push(reference.unwrap_or_default());
                    }
                }
            }
            Ok(())
        }
        Some(_) => Err(object_error(list_pointer, "must be a list")),
    }
}

fn escape_pointer(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

/// The operation of an admission request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Operation {
    #[default]
    Create,
    Update,
}

/// The subresource a request is for: the main resource, or a Pod's `ephemeralcontainers`
/// (`kubectl debug`; SPEC 3.2). Other subresources are not checked (SPEC 3.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Subresource {
    #[default]
    None,
    EphemeralContainers,
}

/// Who sends the request and how. `palisade check` evaluates as a CREATE by a user.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AdmissionRequest {
    pub operation: Operation,
    pub username: String,
    pub subresource: Subresource,
    /// On an UPDATE: the object's `spec` is the same as before (what lets a terminating
    /// object's update pass, SPEC 3.1 v3.1: removing finalizers, not swapping an image).
    pub spec_unchanged: bool,
}

impl AdmissionRequest {
    /// An UPDATE of a terminating object that leaves its spec unchanged is not checked (SPEC
    /// 3.1, v3.1); a CREATE always is (the API server clears `deletionTimestamp` on create).
    pub fn is_exempt_for_terminating(&self, object: &AdmissionObject) -> bool {
        self.operation == Operation::Update && object.terminating && self.spec_unchanged
    }

    /// UPDATEs by Kubernetes' own controllers are not checked (SPEC 3.1).
    pub fn is_controller_update(&self) -> bool {
        self.operation == Operation::Update
            && (self.username == "system:kube-controller-manager"
                || self
                    .username
                    .starts_with("system:serviceaccount:kube-system:"))
    }
}

/// One denial (or, for audit policies, one would-be denial).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Denial {
    pub policy: Name,
    pub rule: RuleKind,
    pub message: String,
}

/// The verdict over every policy of the boundary.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct AdmissionVerdict {
    /// False when the kind is not checked at all.
    pub checked: bool,
    /// True when the request is exempt (terminating object, controller update).
    pub exempt: bool,
    /// Enforce-mode denials, one per policy, by policy name.
    pub denials: Vec<Denial>,
    /// Audit-mode would-be denials, one per policy, by policy name.
    pub warnings: Vec<Denial>,
}

impl AdmissionVerdict {
    pub fn admitted(&self) -> bool {
        self.denials.is_empty()
    }
}

/// The first violation of `policy` by `object`, as the user sees it: rules in order, labels in
/// the rule's order, images containers first. `None` when the policy admits the object.
pub fn first_violation(policy: &Policy, object: &AdmissionObject) -> Option<Denial> {
    first_violation_in(policy, object, &AdmissionRequest::default())
}

/// [`first_violation`] for `request` (its subresource decides what is judged, SPEC 3.2).
pub fn first_violation_in(
    policy: &Policy,
    object: &AdmissionObject,
    request: &AdmissionRequest,
) -> Option<Denial> {
    let ephemeral = request.subresource == Subresource::EphemeralContainers;
    for rule in policy.rules() {
        let raw = match rule {
            Rule::AllowedComputePlans(_) => None,
            // Labels are not judged on the ephemeral-containers subresource.
            Rule::RequiredLabels(_) if ephemeral => None,
            Rule::RequiredLabels(requirements) => {
                label_violation(policy.name(), requirements, object)
            }
            Rule::AllowedRegistries(_) | Rule::DisallowLatestTag => {
                image_rule_violation(policy.name(), rule, object.judged_images(request))
            }
        };
        if let Some(raw) = raw {
            return Some(Denial {
                policy: policy.name().clone(),
                rule: rule.kind(),
                message: message::finalize(raw, policy.name(), rule.kind()),
            });
        }
    }
    None
}

/// The raw message of the first of `requirements` the object's labels do not meet.
fn label_violation(
    policy: &Name,
    requirements: &[crate::label::LabelRequirement],
    object: &AdmissionObject,
) -> Option<String> {
    requirements.iter().find_map(|requirement| {
        let found = object.label(requirement.key().as_str());
        if requirement.is_met_by(found) {
            return None;
        }
        Some(match requirement.value() {
            None => message::label_missing(policy, requirement.key().as_str()),
            Some(want) => {
                message::label_wrong(policy, requirement.key().as_str(), want.as_str(), found)
            }
        })
    })
}

/// [`first_violation_in`] with `exceptions` of the policy in force (already chosen for the
/// cluster and the time, SPEC 7): a rule an exception excepts is not judged on an object the
/// exception matches, and of an image rule only the images it does not list are judged.
/// Answers the denial, if any, and the exceptions that let the object past a rule that would
/// otherwise have denied it.
pub fn first_violation_excepted<'e>(
    policy: &Policy,
    object: &AdmissionObject,
    request: &AdmissionRequest,
    exceptions: &[&'e Exception],
) -> (Option<Denial>, Vec<&'e Exception>) {
    let unexcepted = first_violation_in(policy, object, request);
    if unexcepted.is_none() || exceptions.is_empty() {
        return (unexcepted, Vec::new());
    }
    let namespace = object.namespace.as_deref();
    let ephemeral = request.subresource == Subresource::EphemeralContainers;
    let mut used: Vec<&'e Exception> = Vec::new();
    for rule in policy.rules() {
        let relevant: Vec<&'e Exception> = exceptions
            .iter()
            .copied()
            .filter(|x| &x.policy == policy.name() && x.excepts_admission(rule.kind()))
            .filter(|x| {
                x.object_match
                    .as_ref()
                    .is_some_and(|m| m.matches(namespace, |k| object.label(k)))
            })
            .collect();
        let raw = match rule {
            Rule::AllowedComputePlans(_) => None,
            Rule::RequiredLabels(_) if ephemeral => None,
            Rule::RequiredLabels(requirements) => {
                let lifting = relevant.iter().copied().find(|x| {
                    x.object_match
                        .as_ref()
                        .is_some_and(|m| object.judged_images(request).all(|i| m.excepts_image(i)))
                });
                match (
                    label_violation(policy.name(), requirements, object),
                    lifting,
                ) {
                    (Some(_), Some(x)) => {
                        used.push(x);
                        None
                    }
                    (raw, _) => raw,
                }
            }
            Rule::AllowedRegistries(_) | Rule::DisallowLatestTag => {
                let excepted_by = |image: &str| {
                    relevant.iter().copied().find(|x| {
                        x.object_match
                            .as_ref()
                            .is_some_and(|m| m.excepts_image(image))
                    })
                };
                let all: Vec<&str> = object.judged_images(request).collect();
                let judged: Vec<&str> = all
                    .iter()
                    .copied()
                    .filter(|i| excepted_by(i).is_none())
                    .collect();
                if image_rule_violation(policy.name(), rule, all.iter().copied()).is_some() {
                    for image in &all {
                        if let Some(x) = excepted_by(image) {
                            if !used.iter().any(|u| u.name == x.name) {
                                used.push(x);
                            }
                        }
                    }
                }
                image_rule_violation(policy.name(), rule, judged.into_iter())
            }
        };
        if let Some(raw) = raw {
            return (
                Some(Denial {
                    policy: policy.name().clone(),
                    rule: rule.kind(),
                    message: message::finalize(raw, policy.name(), rule.kind()),
                }),
                used,
            );
        }
    }
    (None, used)
}

/// The raw message of image rule `rule` for the first of `images` it denies (`None` for the
/// other rules, or when it denies none).
fn image_rule_violation<'a>(
    policy: &Name,
    rule: &Rule,
    mut images: impl Iterator<Item = &'a str>,
) -> Option<String> {
    match rule {
        Rule::AllowedRegistries(prefixes) => images
            .find(|image| {
                !prefixes
                    .iter()
                    .any(|prefix| ImageRef::new(image).is_under(prefix))
            })
            .map(|image| {
                let names: Vec<&str> = prefixes.iter().map(|p| p.as_str()).collect();
                message::image_not_under(policy, image, &names)
            }),
        Rule::DisallowLatestTag => images
            .find(|image| ImageRef::new(image).is_latest())
            .map(|image| message::image_latest(policy, image)),
        Rule::AllowedComputePlans(_) | Rule::RequiredLabels(_) => None,
    }
}

/// The first of `policy`'s image rules (in the policy's order) that denies a container
/// running `image`, with the message the cluster gives: what palisade checks of the images
/// the platform itself runs (builders, built images, the file server) before it runs them.
pub fn image_denial(policy: &Policy, image: &str) -> Option<Denial> {
    policy.rules().iter().find_map(|rule| {
        image_rule_violation(policy.name(), rule, std::iter::once(image)).map(|raw| Denial {
            policy: policy.name().clone(),
            rule: rule.kind(),
            message: message::finalize(raw, policy.name(), rule.kind()),
        })
    })
}

/// Evaluates every policy of a boundary against an object in one of its namespaces.
pub fn evaluate(
    policies: &[Policy],
    object: &AdmissionObject,
    request: &AdmissionRequest,
) -> AdmissionVerdict {
    if !object.is_checked() {
        return AdmissionVerdict::default();
    }
    let mut verdict = AdmissionVerdict {
        checked: true,
        ..AdmissionVerdict::default()
    };
    if request.is_exempt_for_terminating(object) || request.is_controller_update() {
        verdict.exempt = true;
        return verdict;
    }
    for policy in policies {
        if let Some(denial) = first_violation_in(policy, object, request) {
            match policy.mode() {
                Mode::Enforce => verdict.denials.push(denial),
                Mode::Audit => verdict.warnings.push(denial),
            }
        }
    }
    verdict.denials.sort_by(|a, b| a.policy.cmp(&b.policy));
    verdict.warnings.sort_by(|a, b| a.policy.cmp(&b.policy));
    verdict
}

/// [`evaluate`] with the exceptions in force (SPEC 7; already chosen for the time and the
/// cluster): a policy an exception lets the object past does not deny it (nor warn). Answers
/// the verdict and the exceptions that let the object past, once each.
pub fn evaluate_excepted<'e>(
    policies: &[Policy],
    object: &AdmissionObject,
    request: &AdmissionRequest,
    exceptions: &[&'e Exception],
) -> (AdmissionVerdict, Vec<&'e Exception>) {
    if exceptions.is_empty() {
        return (evaluate(policies, object, request), Vec::new());
    }
    if !object.is_checked() {
        return (AdmissionVerdict::default(), Vec::new());
    }
    let mut verdict = AdmissionVerdict {
        checked: true,
        ..AdmissionVerdict::default()
    };
    if request.is_exempt_for_terminating(object) || request.is_controller_update() {
        verdict.exempt = true;
        return (verdict, Vec::new());
    }
    let mut used: Vec<&'e Exception> = Vec::new();
    for policy in policies {
        let (denial, by) = first_violation_excepted(policy, object, request, exceptions);
        for exception in by {
            if !used.iter().any(|u| u.name == exception.name) {
                used.push(exception);
            }
        }
        if let Some(denial) = denial {
            match policy.mode() {
                Mode::Enforce => verdict.denials.push(denial),
                Mode::Audit => verdict.warnings.push(denial),
            }
        }
    }
    verdict.denials.sort_by(|a, b| a.policy.cmp(&b.policy));
    verdict.warnings.sort_by(|a, b| a.policy.cmp(&b.policy));
    (verdict, used)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pod_spec_location_per_kind_and_group() {
        assert_eq!(PodSpecLocation::of("", "Pod"), Some(PodSpecLocation::Spec));
        assert_eq!(
            PodSpecLocation::of("batch", "CronJob"),
            Some(PodSpecLocation::JobTemplate)
        );
        assert_eq!(
            PodSpecLocation::of("apps", "DaemonSet"),
            Some(PodSpecLocation::Template)
        );
        assert_eq!(PodSpecLocation::of("example.com", "Job"), None);
        assert_eq!(PodSpecLocation::of("apps", "Pod"), None);
    }

    #[test]
    fn images_are_containers_then_init_containers() {
        let object = AdmissionObject::from_json(&json!({
            "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
            "spec": {"jobTemplate": {"spec": {"template": {"spec": {
                "initContainers": [{"name": "i", "image": "init:1"}],
                "containers": [{"name": "a", "image": "a:1"}, {"name": "b"}],
                "ephemeralContainers": [{"name": "e", "image": "debug"}]
            }}}}}
        }))
        .unwrap();
        assert_eq!(object.images().collect::<Vec<_>>(), ["a:1", "", "init:1"]);
    }

    #[test]
    fn bad_fields_are_named() {
        let error = AdmissionObject::from_json(&json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {"version": 1}}
        }))
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "/metadata/labels/version: label values must be strings (quote them in YAML)"
        );
        let error = AdmissionObject::from_json(&json!({"kind": "Pod"})).unwrap_err();
        assert_eq!(error.pointer, "/apiVersion");
    }

    #[test]
    fn controller_updates_are_exempt_but_creates_are_not() {
        let update = AdmissionRequest {
            operation: Operation::Update,
            username: "system:kube-controller-manager".into(),
            ..AdmissionRequest::default()
        };
        assert!(update.is_controller_update());
        let create = AdmissionRequest {
            operation: Operation::Create,
            ..update.clone()
        };
        assert!(!create.is_controller_update());
        let sa = AdmissionRequest {
            operation: Operation::Update,
            username: "system:serviceaccount:kube-system:replicaset-controller".into(),
            ..AdmissionRequest::default()
        };
        assert!(sa.is_controller_update());
        let user_sa = AdmissionRequest {
            operation: Operation::Update,
            username: "system:serviceaccount:shop:deployer".into(),
            ..AdmissionRequest::default()
        };
        assert!(!user_sa.is_controller_update());
    }

    fn policies() -> Vec<Policy> {
        use crate::image_ref::RegistryPrefix;
        use crate::label::LabelRequirement;
        let name = |n: &str| Name::parse(n).unwrap();
        vec![
            Policy::new(
                name("owner-label"),
                Mode::Enforce,
                crate::policy::Scope::AllClusters,
                vec![Rule::RequiredLabels(vec![LabelRequirement::new(
                    crate::label::LabelKey::parse("team").unwrap(),
                    None,
                )])],
            )
            .unwrap(),
            Policy::new(
                name("trusted"),
                Mode::Enforce,
                crate::policy::Scope::AllClusters,
                vec![
                    Rule::AllowedRegistries(vec![RegistryPrefix::parse("ghcr.io/acme").unwrap().0]),
                    Rule::DisallowLatestTag,
                ],
            )
            .unwrap(),
        ]
    }

    fn debugged_pod() -> AdmissionObject {
        AdmissionObject::from_json(&json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok"},
            "spec": {
                "containers": [{"name": "a", "image": "ghcr.io/acme/a:1"}],
                "ephemeralContainers": [{"name": "debugger", "image": "busybox:latest"}]
            }
        }))
        .unwrap()
    }

    fn messages(verdict: &AdmissionVerdict) -> Vec<&str> {
        verdict.denials.iter().map(|d| d.message.as_str()).collect()
    }

    /// SPEC 3.2 (v3.1): `kubectl debug` is an UPDATE of `pods/ephemeralcontainers`; the image
    /// rules judge the ephemeral containers only, the label rule does not judge it.
    #[test]
    fn ephemeral_containers_are_judged_by_the_image_rules_only() {
        let request = AdmissionRequest {
            operation: Operation::Update,
            username: "mallory".into(),
            subresource: Subresource::EphemeralContainers,
            spec_unchanged: false,
        };
        let verdict = evaluate(&policies(), &debugged_pod(), &request);
        assert_eq!(
            messages(&verdict),
            ["Policy 'trusted' (AllowedRegistries) denied image busybox:latest: it is not under ghcr.io/acme."]
        );
        // A Pod manifest (palisade check: a CREATE) is judged on every list, ephemeral
        // containers after containers and init containers, and on its labels.
        let verdict = evaluate(&policies(), &debugged_pod(), &AdmissionRequest::default());
        assert_eq!(
            messages(&verdict),
            [
                "Policy 'owner-label' (RequiredLabels) requires the label team.",
                "Policy 'trusted' (AllowedRegistries) denied image busybox:latest: it is not under ghcr.io/acme."
            ]
        );
        assert_eq!(
            debugged_pod().images().collect::<Vec<_>>(),
            ["ghcr.io/acme/a:1"]
        );
        assert_eq!(
            debugged_pod().ephemeral_images().collect::<Vec<_>>(),
            ["busybox:latest"]
        );
    }

    fn pod_with_volumes(volumes: serde_json::Value) -> AdmissionObject {
        AdmissionObject::from_json(&json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "labels": {"team": "web"}},
            "spec": {"template": {"spec": {
                "containers": [{"name": "app", "image": "ghcr.io/acme/app:1.0"}],
                "initContainers": [{"name": "init", "image": "ghcr.io/acme/init:1.0"}],
                "volumes": volumes
            }}}
        }))
        .unwrap()
    }

    /// SPEC 3.1-3.3 (v3.2): an image volume's `reference` is pulled like a container's image,
    /// so the image rules judge it, after containers and init containers, in `volumes` order.
    /// Other volumes are not images; a volume without a reference counts as `''`.
    #[test]
    fn image_volumes_are_judged_after_containers_and_init_containers() {
        let cases: [(&str, serde_json::Value, &[&str]); 6] = [
            ("no volumes", json!([]), &[]),
            (
                "other kinds of volume are not images",
                json!([{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "evil.io/x"}}]),
                &[],
            ),
            (
                "a compliant image volume",
                json!([{"name": "model", "image": {"reference": "ghcr.io/acme/model:2"}}]),
                &[],
            ),
            (
                "the issue's miner: registry first (rules in the policy's order)",
                json!([{"name": "m", "image": {"reference": "evil.io/miner:latest", "pullPolicy": "Always"}}]),
                &["Policy 'trusted' (AllowedRegistries) denied image evil.io/miner:latest: it is not under ghcr.io/acme."],
            ),
            (
                "a latest reference under an allowed registry",
                json!([{"name": "ok", "image": {"reference": "ghcr.io/acme/model:3"}}, {"name": "m", "image": {"reference": "ghcr.io/acme/model"}}]),
                &["Policy 'trusted' (DisallowLatestTag) denied image ghcr.io/acme/model: it is tagged latest or carries no tag."],
            ),
            (
                "an image volume without a reference",
                json!([{"name": "m", "image": {}}]),
                &["Policy 'trusted' (AllowedRegistries) denied image : it is not under ghcr.io/acme."],
            ),
        ];
        for (case, volumes, expected) in cases {
            let verdict = evaluate(
                &policies(),
                &pod_with_volumes(volumes),
                &AdmissionRequest::default(),
            );
            assert_eq!(messages(&verdict), expected, "{case}");
        }
        // Containers, then init containers, then image volumes, in order.
        let object = pod_with_volumes(json!([
            {"name": "a", "image": {"reference": "v:1"}},
            {"name": "b", "emptyDir": {}},
            {"name": "c", "image": {"reference": "w:2"}}
        ]));
        assert_eq!(
            object.images().collect::<Vec<_>>(),
            [
                "ghcr.io/acme/app:1.0",
                "ghcr.io/acme/init:1.0",
                "v:1",
                "w:2"
            ]
        );
        // The first violation of a policy is a container's when both violate.
        let object = AdmissionObject::from_json(&json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"team": "x"}},
            "spec": {
                "containers": [{"name": "a", "image": "docker.io/nginx:1"}],
                "volumes": [{"name": "m", "image": {"reference": "evil.io/miner:1"}}]
            }
        }))
        .unwrap();
        assert_eq!(
            messages(&evaluate(&policies(), &object, &AdmissionRequest::default())),
            ["Policy 'trusted' (AllowedRegistries) denied image docker.io/nginx:1: it is not under ghcr.io/acme."]
        );
        // The ephemeral-containers subresource judges the ephemeral containers only.
        let request = AdmissionRequest {
            operation: Operation::Update,
            username: "mallory".into(),
            subresource: Subresource::EphemeralContainers,
            spec_unchanged: false,
        };
        let object = AdmissionObject::from_json(&json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {
                "containers": [{"name": "a", "image": "ghcr.io/acme/a:1"}],
                "volumes": [{"name": "m", "image": {"reference": "evil.io/miner:1"}}]
            }
        }))
        .unwrap();
        assert!(evaluate(&policies(), &object, &request).denials.is_empty());
    }

    #[test]
    fn bad_image_volume_fields_are_named() {
        let error = AdmissionObject::from_json(&json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [], "volumes": [{"name": "m", "image": {"reference": 7}}]}
        }))
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            "/spec/volumes/0/image/reference: must be a string"
        );
        let error = AdmissionObject::from_json(&json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [], "volumes": {"m": 1}}
        }))
        .unwrap_err();
        assert_eq!(error.to_string(), "/spec/volumes: must be a list");
    }

    /// SPEC 3.1 (v3.1): an UPDATE of a terminating object passes only when it leaves the spec
    /// unchanged; a CREATE is always judged (the API server clears deletionTimestamp on create).
    #[test]
    fn a_terminating_object_passes_only_updates_that_keep_its_spec() {
        let object = AdmissionObject::from_json(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "labels": {"team": "web"},
                         "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["x/y"]},
            "spec": {"containers": [{"name": "a", "image": "busybox:latest"}]}
        }))
        .unwrap();
        let update = |spec_unchanged| AdmissionRequest {
            operation: Operation::Update,
            username: "mallory".into(),
            subresource: Subresource::None,
            spec_unchanged,
        };
        let removing_finalizers = evaluate(&policies(), &object, &update(true));
        assert!(removing_finalizers.exempt && removing_finalizers.admitted());
        let swapping_the_image = evaluate(&policies(), &object, &update(false));
        assert!(!swapping_the_image.exempt);
        assert_eq!(
            messages(&swapping_the_image),
            ["Policy 'trusted' (AllowedRegistries) denied image busybox:latest: it is not under ghcr.io/acme."]
        );
        let create = evaluate(&policies(), &object, &AdmissionRequest::default());
        assert!(!create.exempt && !create.admitted());
    }
}
