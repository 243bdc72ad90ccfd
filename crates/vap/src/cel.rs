//! The CEL text of a policy's single validation.
//!
//! Only what a 1.30 API server compiles for new expressions (its compatibility environment is
//! 1.29): standard macros and functions. Policy values enter only through [`literal`], so no
//! policy content can change an expression's structure.

use palisade_policy::admission::CHECKED_KINDS;
use palisade_policy::image_ref::RegistryPrefix;
use palisade_policy::label::LabelRequirement;
use palisade_policy::message::{self, MAX_MESSAGE_BYTES};
use palisade_policy::{Name, Policy, Rule, RuleKind};

/// SPEC 3.1's exemptions: true for a request no policy judges (a terminating object; an
/// update by the controller manager or a kube-system service account). Every validation starts
/// with `EXEMPT ||`: CEL's `||` is true when one side is, so nothing after it runs or fails
/// for an exempt request. (As the validation's first term rather than as `matchConditions`:
/// the API server evaluates match conditions in an evaluation of their own, which cost each
/// policy about a sixth of its admission time; docs/decisions.md.)
pub const EXEMPT: &str = "has(object.metadata.deletionTimestamp) || (request.operation == 'UPDATE' && (request.userInfo.username == 'system:kube-controller-manager' || request.userInfo.username.startsWith('system:serviceaccount:kube-system:')))";

/// `expression`, passed by exempt requests.
pub(crate) fn unless_exempt(expression: &str) -> String {
    format!("{EXEMPT} || ({expression})")
}

/// The pod spec, wherever the kind keeps it.
pub(crate) const POD_SPEC: &str = "request.kind.kind == 'Pod' ? object.spec : (request.kind.kind == 'CronJob' ? object.spec.jobTemplate.spec.template.spec : object.spec.template.spec)";

/// Images of containers, then init containers; a container without an image counts as `''`
/// (the shared layout's rules read it).
pub(crate) const IMAGES: &str = "(has(variables.podSpec.containers) ? variables.podSpec.containers.map(c, has(c.image) ? c.image : '') : []) + (has(variables.podSpec.initContainers) ? variables.podSpec.initContainers.map(c, has(c.image) ? c.image : '') : [])";

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

/// Whether image `var` carries a digest, or a tag other than `latest`.
pub(crate) fn not_latest(var: &str) -> String {
    format!("({var}.contains('@') || ({var}.matches(':[^:/]+$') && !{var}.matches(':latest$')))")
}

/// The test of an image rule on one image string `var`; `None` for other rules.
fn image_ok(rule: &Rule, var: &str) -> Option<String> {
    match rule {
        Rule::AllowedRegistries(prefixes) => Some(under_any(var, prefixes)),
        Rule::DisallowLatestTag => Some(not_latest(var)),
        Rule::AllowedComputePlans(_) | Rule::RequiredLabels(_) => None,
    }
}

/// Whether container `c` passes the image test `ok` (on `c.image`). A container without an
/// image fails, as the image `''` would: no registry prefix is empty and `''` has no tag.
fn container_ok(ok: &str) -> String {
    format!("has(c.image) && {ok}")
}

/// `each` of the pod spec's container lists (`variables.podSpec.containers`, then
/// `variables.podSpec.initContainers`), joined by `join`.
fn per_container_list(join: &str, each: impl Fn(&str) -> String) -> String {
    ["containers", "initContainers"]
        .map(|list| each(&format!("variables.podSpec.{list}")))
        .join(join)
}

/// Whether every container and init container passes the image test `ok`. Read from the pod
/// spec directly: building a list of image strings first costs each evaluation more.
fn every_container(ok: &str) -> String {
    per_container_list(" && ", |list| {
        format!("(!has({list}) || {list}.all(c, {}))", container_ok(ok))
    })
}

/// The containers, then the init containers, that fail the image test `ok`: empty when the
/// rule holds; else its message names the first one's image.
fn failing_containers(ok: &str) -> String {
    per_container_list(" + ", |list| {
        format!(
            "(has({list}) ? {list}.filter(c, !({})) : [])",
            container_ok(ok)
        )
    })
}

fn rule_ok(rule: &Rule) -> Option<String> {
    match rule {
        Rule::AllowedComputePlans(_) => None,
        Rule::RequiredLabels(labels) => {
            Some(labels.iter().map(label_ok).collect::<Vec<_>>().join(" && "))
        }
        Rule::AllowedRegistries(_) | Rule::DisallowLatestTag => {
            image_ok(rule, "c.image").map(|ok| every_container(&ok))
        }
    }
}

/// The raw (not yet post-processed) message of a violated rule. An image rule's names
/// the image of `bad[0]`, the first failing container (bound in `PolicyCel::of`).
fn rule_raw_message(policy: &Name, rule: &Rule) -> String {
    let first_bad_image = "(has(bad[0].image) ? bad[0].image : '')";
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
            format!("{} + {first_bad_image} + {}", literal(head), literal(tail))
        }
        Rule::DisallowLatestTag => {
            let full = message::image_latest(policy, "\u{0}");
            let (head, tail) = full.split_once('\u{0}').unwrap_or((&full, ""));
            format!("{} + {first_bad_image} + {}", literal(head), literal(tail))
        }
    }
}

/// The message Kubernetes shows: replaced by the static message when it has a line feed or is
/// over 5,120 bytes (Kubernetes then trims it, as `message::finalize` does).
fn rule_message(policy: &Name, rule: &Rule) -> String {
    format!(
        "[{}].map(m, m.contains('\\n') || size(bytes(m)) > {MAX_MESSAGE_BYTES} ? {} : m)[0]",
        rule_raw_message(policy, rule),
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
        let rules: Vec<(&Rule, String)> = policy
            .rules()
            .iter()
            .filter_map(|r| rule_ok(r).map(|ok| (r, ok)))
            .collect();
        if rules.is_empty() {
            return None;
        }
        let expression = unless_exempt(
            &rules
                .iter()
                .map(|(_, ok)| format!("({ok})"))
                .collect::<Vec<_>>()
                .join(" && "),
        );
        // The message of the first violated rule, or "" (the API server evaluates the message
        // expression of a passing validation too, so it stays as cheap as the validation).
        let mut message_expression = literal("");
        for (rule, ok) in rules.iter().rev() {
            let message = rule_message(policy.name(), rule);
            message_expression = match image_ok(rule, "c.image") {
                // One pass finds the failing containers: empty means the rule holds.
                Some(image_ok) => format!(
                    "[{}].map(bad, size(bad) == 0 ? ({message_expression}) : {message})[0]",
                    failing_containers(&image_ok)
                ),
                None => format!("!({ok}) ? {message} : ({message_expression})"),
            };
        }
        // Only a policy with image rules reads the pod spec: variables cost each evaluation
        // even when unused.
        let variables = if rules
            .iter()
            .any(|(rule, _)| image_ok(rule, "c.image").is_some())
        {
            vec![("podSpec".into(), POD_SPEC.into())]
        } else {
            Vec::new()
        };
        Some(PolicyCel {
            variables,
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
    fn literals_escape_everything_that_could_end_them() {
        assert_eq!(literal(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(literal("x\ny\u{1}"), "\"x\\ny\\u0001\"");
        assert_eq!(literal("Policy 'p'"), "\"Policy 'p'\"");
    }
}
