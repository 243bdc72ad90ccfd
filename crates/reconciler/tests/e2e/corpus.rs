//! Every `live` case of the admission corpus on a real API server: its policies installed with
//! `apply_policy` in a boundary of their own, its object sent as a server-side dry-run create
//! into a namespace of that boundary; the answer must be the expected verdict with exactly the
//! expected message (any one of the expected denials, SPEC 3.3) and exactly the expected audit
//! warnings. The same object in an unlabelled namespace is admitted without a warning.

use std::collections::BTreeMap;
use std::time::Instant;

use palisade_policy::{Name, Policy};
use palisade_reconciler::answer::policy_warning;
use palisade_reconciler::{AdmissionAnswer, ClusterClient};
use palisade_testkit::control_plane::temp_namespace;
use palisade_testkit::corpus::{
    policies_of, AdmissionCase, AdmissionHarness, Finding, Reports, Verdict,
};
use palisade_vap::object_name;

use crate::support::{barrier, connect, name, on_both_versions, INSTALLATION};

on_both_versions!(corpus_replays_on_a_real_api_server);

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
    cluster: &ClusterClient,
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
    let vap = |policy: &Policy| object_name(&set.boundary, policy.name());
    let mut verdict = Verdict {
        admitted: answer.admitted(),
        ..Verdict::default()
    };
    if !answer.admitted() {
        let invalid = answer.code == 422 && answer.reason.as_deref() == Some("Invalid");
        let denial = answer.denying_policy().and_then(|denying| {
            let policy = set.policies.iter().find(|p| vap(p) == denying)?;
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
            let vap = vap(policy);
            let message = warning.strip_prefix(&policy_warning(&vap, &vap, ""))?;
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

async fn corpus_replays_on_a_real_api_server(version: &str) {
    let started = Instant::now();
    let (plane, cluster) = connect(version).await;
    let connected = started.elapsed();
    let client = plane.client().await;

    let harness = AdmissionHarness::new(&format!("Kubernetes {version}"), Reports::FirstDenial)
        .only(|case| case.live);
    let cases = harness.cases();
    // One boundary (and namespace) per distinct policy set, all installed up front.
    let unlabelled = temp_namespace(&client, None).await;
    let mut sets: BTreeMap<String, PolicySet> = BTreeMap::new();
    for case in &cases {
        let key = policy_set_key(case);
        if sets.contains_key(&key) {
            continue;
        }
        let boundary = name(&format!("corpus-{}", sets.len()));
        let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
        let policies = policies_of(&case.name, &case.policies).unwrap();
        for policy in &policies {
            cluster
                .apply_policy(INSTALLATION, &boundary, policy)
                .await
                .unwrap();
        }
        let set = PolicySet {
            boundary,
            namespace,
            policies,
        };
        sets.insert(key, set);
    }
    let applied = started.elapsed();
    let activation = barrier(&cluster, plane).await;
    let active = started.elapsed();

    let (cluster, sets, unlabelled) = (&cluster, &sets, unlabelled.as_str());
    let report = harness
        .run_async(|case| async move {
            let set = &sets[&policy_set_key(&case)];
            api_server_verdict(cluster, set, unlabelled, &case).await
        })
        .await;
    eprintln!(
        "corpus on Kubernetes {}: {} live cases in {} policy sets; {} denied with the exact message, \
         {} admitted ({} with the exact audit warnings), each also admitted in an unlabelled namespace. \
         Control plane ready after {:.1} s, policies applied after {:.1} s, active {:.1} s later, replayed in {:.1} s; {:.1} s in all",
        plane.version(),
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
