//! A probe without the cluster: what a policy's (or an exception's) probe asks, decided from
//! what is installed as the cluster's layout judges it, and what the API server's answer to
//! it means. Between the two the cluster only runs the dry-run create
//! ([`ClusterClient::dry_run_create`](crate::ClusterClient::dry_run_create)). Pure: no I/O.

use std::borrow::Cow;

use palisade_policy::{Mode, Name, Policy};
use palisade_vap::render::switch_binding_name;
use palisade_vap::Layout;
use serde_json::Value;

use crate::admission::Staging;
use crate::answer::AdmissionAnswer;
use crate::excepted::ExceptedProbe;
use crate::installed::Installed;
use crate::probe::{
    EnforcementProbe, ADMITTED_VIOLATING, DENIED_EXCEPTED, NOT_WARNED, PROBE_REFUSED,
    WARNED_EXCEPTED,
};
use crate::violating::violating_pod_among;
use crate::{ReconcileError, Result};

/// One dry-run create to send, and what its answer must be.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Probe {
    pub namespace: String,
    pub pod: Value,
    /// The message the rule that the Pod violates denies (or warns) it with.
    message: String,
    /// The policy object and the binding that judge it in the namespace.
    policy: String,
    binding: String,
    expect: Expect,
}

/// What a probe's answer must show.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// A denial by the policy object with the message. `switching`: the cluster is changing
    /// layout and the earlier layout's objects are there, so the new layout counts only when
    /// its switch binding warned. `also`: while a stage hands a namespace over, the version
    /// before's policy object, whose denial counts too (make before break).
    Denied {
        switching: bool,
        also: Option<String>,
    },
    /// Admitted with the binding's warning (audit mode).
    Warned,
    /// Admitted without the policy's denial or warning: an exception lifts the rule.
    Excepted,
}

/// What is probed where: the installation, the boundary, what the cluster holds, and how.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Site<'a> {
    pub layout: Layout,
    pub installed: &'a Installed,
    pub installation: &'a str,
    pub boundary: &'a Name,
}

impl Site<'_> {
    fn judge(&self, policy: &Policy, namespace: &str) -> crate::admission::Judge {
        crate::admission::of(self.layout).judge(
            self.installed,
            self.installation,
            self.boundary,
            policy,
            namespace,
        )
    }
}

/// The probe of `policy` in `namespace`: a Pod that violates it and complies with `others`
/// where it can, sent to be judged by the version in force there (`staging`). `Err` inside:
/// the status without a probe (`not enforced: <why no object judges it>`). A policy with no
/// admission rule has no probe ([`ReconcileError::NoAdmissionRules`]).
pub(crate) fn policy_probe(
    site: &Site<'_>,
    policy: &Policy,
    others: &[Policy],
    namespace: &str,
    switching: bool,
    staging: Option<&Staging>,
) -> Result<std::result::Result<Probe, EnforcementProbe>> {
    // A namespace a stage reached a moment ago is judged by both versions until the one
    // before leaves it (make before break): a denial by either is the policy enforced.
    let mut also = None;
    // A policy being rolled out is judged in `namespace` by the version in force there.
    let (policy, judge) = match staging {
        None => (Cow::Borrowed(policy), site.judge(policy, namespace)),
        Some(staging) => {
            if let Some(previous) = staging.handing_over_in(namespace) {
                also = site.judge(previous, namespace).ok().map(|(name, _)| name);
            }
            let judging = crate::admission::staged::judging(
                site.installed,
                site.installation,
                site.boundary,
                policy,
                staging,
                namespace,
            );
            match judging {
                Ok((judged, judge)) => (Cow::Owned(judged), judge),
                Err(previous) => {
                    let judge = site.judge(&previous, namespace);
                    (Cow::Owned(previous), judge)
                }
            }
        }
    };
    let policy = policy.as_ref();
    let (pod, message) = violating_pod_among(policy, others)
        .ok_or_else(|| ReconcileError::NoAdmissionRules(policy.name().to_string()))?;
    let (name, binding) = match judge {
        Ok(judging) => judging,
        Err(reason) => return Ok(Err(EnforcementProbe::NotEnforced(reason))),
    };
    let expect = match policy.mode() {
        Mode::Enforce => Expect::Denied { switching, also },
        Mode::Audit => Expect::Warned,
    };
    Ok(Ok(Probe {
        namespace: namespace.to_owned(),
        pod,
        message,
        policy: name,
        binding,
        expect,
    }))
}

/// The probe of an exception to `policy` (SPEC 7): `excepted`, an object it matches that
/// violates a rule it lifts, must be admitted without the policy's denial or warning. `Err`:
/// the status without a probe, as for a policy.
pub(crate) fn exception_probe(
    site: &Site<'_>,
    policy: &Policy,
    excepted: &ExceptedProbe,
) -> std::result::Result<Probe, EnforcementProbe> {
    let (name, binding) = site
        .judge(policy, &excepted.namespace)
        .map_err(EnforcementProbe::NotEnforced)?;
    Ok(Probe {
        namespace: excepted.namespace.clone(),
        pod: excepted.pod.clone(),
        message: excepted.message.clone(),
        policy: name,
        binding,
        expect: Expect::Excepted,
    })
}

impl Probe {
    /// What the API server's `answer` to this probe means.
    pub(crate) fn verdict(&self, answer: &AdmissionAnswer) -> EnforcementProbe {
        let (name, binding, message) = (&self.policy, &self.binding, self.message.as_str());
        let denied_with_message = answer.denial_message() == Some(message);
        match &self.expect {
            Expect::Denied { .. } if answer.admitted() => {
                EnforcementProbe::NotEnforced(ADMITTED_VIOLATING.to_owned())
            }
            Expect::Denied {
                switching: true, ..
            } if denied_with_message => {
                if answer.has_warning(name, &switch_binding_name(binding), message) {
                    EnforcementProbe::Enforced
                } else {
                    EnforcementProbe::EnforcedByEarlierLayout
                }
            }
            Expect::Denied { .. }
                if answer.denying_policy() == Some(name.as_str()) && denied_with_message =>
            {
                EnforcementProbe::Enforced
            }
            Expect::Denied {
                also: Some(also), ..
            } if answer.denying_policy() == Some(also.as_str()) => EnforcementProbe::Enforced,
            Expect::Warned if answer.admitted() && answer.has_warning(name, binding, message) => {
                EnforcementProbe::Enforced
            }
            Expect::Warned if answer.admitted() => {
                EnforcementProbe::NotEnforced(NOT_WARNED.to_owned())
            }
            Expect::Excepted if answer.admitted() => {
                if answer.has_warning(name, binding, message) {
                    EnforcementProbe::NotEnforced(WARNED_EXCEPTED.to_owned())
                } else {
                    EnforcementProbe::Enforced
                }
            }
            Expect::Excepted if denied_with_message => {
                EnforcementProbe::NotEnforced(DENIED_EXCEPTED.to_owned())
            }
            _ => EnforcementProbe::Inconclusive(format!(
                "{PROBE_REFUSED}: {}",
                answer.message.as_deref().unwrap_or_default()
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::answer::policy_warning;

    const MESSAGE: &str = "the image must come from registry.example.com";

    fn mk_probe(expect: Expect) -> Probe {
        Probe {
            namespace: "shop-dev".to_owned(),
            pod: Value::Null,
            message: MESSAGE.to_owned(),
            policy: "palisade-shop-registries".to_owned(),
            binding: "palisade-shop-registries".to_owned(),
            expect,
        }
    }

    fn denied(by: &str, message: &str, warnings: Vec<String>) -> AdmissionAnswer {
        AdmissionAnswer {
            code: 403,
            message: Some(format!(
                "pods \"probe\" is forbidden: ValidatingAdmissionPolicy '{by}' with binding \
                 '{by}' denied request: {message}"
            )),
            reason: Some("Invalid".to_owned()),
            warnings,
        }
    }

    fn admitted(warnings: Vec<String>) -> AdmissionAnswer {
        AdmissionAnswer {
            code: 201,
            message: None,
            reason: None,
            warnings,
        }
    }

    fn enforce(switching: bool, also: Option<&str>) -> Expect {
        Expect::Denied {
            switching,
            also: also.map(str::to_owned),
        }
    }

    /// Every verdict a probe's answer can give, by what was expected and what the API server
    /// answered.
    #[test]
    fn an_answer_means_what_the_probe_expected_of_it() {
        let ours = "palisade-shop-registries";
        let before = "palisade-shop-registries-v1";
        let warned = vec![policy_warning(ours, ours, MESSAGE)];
        let switch_warned = vec![policy_warning(ours, &switch_binding_name(ours), MESSAGE)];
        let refused =
            |text: &str| EnforcementProbe::Inconclusive(format!("{PROBE_REFUSED}: {text}"));
        let other = denied(
            "palisade-shop-tags",
            "the tag latest is not allowed",
            vec![],
        );
        let other_text = other.message.clone().unwrap_or_default();
        let cases: Vec<(&str, Expect, AdmissionAnswer, EnforcementProbe)> = vec![
            (
                "denied by the policy with its message",
                enforce(false, None),
                denied(ours, MESSAGE, vec![]),
                EnforcementProbe::Enforced,
            ),
            (
                "a violating Pod admitted",
                enforce(false, None),
                admitted(vec![]),
                EnforcementProbe::NotEnforced(ADMITTED_VIOLATING.to_owned()),
            ),
            (
                "denied by another policy proves nothing",
                enforce(false, None),
                other.clone(),
                refused(&other_text),
            ),
            (
                "denied by the version before while it hands over",
                enforce(false, Some(before)),
                denied(before, "the old message", vec![]),
                EnforcementProbe::Enforced,
            ),
            (
                "denied by the version before with no hand-over",
                enforce(false, None),
                denied(before, "the old message", vec![]),
                refused(
                    &denied(before, "the old message", vec![])
                        .message
                        .unwrap_or_default(),
                ),
            ),
            (
                "switching: the switch binding warned",
                enforce(true, None),
                denied(before, MESSAGE, switch_warned.clone()),
                EnforcementProbe::Enforced,
            ),
            (
                "switching: denied without the switch binding's warning",
                enforce(true, None),
                denied(before, MESSAGE, vec![]),
                EnforcementProbe::EnforcedByEarlierLayout,
            ),
            (
                "switching: admitted",
                enforce(true, None),
                admitted(switch_warned),
                EnforcementProbe::NotEnforced(ADMITTED_VIOLATING.to_owned()),
            ),
            (
                "audit: admitted with the binding's warning",
                Expect::Warned,
                admitted(warned.clone()),
                EnforcementProbe::Enforced,
            ),
            (
                "audit: admitted without it",
                Expect::Warned,
                admitted(vec![]),
                EnforcementProbe::NotEnforced(NOT_WARNED.to_owned()),
            ),
            (
                "audit: denied",
                Expect::Warned,
                other.clone(),
                refused(&other_text),
            ),
            (
                "exception: admitted, no warning",
                Expect::Excepted,
                admitted(vec![]),
                EnforcementProbe::Enforced,
            ),
            (
                "exception: admitted with the policy's warning",
                Expect::Excepted,
                admitted(warned),
                EnforcementProbe::NotEnforced(WARNED_EXCEPTED.to_owned()),
            ),
            (
                "exception: denied with the policy's message",
                Expect::Excepted,
                denied(ours, MESSAGE, vec![]),
                EnforcementProbe::NotEnforced(DENIED_EXCEPTED.to_owned()),
            ),
            (
                "exception: denied by another policy",
                Expect::Excepted,
                other,
                refused(&other_text),
            ),
        ];
        for (case, expect, answer, verdict) in cases {
            assert_eq!(mk_probe(expect).verdict(&answer), verdict, "{case}");
        }
    }
}
