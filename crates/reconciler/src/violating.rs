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
    for rule in &rules {
        if let Rule::RequiredLabels(requirements) = rule {
            for requirement in requirements {
                let value = requirement
                    .value()
                    .map_or("palisade-probe", |v| v.as_str())
                    .to_owned();
                labels.insert(requirement.key().as_str().to_owned(), Value::String(value));
            }
        }
    }
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
