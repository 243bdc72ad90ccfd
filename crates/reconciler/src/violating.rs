//! The Pod an enforcement probe sends: it complies with every rule of the policy but the
//! first admission rule, which it violates, so the policy's message is known in advance.

use palisade_policy::admission::first_violation;
use palisade_policy::{AdmissionObject, ImageRef, Policy, RegistryPrefix, Rule};
use serde_json::{json, Map, Value};

/// A registry no policy is expected to allow; more are tried if one is.
const PROBE_HOSTS: [&str; 4] = [
    "probe.palisade.invalid",
    "probe-2.palisade.invalid",
    "probe-3.palisade.invalid",
    "probe.palisade.test",
];
const IMAGE_NAME: &str = "palisade-enforcement-probe";
/// `generateName` of the probe Pod (dry-run creates store nothing).
pub const PROBE_GENERATE_NAME: &str = "palisade-probe-";

/// A Pod violating `policy` and the message the policy denies it with; `None` when the policy
/// has no admission rules (or, impossibly, no violating Pod is found).
pub fn violating_pod(policy: &Policy) -> Option<(Value, String)> {
    let rules: Vec<&Rule> = policy
        .rules()
        .iter()
        .filter(|r| r.kind().is_admission())
        .collect();
    let first = *rules.first()?;
    let registries: Option<&[RegistryPrefix]> = rules.iter().find_map(|r| match r {
        Rule::AllowedRegistries(prefixes) => Some(prefixes.as_slice()),
        _ => None,
    });
    let repository = match registries.and_then(|p| p.first()) {
        Some(prefix) => format!("{}/{IMAGE_NAME}", prefix.as_str()),
        None => format!("{}/{IMAGE_NAME}", PROBE_HOSTS[0]),
    };
    let mut labels = Map::new();
    add_required_labels(&mut labels, [policy]);
    let mut image = format!("{repository}:1");
    match first {
        Rule::RequiredLabels(requirements) => {
            let key = requirements.first()?.key().as_str();
            labels.remove(key);
        }
        Rule::AllowedRegistries(prefixes) => {
            image = PROBE_HOSTS
                .iter()
                .map(|host| format!("{host}/{IMAGE_NAME}:1"))
                .find(|candidate| {
                    !prefixes
                        .iter()
                        .any(|p| ImageRef::new(candidate).is_under(p))
                })?;
        }
        Rule::DisallowLatestTag => image = format!("{repository}:latest"),
        Rule::AllowedComputePlans(_) => return None,
    }
    let pod = json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": PROBE_GENERATE_NAME, "labels": labels},
        "spec": {"containers": [{"name": "probe", "image": image}]},
    });
    let object = AdmissionObject::from_json(&pod).ok()?;
    let denial = first_violation(policy, &object)?;
    Some((pod, denial.message))
}

/// Adds to `labels` each label `policies` require that it lacks: the required value, or
/// `palisade-probe` when any value will do.
pub(crate) fn add_required_labels<'p>(
    labels: &mut Map<String, Value>,
    policies: impl IntoIterator<Item = &'p Policy>,
) {
    for rule in policies.into_iter().flat_map(Policy::rules) {
        if let Rule::RequiredLabels(requirements) = rule {
            for requirement in requirements {
                let value = requirement
                    .value()
                    .map_or("palisade-probe", |v| v.as_str())
                    .to_owned();
                labels
                    .entry(requirement.key().as_str().to_owned())
                    .or_insert(Value::String(value));
            }
        }
    }
}

/// Like [`violating_pod`], but the Pod also complies with `others` (the other enforce-mode
/// policies of the boundary in the same cluster) where that is possible, so that the API
/// server's one reported denial is this policy's and the probe is conclusive. Falls back to
/// [`violating_pod`] when no such Pod exists (e.g. another policy requires the very label
/// this one is probed with).
pub fn violating_pod_among(policy: &Policy, others: &[Policy]) -> Option<(Value, String)> {
    let plain = violating_pod(policy)?;
    let others: Vec<&Policy> = others
        .iter()
        .filter(|o| o.name() != policy.name() && o.mode() == palisade_policy::Mode::Enforce)
        .collect();
    if others.is_empty() {
        return Some(plain);
    }
    let first = policy.rules().iter().find(|r| r.kind().is_admission())?;
    // Labels every other policy requires (this policy's own are in the plain Pod already).
    let mut labels = plain.0["metadata"]["labels"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    add_required_labels(&mut labels, others.iter().copied());
    if let Rule::RequiredLabels(requirements) = first {
        labels.remove(requirements.first()?.key().as_str());
    }
    // Repositories under some allowed prefix of any policy involved, then the probe hosts.
    let mut repositories: Vec<String> = std::iter::once(policy)
        .chain(others.iter().copied())
        .flat_map(|p| p.rules().iter())
        .filter_map(|r| match r {
            Rule::AllowedRegistries(prefixes) => Some(prefixes),
            _ => None,
        })
        .flatten()
        .map(|prefix| format!("{}/{IMAGE_NAME}", prefix.as_str()))
        .collect();
    repositories.extend(PROBE_HOSTS.iter().map(|h| format!("{h}/{IMAGE_NAME}")));
    let tag = if matches!(first, Rule::DisallowLatestTag) {
        "latest"
    } else {
        "1"
    };
    for repository in repositories {
        let pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"generateName": PROBE_GENERATE_NAME, "labels": labels},
            "spec": {"containers": [{"name": "probe", "image": format!("{repository}:{tag}")}]},
        });
        let Ok(object) = AdmissionObject::from_json(&pod) else {
            continue;
        };
        let Some(denial) = first_violation(policy, &object) else {
            continue;
        };
        if others.iter().all(|o| first_violation(o, &object).is_none()) {
            return Some((pod, denial.message));
        }
    }
    Some(plain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_policy::{LabelKey, LabelRequirement, LabelValue, Mode, Name, Scope};

    fn policy(rules: Vec<Rule>) -> Policy {
        Policy::new(
            Name::parse("p").unwrap(),
            Mode::Enforce,
            Scope::AllClusters,
            rules,
        )
        .unwrap()
    }

    fn prefix(text: &str) -> RegistryPrefix {
        RegistryPrefix::parse(text).map(|(p, _)| p).unwrap()
    }

    fn named(name: &str, rules: Vec<Rule>) -> Policy {
        Policy::new(
            Name::parse(name).unwrap(),
            Mode::Enforce,
            Scope::AllClusters,
            rules,
        )
        .unwrap()
    }

    #[test]
    fn the_probe_complies_with_the_boundary_s_other_policies_when_it_can() {
        let team = Rule::RequiredLabels(vec![LabelRequirement::new(
            LabelKey::parse("team").unwrap(),
            None,
        )]);
        let registries = Rule::AllowedRegistries(vec![prefix("ghcr.io/acme")]);
        let latest = named("no-latest", vec![Rule::DisallowLatestTag]);
        let labels = named("team-label", vec![team.clone()]);
        let trusted = named("trusted", vec![registries.clone()]);
        let all = [latest.clone(), labels.clone(), trusted.clone()];
        for policy in &all {
            let (pod, message) = violating_pod_among(policy, &all).unwrap();
            let object = AdmissionObject::from_json(&pod).unwrap();
            for other in &all {
                let denial = first_violation(other, &object).map(|d| d.message);
                if other.name() == policy.name() {
                    assert_eq!(denial.as_deref(), Some(message.as_str()));
                } else {
                    assert_eq!(denial, None, "{} also denies {pod}", other.name());
                }
            }
        }
        // Impossible: another policy requires the label this one is probed without.
        let same = named("team-too", vec![team]);
        let (pod, _) = violating_pod_among(&labels, &[same]).unwrap();
        assert_eq!(pod, violating_pod(&labels).unwrap().0);
    }

    #[test]
    fn each_first_rule_is_violated_and_the_others_are_met() {
        let labels = Rule::RequiredLabels(vec![
            LabelRequirement::new(
                LabelKey::parse("team").unwrap(),
                Some(LabelValue::parse("web").unwrap()),
            ),
            LabelRequirement::new(LabelKey::parse("owner").unwrap(), None),
        ]);
        let registries = Rule::AllowedRegistries(vec![prefix("ghcr.io/acme")]);
        let cases = [
            (
                vec![labels.clone(), registries.clone(), Rule::DisallowLatestTag],
                "Policy 'p' (RequiredLabels) requires label team=web, found <unset>",
            ),
            (
                vec![Rule::DisallowLatestTag, registries.clone()],
                "Policy 'p' (DisallowLatestTag) denied image ghcr.io/acme/palisade-enforcement-probe:latest: it is tagged latest or carries no tag.",
            ),
            (
                vec![registries.clone(), labels.clone()],
                "Policy 'p' (AllowedRegistries) denied image probe.palisade.invalid/palisade-enforcement-probe:1: it is not under ghcr.io/acme.",
            ),
            (
                vec![Rule::AllowedRegistries(vec![prefix("probe.palisade.invalid")])],
                "Policy 'p' (AllowedRegistries) denied image probe-2.palisade.invalid/palisade-enforcement-probe:1: it is not under probe.palisade.invalid.",
            ),
        ];
        for (rules, message) in cases {
            let (pod, got) = violating_pod(&policy(rules)).unwrap();
            assert_eq!(got, message, "{pod}");
        }
    }
}
