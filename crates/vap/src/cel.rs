//! The CEL text of a policy's single validation.
//!
//! Only what a 1.30 API server compiles for new expressions (its compatibility environment is
//! 1.29): standard macros and functions. Policy values enter only through [`literal`], so no
//! policy content can change an expression's structure.

use palisade_policy::admission::CHECKED_KINDS;
use palisade_policy::image_ref::RegistryPrefix;
use palisade_policy::label::LabelRequirement;
use palisade_policy::message::{self, MAX_MESSAGE_BYTES};
use palisade_policy::{Exception, Name, Policy, Rule, RuleKind};

/// The match conditions of SPEC 3.1's exemptions: `(name, expression)`. A terminating
/// object's UPDATE passes only while its spec is unchanged (v3.1: removing finalizers passes,
/// swapping an image does not); a CREATE is always judged.
pub const MATCH_CONDITIONS: [(&str, &str); 3] = [
    (
        "exempt-terminating-objects",
        "request.operation != 'UPDATE' || !has(object.metadata.deletionTimestamp) || !has(oldObject.spec) || object.spec != oldObject.spec",
    ),
    (
        "exempt-controller-updates",
        "request.operation != 'UPDATE' || !(request.userInfo.username == 'system:kube-controller-manager' || request.userInfo.username.startsWith('system:serviceaccount:kube-system:'))",
    ),
    // `pods/status` is matched only to catch its one way past the rules: an update through it
    // keeps the labels it sends, so a label could be removed from a running Pod. The kubelet's
    // status updates keep the labels and are not judged.
    (
        "judge-status-updates-that-change-labels",
        "!has(request.subResource) || request.subResource != 'status' || (has(object.metadata.labels) ? object.metadata.labels : {}) != (has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})",
    ),
];

/// The pod spec, wherever the kind keeps it.
pub(crate) const POD_SPEC: &str = "request.kind.kind == 'Pod' ? object.spec : (request.kind.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec : object.spec.template.spec)";

/// Whether the request is for a Pod's `ephemeralcontainers` subresource (`kubectl debug`; the
/// request leaves `subResource` out for the main resource).
pub(crate) const EPHEMERAL_REQUEST: &str =
    "(has(request.subResource) && request.subResource == 'ephemeralcontainers')";

/// The images the image rules judge (SPEC 3.2): on the ephemeral-containers subresource only
/// the ephemeral containers'; otherwise containers, then init containers, then the image
/// volumes' references (v3.2; an API server that does not know the field has dropped it, so
/// the list is empty there), then (a Pod's) ephemeral containers. A container without an image,
/// or an image volume without a reference, counts as `''`.
pub(crate) const IMAGES: &str = "(has(request.subResource) && request.subResource == 'ephemeralcontainers') ? (has(variables.podSpec.ephemeralContainers) ? variables.podSpec.ephemeralContainers.map(c, has(c.image) ? c.image : '') : []) : ((has(variables.podSpec.containers) ? variables.podSpec.containers.map(c, has(c.image) ? c.image : '') : []) + (has(variables.podSpec.initContainers) ? variables.podSpec.initContainers.map(c, has(c.image) ? c.image : '') : []) + (has(variables.podSpec.volumes) ? variables.podSpec.volumes.filter(v, has(v.image)).map(v, has(v.image.reference) ? v.image.reference : '') : []) + (request.kind.kind == 'Pod' && has(variables.podSpec.ephemeralContainers) ? variables.podSpec.ephemeralContainers.map(c, has(c.image) ? c.image : '') : []))";

/// The CEL of one policy: variables, the validation expression, its message expression and
/// static message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyCel {
    pub variables: Vec<(String, String)>,
    pub expression: String,
    pub message_expression: String,
    pub message: String,
}

/// A CEL double-quoted string literal holding exactly `text`.
pub fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn has_label(key: &str) -> String {
    format!(
        "(has(object.metadata.labels) && {} in object.metadata.labels)",
        literal(key)
    )
}

fn label_ok(requirement: &LabelRequirement) -> String {
    let key = requirement.key().as_str();
    match requirement.value() {
        None => has_label(key),
        Some(value) => format!(
            "({} && object.metadata.labels[{}] == {})",
            has_label(key),
            literal(key),
            literal(value.as_str())
        ),
    }
}

fn label_message(policy: &Name, requirement: &LabelRequirement) -> String {
    let key = requirement.key().as_str();
    match requirement.value() {
        None => literal(&message::label_missing(policy, key)),
        Some(value) => {
            // label_wrong's text up to "found ", then the value found.
            let full = message::label_wrong(policy, key, value.as_str(), Some(""));
            let head = full.strip_suffix("\"\"").unwrap_or(&full);
            format!(
                "{} + ({} ? (object.metadata.labels[{k}] == '' ? '\"\"' : object.metadata.labels[{k}]) : '<unset>')",
                literal(head),
                has_label(key),
                k = literal(key)
            )
        }
    }
}

fn under_any(var: &str, prefixes: &[RegistryPrefix]) -> String {
    let alternatives: Vec<String> = prefixes
        .iter()
        .map(|p| {
            format!(
                "{var} == {} || {var}.startsWith({})",
                literal(p.as_str()),
                literal(&format!("{}/", p.as_str()))
            )
        })
        .collect();
    format!("({})", alternatives.join(" || "))
}

pub(crate) const NOT_LATEST: &str =
    "(i.contains('@') || (i.matches(':[^:/]+$') && !i.matches(':latest$')))";

fn rule_ok(rule: &Rule, excepted: &[&Exception]) -> Option<String> {
    let images = judged_images(rule.kind(), excepted);
    match rule {
        Rule::AllowedComputePlans(_) => None,
        // Labels are not judged on the ephemeral-containers subresource (SPEC 3.2).
        Rule::RequiredLabels(labels) => Some(format!(
            "{EPHEMERAL_REQUEST} || ({}){}",
            labels.iter().map(label_ok).collect::<Vec<_>>().join(" && "),
            label_exceptions(excepted)
        )),
        Rule::AllowedRegistries(prefixes) => {
            Some(format!("{images}.all(i, {})", under_any("i", prefixes)))
        }
        Rule::DisallowLatestTag => Some(format!("{images}.all(i, {NOT_LATEST})")),
    }
}

/// The CEL of exception `x`'s object match, images aside (SPEC 7): the request's namespace
/// among those listed, the object's own labels.
fn object_matched(x: &Exception) -> String {
    let Some(m) = &x.object_match else {
        return "false".into();
    };
    let mut parts = Vec::new();
    if !m.namespaces.is_empty() {
        let list: Vec<String> = m.namespaces.iter().map(|n| literal(n.as_str())).collect();
        parts.push(format!("request.namespace in [{}]", list.join(", ")));
    }
    for (key, value) in &m.labels {
        parts.push(format!(
            "({} && object.metadata.labels[{}] == {})",
            has_label(key.as_str()),
            literal(key.as_str()),
            literal(value.as_str())
        ));
    }
    if parts.is_empty() {
        "true".into()
    } else {
        format!("({})", parts.join(" && "))
    }
}

/// Whether image `var` is among exception `x`'s images (every image when it lists none).
fn image_listed(x: &Exception, var: &str) -> String {
    match &x.object_match {
        Some(m) if !m.images.is_empty() => {
            let list: Vec<String> = m.images.iter().map(|i| literal(i)).collect();
            format!("{var} in [{}]", list.join(", "))
        }
        _ => "true".into(),
    }
}

/// The exceptions of `excepted` that except rule `kind`.
fn excepting<'a>(kind: RuleKind, excepted: &[&'a Exception]) -> Vec<&'a Exception> {
    excepted
        .iter()
        .copied()
        .filter(|x| x.excepts_admission(kind))
        .collect()
}

/// The images an image rule judges: every image, less those an exception lets past on a
/// matched object.
fn judged_images(kind: RuleKind, excepted: &[&Exception]) -> String {
    let relevant = excepting(kind, excepted);
    if relevant.is_empty() {
        return "variables.images".into();
    }
    let lifted: Vec<String> = relevant
        .iter()
        .map(|x| format!("({} && {})", object_matched(x), image_listed(x, "i")))
        .collect();
    format!("variables.images.filter(i, !({}))", lifted.join(" || "))
}

/// ` || <a matched object whose every image is listed>` for each exception of the label rule.
fn label_exceptions(excepted: &[&Exception]) -> String {
    excepting(RuleKind::RequiredLabels, excepted)
        .iter()
        .map(|x| {
            format!(
                " || ({} && variables.images.all(i, {}))",
                object_matched(x),
                image_listed(x, "i")
            )
        })
        .collect()
}

/// The raw (not yet post-processed) message of a violated rule.
fn rule_raw_message(policy: &Name, rule: &Rule, excepted: &[&Exception]) -> String {
    let images = judged_images(rule.kind(), excepted);
    match rule {
        Rule::AllowedComputePlans(_) => literal(""),
        Rule::RequiredLabels(labels) => {
            let mut out = literal("");
            for label in labels.iter().rev() {
                out = format!(
                    "(!{} ? {} : {out})",
                    label_ok(label),
                    label_message(policy, label)
                );
            }
            out
        }
        Rule::AllowedRegistries(prefixes) => {
            let full = message::image_not_under(
                policy,
                "\u{0}",
                &prefixes
                    .iter()
                    .map(RegistryPrefix::as_str)
                    .collect::<Vec<_>>(),
            );
            let (head, tail) = full.split_once('\u{0}').unwrap_or((&full, ""));
            format!(
                "{} + {images}.filter(i, !{})[0] + {}",
                literal(head),
                under_any("i", prefixes),
                literal(tail)
            )
        }
        Rule::DisallowLatestTag => {
            let full = message::image_latest(policy, "\u{0}");
            let (head, tail) = full.split_once('\u{0}').unwrap_or((&full, ""));
            format!(
                "{} + {images}.filter(i, !{NOT_LATEST})[0] + {}",
                literal(head),
                literal(tail)
            )
        }
    }
}

/// The message Kubernetes shows: replaced by the static message when it has a line feed or is
/// over 5,120 bytes (Kubernetes then trims it, as `message::finalize` does).
fn rule_message(policy: &Name, rule: &Rule, excepted: &[&Exception]) -> String {
    format!(
        "[{}].map(m, m.contains('\\n') || size(bytes(m)) > {MAX_MESSAGE_BYTES} ? {} : m)[0]",
        rule_raw_message(policy, rule, excepted),
        literal(&message::static_message(policy, rule.kind()))
    )
}

/// The static `message` of the validation, shown only if the message expression itself fails.
fn static_message(policy: &Policy) -> String {
    let kinds: Vec<RuleKind> = policy
        .rules()
        .iter()
        .map(Rule::kind)
        .filter(|k| k.is_admission())
        .collect();
    match kinds.as_slice() {
        [only] => message::static_message(policy.name(), *only),
        _ => format!(
            "Policy '{}' ({}) denied the request.",
            policy.name(),
            kinds
                .iter()
                .map(|k| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

impl PolicyCel {
    /// The CEL of `policy`; `None` when it has no admission rules.
    pub fn of(policy: &Policy) -> Option<PolicyCel> {
        Self::excepted(policy, &[])
    }

    /// The CEL of `policy` with the exceptions of it that are in force in the cluster (SPEC 7);
    /// the exceptions of other policies are ignored.
    pub fn excepted(policy: &Policy, exceptions: &[&Exception]) -> Option<PolicyCel> {
        let excepted: Vec<&Exception> = exceptions
            .iter()
            .copied()
            .filter(|x| &x.policy == policy.name() && x.object_match.is_some())
            .collect();
        let rules: Vec<(&Rule, String)> = policy
            .rules()
            .iter()
            .filter_map(|r| rule_ok(r, &excepted).map(|ok| (r, ok)))
            .collect();
        if rules.is_empty() {
            return None;
        }
        let expression = rules
            .iter()
            .map(|(_, ok)| format!("({ok})"))
            .collect::<Vec<_>>()
            .join(" && ");
        let mut message_expression = literal("");
        for (rule, ok) in rules.iter().rev() {
            message_expression = format!(
                "!({ok}) ? {} : ({message_expression})",
                rule_message(policy.name(), rule, &excepted)
            );
        }
        Some(PolicyCel {
            variables: vec![
                ("podSpec".into(), POD_SPEC.into()),
                ("images".into(), IMAGES.into()),
            ],
            expression,
            message_expression,
            message: static_message(policy),
        })
    }
}

/// The `(group, resource)` pairs the policy matches.
pub fn matched_resources() -> impl Iterator<Item = (&'static str, &'static str)> {
    CHECKED_KINDS
        .iter()
        .map(|(group, _, resource)| (*group, *resource))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_test_the_subresource_as_the_ephemeral_request_does() {
        assert!(IMAGES.starts_with(EPHEMERAL_REQUEST));
    }

    #[test]
    fn literals_escape_everything_that_could_end_them() {
        assert_eq!(literal(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(literal("x\ny\u{1}"), "\"x\\ny\\u0001\"");
        assert_eq!(literal("Policy 'p'"), "\"Policy 'p'\"");
    }
}
