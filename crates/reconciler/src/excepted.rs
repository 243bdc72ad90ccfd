//! The Pod that confirms an exception (SPEC 7, confirmed like a policy, issue 25): one the
//! exception matches, that violates a rule it excepts, and that every policy of the boundary
//! admits once the exceptions in force apply. Pure: candidates are judged by the core's
//! evaluator; the API server's answer to a dry-run create of the winner is the proof.

use palisade_policy::admission::{first_violation, first_violation_excepted, AdmissionRequest};
use palisade_policy::{AdmissionObject, Exception, Policy, Rule};
use serde_json::{json, Map, Value};

use crate::violating::{add_required_labels, PROBE_GENERATE_NAME};

/// Repositories tried when the exception lists no images.
const PROBE_REPOSITORIES: [&str; 2] = [
    "probe.palisade.invalid/palisade-exception-probe",
    "probe-2.palisade.invalid/palisade-exception-probe",
];

/// What a probe of an exception sends, and what it expects back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExceptedProbe {
    pub pod: Value,
    /// A namespace of the boundary the exception matches.
    pub namespace: String,
    /// What `policy` would deny (or, in audit mode, warn) the Pod with were the exception
    /// not there; the API server must not answer with it.
    pub message: String,
}

/// The probe of `exception` (to `policy`, one of the boundary's `policies` in the cluster),
/// sent to the first of `namespaces` the exception matches; `exceptions` are the boundary's in
/// force in the cluster. `None` when no candidate works (no namespace the exception matches,
/// an exception that lifts no admission rule of the policy, or labels another policy forbids):
/// the exception is then installed, not confirmed.
pub fn excepted_pod(
    policy: &Policy,
    policies: &[Policy],
    exception: &Exception,
    exceptions: &[&Exception],
    namespaces: &[&str],
) -> Option<ExceptedProbe> {
    let object_match = exception.object_match.as_ref()?;
    if &exception.policy != policy.name() {
        return None;
    }
    let everyone = || std::iter::once(policy).chain(policies.iter());
    // Every label some policy requires, then the exception's own.
    let mut labels = Map::new();
    add_required_labels(&mut labels, everyone());
    for (key, value) in &object_match.labels {
        labels.insert(
            key.as_str().to_owned(),
            Value::String(value.as_str().to_owned()),
        );
    }
    // All labels, then each of the policy's required labels left out (one violation each).
    let mut label_sets = vec![labels.clone()];
    for rule in policy.rules() {
        if let Rule::RequiredLabels(requirements) = rule {
            for requirement in requirements {
                let key = requirement.key().as_str();
                if !object_match.labels.iter().any(|(k, _)| k.as_str() == key) {
                    let mut fewer = labels.clone();
                    fewer.remove(key);
                    label_sets.push(fewer);
                }
            }
        }
    }
    let images: Vec<String> = if object_match.images.is_empty() {
        let allowed = everyone()
            .flat_map(|p| p.rules())
            .filter_map(|r| match r {
                Rule::AllowedRegistries(prefixes) => Some(prefixes),
                _ => None,
            })
            .flatten()
            .map(|p| format!("{}/palisade-exception-probe", p.as_str()));
        let repositories: Vec<String> = allowed
            .chain(PROBE_REPOSITORIES.iter().map(|r| (*r).to_owned()))
            .collect();
        ["1", "latest"]
            .iter()
            .flat_map(|tag| repositories.iter().map(move |r| format!("{r}:{tag}")))
            .collect()
    } else {
        object_match.images.clone()
    };
    let request = AdmissionRequest::default();
    for namespace in namespaces.iter().filter(|ns| {
        object_match.namespaces.is_empty()
            || object_match.namespaces.iter().any(|n| n.as_str() == **ns)
    }) {
        for labels in &label_sets {
            for image in &images {
                let pod = json!({
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "generateName": PROBE_GENERATE_NAME,
                        "namespace": namespace,
                        "labels": labels,
                    },
                    "spec": {"containers": [{"name": "probe", "image": image}]},
                });
                let Ok(object) = AdmissionObject::from_json(&pod) else {
                    continue;
                };
                let Some(denial) = first_violation(policy, &object) else {
                    continue;
                };
                if !exception.excepts_admission(denial.rule) {
                    continue;
                }
                let admitted = everyone().all(|p| {
                    first_violation_excepted(p, &object, &request, exceptions)
                        .0
                        .is_none()
                });
                if admitted {
                    return Some(ExceptedProbe {
                        pod,
                        namespace: (*namespace).to_owned(),
                        message: denial.message,
                    });
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use palisade_policy::{
        LabelKey, LabelRequirement, LabelValue, Mode, Name, ObjectMatch, RegistryPrefix, RuleKind,
        Scope,
    };

    fn policy(name: &str, rules: Vec<Rule>) -> Policy {
        Policy::new(
            Name::parse(name).unwrap(),
            Mode::Enforce,
            Scope::AllClusters,
            rules,
        )
        .unwrap()
    }

    fn registries(prefix: &str) -> Rule {
        Rule::AllowedRegistries(vec![RegistryPrefix::parse(prefix).map(|(p, _)| p).unwrap()])
    }

    fn team() -> Rule {
        Rule::RequiredLabels(vec![LabelRequirement::new(
            LabelKey::parse("team").unwrap(),
            None,
        )])
    }

    fn exception(policy: &str, rules: &[RuleKind], m: ObjectMatch) -> Exception {
        Exception {
            name: Name::parse("legacy").unwrap(),
            policy: Name::parse(policy).unwrap(),
            rules: rules.iter().copied().collect(),
            object_match: Some(m),
            resources: Vec::new(),
            plans: Vec::new(),
            expires_at: "2999-01-01T00:00:00.000Z".to_owned(),
            reason: "r".to_owned(),
        }
    }

    fn label(k: &str, v: &str) -> (LabelKey, LabelValue) {
        (LabelKey::parse(k).unwrap(), LabelValue::parse(v).unwrap())
    }

    fn names(list: &[&str]) -> Vec<Name> {
        list.iter().map(|n| Name::parse(n).unwrap()).collect()
    }

    #[test]
    fn the_probe_is_matched_violates_an_excepted_rule_and_passes_everything_else() {
        let trusted = policy("trusted", vec![registries("ghcr.io/acme"), team()]);
        let latest = policy("no-latest", vec![Rule::DisallowLatestTag]);
        let all = [trusted.clone(), latest.clone()];
        let cases = [
            (
                "an image excepted in one namespace",
                exception(
                    "trusted",
                    &[RuleKind::AllowedRegistries],
                    ObjectMatch {
                        namespaces: names(&["legacy"]),
                        images: vec!["docker.io/library/nginx:1.27".to_owned()],
                        ..ObjectMatch::default()
                    },
                ),
                Some((
                    "legacy",
                    "docker.io/library/nginx:1.27",
                    "Policy 'trusted' (AllowedRegistries) denied image docker.io/library/nginx:1.27: it is not under ghcr.io/acme.",
                )),
            ),
            (
                "every rule, by label",
                exception("trusted", &[], ObjectMatch {
                    labels: vec![label("app", "legacy")],
                    ..ObjectMatch::default()
                }),
                Some((
                    "web",
                    "probe.palisade.invalid/palisade-exception-probe:1",
                    "Policy 'trusted' (AllowedRegistries) denied image probe.palisade.invalid/palisade-exception-probe:1: it is not under ghcr.io/acme.",
                )),
            ),
            (
                "the label rule only",
                exception("trusted", &[RuleKind::RequiredLabels], ObjectMatch {
                    labels: vec![label("app", "legacy")],
                    ..ObjectMatch::default()
                }),
                Some((
                    "web",
                    "ghcr.io/acme/palisade-exception-probe:1",
                    "Policy 'trusted' (RequiredLabels) requires the label team.",
                )),
            ),
            (
                "a namespace the boundary does not have here",
                exception("trusted", &[], ObjectMatch {
                    namespaces: names(&["elsewhere"]),
                    ..ObjectMatch::default()
                }),
                None,
            ),
            (
                "an excepted image that violates nothing",
                exception("trusted", &[RuleKind::AllowedRegistries], ObjectMatch {
                    images: vec!["ghcr.io/acme/app:1".to_owned()],
                    ..ObjectMatch::default()
                }),
                None,
            ),
            (
                "another policy denies every matched object",
                exception("trusted", &[RuleKind::AllowedRegistries], ObjectMatch {
                    images: vec!["docker.io/library/nginx:latest".to_owned()],
                    ..ObjectMatch::default()
                }),
                None,
            ),
        ];
        for (case, x, expected) in cases {
            let refs = [&x];
            let got = excepted_pod(&trusted, &all, &x, &refs, &["web", "legacy"]);
            let got = got.map(|p| {
                let image = p.pod["spec"]["containers"][0]["image"]
                    .as_str()
                    .unwrap()
                    .to_owned();
                (p.namespace, image, p.message)
            });
            let expected = expected
                .map(|(ns, image, message)| (ns.to_owned(), image.to_owned(), message.to_owned()));
            assert_eq!(got, expected, "{case}");
        }
    }

    #[test]
    fn the_probe_is_denied_without_the_exception_and_admitted_with_it() {
        let trusted = policy("trusted", vec![team(), registries("ghcr.io/acme")]);
        let x = exception(
            "trusted",
            &[],
            ObjectMatch {
                namespaces: names(&["web"]),
                labels: vec![label("app", "legacy")],
                ..ObjectMatch::default()
            },
        );
        let probe = excepted_pod(&trusted, &[], &x, &[&x], &["web"]).unwrap();
        let object = AdmissionObject::from_json(&probe.pod).unwrap();
        let request = AdmissionRequest::default();
        assert_eq!(
            first_violation(&trusted, &object).map(|d| d.message),
            Some(probe.message.clone())
        );
        assert_eq!(
            first_violation_excepted(&trusted, &object, &request, &[&x]).0,
            None
        );
        assert_eq!(probe.pod["metadata"]["labels"]["app"], "legacy");
    }
}
