//! Every `live` case of the admission corpus on a real API server: its policies installed with
//! `apply_policy` in a boundary of their own, its object sent as a server-side dry-run create
//! into a namespace of that boundary; the answer must be the expected verdict with exactly the
//! expected message (any one of the expected denials, SPEC 3.3) and exactly the expected audit
//! warnings. The same object in an unlabelled namespace is admitted without a warning.

use std::collections::BTreeMap;
use std::time::Instant;

use palisade_policy::{Name, Policy};
use palisade_reconciler::answer::policy_warning;
use palisade_reconciler::{AdmissionAnswer, InLayout};
use palisade_testkit::control_plane::temp_namespace;
use palisade_testkit::corpus::{
    policies_of, AdmissionCase, AdmissionHarness, Finding, Reports, Verdict,
};
use palisade_vap::per_boundary::object_holding;
use palisade_vap::shared::{shared_binding_name, shared_policy_name};
use palisade_vap::{object_name, Layout};

use crate::support::{barrier_in, connect, name, on_both_versions, INSTALLATION};

on_both_versions!(corpus_replays_on_a_real_api_server);
on_both_versions!(corpus_replays_in_the_shared_layout);
on_both_versions!(corpus_replays_in_the_per_boundary_layout);

/// The installation of the shared layout's replay (its own, so that no other test's removal of
/// an installation touches it).
const SHARED_INSTALLATION: &str = "e2e-shared";
/// The installation of the per-boundary layout's replay.
const PER_BOUNDARY_INSTALLATION: &str = "e2e-per-boundary";

/// Warnings of palisade's policies (Kubernetes' text of a `Warn` action).
pub(crate) fn policy_warnings(answer: &AdmissionAnswer) -> Vec<String> {
    answer
        .warnings
        .iter()
        .filter(|w| w.starts_with("Validation failed for ValidatingAdmissionPolicy '"))
        .cloned()
        .collect()
}

/// A boundary holding one distinct policy set of the corpus, and a namespace in it.
struct PolicySet {
    boundary: Name,
    namespace: String,
    policies: Vec<Policy>,
}

pub(crate) fn policy_set_key(case: &AdmissionCase) -> String {
    serde_json::to_string(&case.policies).unwrap()
}

/// The API server's answer to a dry-run create of the case's object in its policy set's
/// namespace, as a verdict; an error when the same object is not simply admitted in an
/// unlabelled namespace, or when a refusal is not a palisade denial.
async fn api_server_verdict(
    cluster: &InLayout,
    installation: &str,
    set: &PolicySet,
    unlabelled: &str,
    case: &AdmissionCase,
) -> Result<Verdict, String> {
    let answer = cluster
        .dry_run_create(&set.namespace, &case.object)
        .await
        .map_err(|e| e.to_string())?;
    let outside = cluster
        .dry_run_create(unlabelled, &case.object)
        .await
        .map_err(|e| e.to_string())?;
    if !outside.admitted() || !policy_warnings(&outside).is_empty() {
        return Err(format!(
            "not simply admitted in an unlabelled namespace: {outside:?}"
        ));
    }
    let mut verdict = Verdict {
        admitted: answer.admitted(),
        ..Verdict::default()
    };
    if !answer.admitted() {
        let invalid = answer.code == 422 && answer.reason.as_deref() == Some("Invalid");
        let denial = answer.denying_policy().and_then(|denying| {
            let message = answer.denial_message()?;
            // The shared policy is every policy's: the message names which one.
            let policy = set.policies.iter().find(|p| {
                names(cluster, installation, set, p).0 == denying
                    && message.starts_with(&format!("Policy '{}' (", p.name()))
            })?;
            Some(Finding {
                policy: policy.name().to_string(),
                rule: None,
                message: answer.denial_message()?.to_owned(),
            })
        });
        match denial.filter(|_| invalid) {
            Some(denial) => verdict.denials.push(denial),
            None => return Err(format!("refused, but not by a palisade policy: {answer:?}")),
        }
    }
    for warning in policy_warnings(&answer) {
        let found = set.policies.iter().find_map(|policy| {
            let (vap, binding) = names(cluster, installation, set, policy);
            let message = warning.strip_prefix(&policy_warning(&vap, &binding, ""))?;
            if !message.starts_with(&format!("Policy '{}' (", policy.name())) {
                return None;
            }
            Some(Finding {
                policy: policy.name().to_string(),
                rule: None,
                message: message.to_owned(),
            })
        });
        verdict.warnings.push(found.unwrap_or(Finding {
            policy: "(not a policy of the case)".into(),
            rule: None,
            message: warning,
        }));
    }
    Ok(verdict)
}

/// The names of the policy object and binding that judge `policy` in the client's layout.
fn names(
    cluster: &InLayout,
    installation: &str,
    set: &PolicySet,
    policy: &Policy,
) -> (String, String) {
    match cluster.layout() {
        Layout::PerPolicy => {
            let name = object_name(&set.boundary, policy.name());
            (name.clone(), name)
        }
        Layout::Shared => (
            shared_policy_name(installation),
            shared_binding_name(installation, policy.mode()),
        ),
        Layout::PerBoundary => {
            let name =
                object_holding(&set.boundary, &set.policies, policy.name()).unwrap_or_default();
            (name.clone(), name)
        }
    }
}

async fn corpus_replays_on_a_real_api_server(version: &str) {
    replay(version, INSTALLATION, Layout::PerPolicy).await;
}

/// The same cases with one shared policy and two bindings, each policy's rules in parameters.
async fn corpus_replays_in_the_shared_layout(version: &str) {
    replay(version, SHARED_INSTALLATION, Layout::Shared).await;
}

/// The same cases with one policy object and binding per boundary and mode.
async fn corpus_replays_in_the_per_boundary_layout(version: &str) {
    replay(version, PER_BOUNDARY_INSTALLATION, Layout::PerBoundary).await;
}

async fn replay(version: &str, installation: &str, layout: Layout) {
    let started = Instant::now();
    let (plane, cluster) = connect(version).await;
    let cluster = cluster.to(layout);
    let connected = started.elapsed();
    let client = plane.client().await;

    let harness = AdmissionHarness::new(&format!("Kubernetes {version}"), Reports::FirstDenial)
        .only({
            let version = version.to_owned();
            move |case| case.live_on(&version)
        });
    let cases = harness.cases();
    // One boundary (and namespace) per distinct policy set, all installed up front.
    let unlabelled = temp_namespace(&client, None).await;
    let mut sets: BTreeMap<String, PolicySet> = BTreeMap::new();
    for case in &cases {
        let key = policy_set_key(case);
        if sets.contains_key(&key) {
            continue;
        }
        let boundary = name(&format!("corpus-{}-{}", layout.as_str(), sets.len()));
        let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
        let policies = policies_of(&case.name, &case.policies).unwrap();
        cluster
            .apply_boundary(installation, &boundary, &policies)
            .await
            .unwrap();
        let set = PolicySet {
            boundary,
            namespace,
            policies,
        };
        sets.insert(key, set);
    }
    let applied = started.elapsed();
    let activation = barrier_in(&cluster, plane, installation).await;
    let active = started.elapsed();

    let (cluster, sets, unlabelled) = (&cluster, &sets, unlabelled.as_str());
    let report = harness
        .run_async(|case| async move {
            let set = &sets[&policy_set_key(&case)];
            api_server_verdict(cluster, installation, set, unlabelled, &case).await
        })
        .await;
    eprintln!(
        "corpus on Kubernetes {} ({} layout): {} live cases in {} policy sets; {} denied with the exact message, \
         {} admitted ({} with the exact audit warnings), each also admitted in an unlabelled namespace. \
         Control plane ready after {:.1} s, policies applied after {:.1} s, active {:.1} s later, replayed in {:.1} s; {:.1} s in all",
        plane.version(),
        layout.as_str(),
        report.cases,
        sets.len(),
        report.denied,
        report.admitted,
        report.warned,
        connected.as_secs_f64(),
        applied.as_secs_f64(),
        activation.as_secs_f64(),
        (started.elapsed() - active).as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
}
