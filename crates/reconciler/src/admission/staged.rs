//! A policy being rolled out (SPEC 8) in a cluster: what every layout adds for it (the new
//! version's objects of its own, named for the version, so that the API server counts what it
//! denies apart), which of the version objects the cluster held go, and which objects judge the
//! policy in a namespace. Once the rollout is done, the policy is written as any other and its
//! version objects go: the layout's usual objects take over before they are deleted.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use palisade_policy::{Exception, Mode, Name, Policy};
use palisade_vap::per_policy::{render_staged, version_audit_binding_name, version_object_name};
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
    let Some(staged) = render_staged(
        boundary,
        None,
        policy,
        staging.version,
        &staging.reached,
        installation,
        exceptions,
    ) else {
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
