//! A policy being rolled out (SPEC 8) in a cluster: what every layout adds for it (the new
//! version's objects of its own, named for the version, so that the API server counts what it
//! denies apart), which of the version objects the cluster held go, and which objects judge the
//! policy in a namespace. Once the rollout is done, the policy is written as any other and its
//! version objects go: the layout's usual objects take over before they are deleted.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use palisade_policy::{Exception, Mode, Name, Policy};
use palisade_vap::per_boundary::Rolling;
use palisade_vap::per_policy::{
    render_staged, version_audit_binding_name, version_object_name, LEFT_ANNOTATION,
    REACHED_ANNOTATION,
};
use palisade_vap::render::{POLICY_LABEL, VERSION_LABEL};

use super::{Judge, Object, Stale};
use crate::installed::{is_ours, Installed};

/// A policy's rollout in one cluster: the boundary's namespaces there its stage reached (maybe
/// none, maybe all).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Staging {
    /// The version being rolled out (the policy as decoded).
    pub version: u64,
    /// The version in force before, where the stage has not reached (`None`: a new policy).
    pub previous: Option<Policy>,
    /// The namespaces the stage reached.
    pub reached: BTreeSet<Name>,
    /// Of `reached`, the namespaces the version before has left ([`handed_over`]); in the
    /// others both versions judge for a moment, so that no moment judges with neither.
    pub left: BTreeSet<Name>,
}

impl Staging {
    /// Whether the version before still judges reached namespaces beside the new version:
    /// the cluster needs another look once the handover time has passed.
    pub fn handing_over(&self) -> bool {
        self.previous.is_some() && self.left != self.reached
    }

    /// The version before, where it still judges `namespace` beside the new version.
    pub fn handing_over_in(&self, namespace: &str) -> Option<&Policy> {
        let here = |set: &BTreeSet<Name>| set.iter().any(|n| n.as_str() == namespace);
        self.previous
            .as_ref()
            .filter(|_| here(&self.reached) && !here(&self.left))
    }
}

/// The versions of `policies` that enforce in `namespace`, given their rollouts `staged`: the
/// new version where its stage reached, the version before where it has not left. What a
/// probe's Pod there must satisfy besides the policy it probes, while several policies roll
/// out at once.
pub(crate) fn judging_versions(
    policies: &[Policy],
    staged: &std::collections::BTreeMap<Name, Staging>,
    namespace: &str,
) -> Vec<Policy> {
    let here = |set: &BTreeSet<Name>| set.iter().any(|n| n.as_str() == namespace);
    policies
        .iter()
        .flat_map(|policy| match staged.get(policy.name()) {
            None => vec![policy.clone()],
            Some(staging) => {
                let new = here(&staging.reached).then(|| policy.clone());
                let before = staging.previous.clone().filter(|_| !here(&staging.left));
                new.into_iter().chain(before).collect()
            }
        })
        .collect()
}

/// How long the new version's binding must have held a namespace before the version before
/// leaves it: the API server judges with a changed binding from its next policy reload, about
/// once a second (make before break).
pub(crate) const HANDOVER_MS: i64 = 1_000;

/// Of `reached`, the namespaces the version before may leave at `now_ms`, judged from the new
/// version's binding as installed (`binding`, its metadata): all it holds (its annotation
/// `palisade.dev/reached`) once it has not changed for [`HANDOVER_MS`]; before that, those the
/// version before had left when it was written (`palisade.dev/left`); none while it is not
/// installed. Its last change is known to the second, so the wait is 1 to 2 s.
pub(crate) fn handed_over(
    binding: Option<&ObjectMeta>,
    reached: &BTreeSet<Name>,
    now_ms: i64,
) -> BTreeSet<Name> {
    let Some(meta) = binding else {
        return BTreeSet::new();
    };
    let named = |key: &str| -> BTreeSet<Name> {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(|list| {
                list.split(',')
                    .filter_map(|n| Name::parse(n).ok())
                    .collect()
            })
            .unwrap_or_default()
    };
    let changed = meta
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|e| e.time.as_ref())
        .map(|t| t.0.as_second())
        .max();
    let settled = changed.is_some_and(|s| (s + 1) * 1_000 + HANDOVER_MS <= now_ms);
    let held = named(if settled {
        REACHED_ANNOTATION
    } else {
        LEFT_ANNOTATION
    });
    reached.intersection(&held).cloned().collect()
}

/// The new version's objects: its policy object, its binding in its own mode for the reached
/// namespaces (if any) and its audit binding for the others.
pub(crate) fn version_objects(
    boundary: &Name,
    policy: &Policy,
    staging: &Staging,
    installation: &str,
    exceptions: &[&Exception],
) -> Vec<Object> {
    let rolling = Rolling {
        current: policy,
        version: staging.version,
        reached: &staging.reached,
        left: &staging.left,
    };
    let Some(staged) = render_staged(boundary, None, rolling, installation, exceptions) else {
        return Vec::new();
    };
    let mut objects = vec![Object::Policy(Box::new(staged.policy))];
    objects.extend(
        staged
            .bindings
            .into_iter()
            .map(|b| Object::Binding(Box::new(b))),
    );
    objects
}

/// The version of a rollout an object was written for, if it is one's.
pub(crate) fn version_of(meta: &ObjectMeta) -> Option<&str> {
    meta.labels.as_ref()?.get(VERSION_LABEL).map(String::as_str)
}

/// The version objects of `policy` in `before` but those of version `keep`: what a write of
/// the policy makes stale (a finished or aborted rollout's, or an earlier version's).
pub(crate) fn stale_versions(
    before: &Installed,
    installation: &str,
    boundary: &Name,
    policy: &Name,
    keep: Option<u64>,
) -> Stale {
    let keep = keep.map(|v| v.to_string());
    let doomed = |meta: &&ObjectMeta| {
        is_ours(meta, installation, boundary)
            && meta
                .labels
                .as_ref()
                .and_then(|l| l.get(POLICY_LABEL))
                .is_some_and(|p| p == policy.as_str())
            && version_of(meta).is_some_and(|v| Some(v) != keep.as_deref())
    };
    Stale {
        bindings: before.bindings.iter().filter(doomed).cloned().collect(),
        policies: before.policies.iter().filter(doomed).cloned().collect(),
        parameters: Vec::new(),
    }
}

/// Which version judges `policy` in `namespace`, and how: the new one in its mode where the
/// stage reached (by its own objects), the previous one as before elsewhere (`Err`: judge it
/// as the layout does), or, for a new policy, the new one in audit there.
pub(crate) fn judging(
    installed: &Installed,
    installation: &str,
    boundary: &Name,
    policy: &Policy,
    staging: &Staging,
    namespace: &str,
) -> Result<(Policy, Judge), Policy> {
    let reached = staging.reached.iter().any(|n| n.as_str() == namespace);
    let name = version_object_name(boundary, policy.name(), staging.version);
    let (judged, binding) = match (&staging.previous, reached) {
        (_, true) => (policy.clone(), name.clone()),
        (Some(previous), false) => return Err(previous.clone()),
        (None, false) => (
            in_audit(policy),
            version_audit_binding_name(boundary, policy.name(), staging.version),
        ),
    };
    let present = |metas: &[ObjectMeta], wanted: &str| {
        metas
            .iter()
            .any(|m| m.name.as_deref() == Some(wanted) && is_ours(m, installation, boundary))
    };
    let judge = if present(&installed.policies, &name) && present(&installed.bindings, &binding) {
        Ok((name, binding))
    } else {
        Err(format!(
            "palisade's ValidatingAdmissionPolicy '{name}' or its binding '{binding}' of version {} being rolled out is not installed",
            staging.version
        ))
    };
    Ok((judged, judge))
}

/// The mode of the version that judges `policy` in `namespace` (see [`judging`]).
pub(crate) fn mode_in(policy: &Policy, staging: &Staging, namespace: &str) -> Mode {
    if staging.reached.iter().any(|n| n.as_str() == namespace) {
        return policy.mode();
    }
    staging.previous.as_ref().map_or(Mode::Audit, Policy::mode)
}

/// `policy` in audit: how a new policy judges where its stage has not reached.
fn in_audit(policy: &Policy) -> Policy {
    let audit = Policy::new(
        policy.name().clone(),
        Mode::Audit,
        policy.scope().clone(),
        policy.rules().to_vec(),
    );
    audit.unwrap_or_else(|_| policy.clone())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};

    use super::*;

    fn names(list: &[&str]) -> BTreeSet<Name> {
        list.iter()
            .map(|n| Name::parse(n).expect("a name"))
            .collect()
    }

    /// A version binding as installed: the namespaces it holds and those the version before
    /// had left when it was written, last changed at `second`.
    fn mk_binding(reached: &str, left: &str, second: i64) -> ObjectMeta {
        ObjectMeta {
            annotations: Some(
                [
                    (REACHED_ANNOTATION.to_owned(), reached.to_owned()),
                    (LEFT_ANNOTATION.to_owned(), left.to_owned()),
                ]
                .into(),
            ),
            managed_fields: Some(vec![ManagedFieldsEntry {
                time: Some(Time(
                    k8s_openapi::jiff::Timestamp::from_second(second).expect("a time"),
                )),
                ..ManagedFieldsEntry::default()
            }]),
            ..ObjectMeta::default()
        }
    }

    /// What a probe's Pod must satisfy in a namespace while policies roll out: a policy not
    /// rolling out as it is; where a stage reached, the new version, and the version before
    /// too until it left; where it has not, the version before only (the new one audits).
    #[test]
    fn a_namespace_is_judged_by_the_versions_in_force_there() {
        let mk = |name: &str, mode| {
            let team = palisade_policy::LabelKey::parse("team").expect("a key");
            let label = palisade_policy::LabelRequirement::new(team, None);
            Policy::new(
                Name::parse(name).expect("a name"),
                mode,
                palisade_policy::Scope::AllClusters,
                vec![palisade_policy::Rule::RequiredLabels(vec![label])],
            )
            .expect("a policy")
        };
        let (plain, rolling) = (mk("plain", Mode::Enforce), mk("tags", Mode::Enforce));
        let before = mk("tags", Mode::Audit);
        let staging = |reached: &[&str], left: &[&str]| Staging {
            version: 2,
            previous: Some(before.clone()),
            reached: names(reached),
            left: names(left),
        };
        let cases: [(&str, Staging, &[Mode]); 3] = [
            ("not reached", staging(&["web"], &["web"]), &[Mode::Audit]),
            (
                "reached, left",
                staging(&["api"], &["api"]),
                &[Mode::Enforce],
            ),
            (
                "reached, not left yet",
                staging(&["api"], &[]),
                &[Mode::Enforce, Mode::Audit],
            ),
        ];
        for (case, staging, modes) in cases {
            let staged = [(rolling.name().clone(), staging)].into();
            let judging = judging_versions(&[plain.clone(), rolling.clone()], &staged, "api");
            let seen: Vec<(&str, Mode)> = judging
                .iter()
                .map(|p| (p.name().as_str(), p.mode()))
                .collect();
            let mut wanted = vec![("plain", Mode::Enforce)];
            wanted.extend(modes.iter().map(|m| ("tags", *m)));
            assert_eq!(seen, wanted, "{case}");
        }
    }

    /// Make before break: the version before leaves a reached namespace only once the new
    /// version's binding has held it for a second at least (its change known to the second).
    #[test]
    fn the_version_before_leaves_a_namespace_once_the_new_one_surely_holds_it() {
        let reached = names(&["api", "web"]);
        let cases: [(&str, Option<ObjectMeta>, i64, &[&str]); 6] = [
            ("not installed yet", None, 100_000, &[]),
            (
                "written this second",
                Some(mk_binding("web", "", 100)),
                100_500,
                &[],
            ),
            (
                "written a second ago, but it may be 1.99 s",
                Some(mk_binding("web", "", 100)),
                101_999,
                &[],
            ),
            (
                "held for a second at least",
                Some(mk_binding("web", "", 100)),
                102_000,
                &["web"],
            ),
            (
                "grown a moment ago: what was left stays left",
                Some(mk_binding("api,web", "web", 100)),
                100_100,
                &["web"],
            ),
            (
                "held, and a namespace no longer reached is not left",
                Some(mk_binding("api,web,jobs", "web", 100)),
                103_000,
                &["api", "web"],
            ),
        ];
        for (case, binding, now_ms, left) in cases {
            assert_eq!(
                handed_over(binding.as_ref(), &reached, now_ms),
                names(left),
                "{case}"
            );
        }
    }
}
