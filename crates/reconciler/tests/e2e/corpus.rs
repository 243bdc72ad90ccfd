//! Every `live` case of the admission corpus on a real API server: its policies installed with
//! `apply_policy` in a boundary of their own, its object sent as a server-side dry-run create
//! into a namespace of that boundary; the answer must be the expected verdict with exactly the
//! expected message (any one of the expected denials, SPEC 3.3) and exactly the expected audit
//! warnings. The same object in an unlabelled namespace is admitted without a warning.

use std::collections::BTreeMap;
use std::time::Instant;

use palisade_reconciler::answer::policy_warning;
use palisade_reconciler::AdmissionAnswer;
use palisade_testkit::control_plane::temp_namespace;
use palisade_testkit::corpus::{admission_cases, policies_of, AdmissionCase};
use palisade_vap::object_name;

use crate::support::{barrier, connect, name, on_both_versions, INSTALLATION};

on_both_versions!(corpus_replays_on_a_real_api_server);

/// Warnings of palisade's policies (Kubernetes' text of a `Warn` action).
fn policy_warnings(answer: &AdmissionAnswer) -> Vec<String> {
    let mut warnings: Vec<String> = answer
        .warnings
        .iter()
        .filter(|w| w.starts_with("Validation failed for ValidatingAdmissionPolicy '"))
        .cloned()
        .collect();
    warnings.sort();
    warnings
}

async fn corpus_replays_on_a_real_api_server(version: &str) {
    let started = Instant::now();
    let (plane, cluster) = connect(version).await;
    let connected = started.elapsed();
    let client = plane.client().await;

    let cases: Vec<AdmissionCase> = admission_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.live)
        .collect();
    // One boundary (and namespace) per distinct policy set, all installed up front.
    let mut groups: BTreeMap<String, Vec<&AdmissionCase>> = BTreeMap::new();
    for case in &cases {
        groups
            .entry(serde_json::to_string(&case.policies).unwrap())
            .or_default()
            .push(case);
    }
    let unlabelled = temp_namespace(&client, None).await;
    let mut installed = Vec::new();
    for (index, members) in groups.values().enumerate() {
        let boundary = name(&format!("corpus-{index}"));
        let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
        for policy in policies_of(&members[0].name, &members[0].policies).unwrap() {
            cluster
                .apply_policy(INSTALLATION, &boundary, &policy)
                .await
                .unwrap();
        }
        installed.push((boundary, namespace, members));
    }
    let applied = started.elapsed();
    let activation = barrier(&cluster, plane).await;
    let active = started.elapsed();

    let mut failures = Vec::new();
    let (mut denied, mut admitted, mut warned) = (0, 0, 0);
    for (boundary, namespace, members) in &installed {
        for case in members.iter() {
            let answer = cluster
                .dry_run_create(namespace, &case.object)
                .await
                .unwrap();
            let expected_warnings = {
                let mut w: Vec<String> = case
                    .expect
                    .warnings
                    .iter()
                    .map(|w| {
                        let vap = object_name(boundary, &name(&w.policy));
                        policy_warning(&vap, &vap, &w.message)
                    })
                    .collect();
                w.sort();
                w
            };
            let verdict_ok = if case.expect.admitted {
                answer.admitted()
            } else {
                answer.code == 422
                    && answer.reason.as_deref() == Some("Invalid")
                    && case.expect.denials.iter().any(|d| {
                        answer.denial_message() == Some(d.message.as_str())
                            && answer.denying_policy()
                                == Some(object_name(boundary, &name(&d.policy)).as_str())
                    })
            };
            let warnings_ok = policy_warnings(&answer) == expected_warnings;
            if verdict_ok && warnings_ok {
                if answer.admitted() {
                    admitted += 1;
                } else {
                    denied += 1;
                }
                if !expected_warnings.is_empty() {
                    warned += 1;
                }
            } else {
                failures.push(format!(
                    "{} ({}): expected admitted={} denials={:?} warnings={expected_warnings:?}; the API server answered {answer:?}",
                    case.name,
                    case.file,
                    case.expect.admitted,
                    case.expect.denials.iter().map(|d| &d.message).collect::<Vec<_>>(),
                ));
            }
            let outside = cluster
                .dry_run_create(&unlabelled, &case.object)
                .await
                .unwrap();
            if !outside.admitted() || !policy_warnings(&outside).is_empty() {
                failures.push(format!(
                    "{}: not simply admitted in an unlabelled namespace: {outside:?}",
                    case.name
                ));
            }
        }
    }
    eprintln!(
        "corpus on Kubernetes {}: {} live cases in {} policy sets; {denied} denied with the exact message, \
         {admitted} admitted ({warned} with the exact audit warnings), each also admitted in an unlabelled namespace. \
         Control plane ready after {:.1} s, policies applied after {:.1} s, active {:.1} s later, replayed in {:.1} s; {:.1} s in all",
        plane.version(),
        cases.len(),
        groups.len(),
        connected.as_secs_f64(),
        applied.as_secs_f64(),
        activation.as_secs_f64(),
        (started.elapsed() - active).as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
