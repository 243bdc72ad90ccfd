//! The admission corpus against two of its evaluators: the Rust evaluator and the rendered CEL
//! run on the `cel` crate. (`palisade check` runs it in the CLI's tests; the real API server in
//! the reconciler's end-to-end tests.)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use palisade_policy::admission::{evaluate, AdmissionObject, AdmissionRequest};
use palisade_testkit::cel_eval::{request_for, to_cel, CelOutcome, CompiledPolicy};
use palisade_testkit::corpus::{admission_cases, policies_of, AdmissionCase};
use palisade_vap::PolicyCel;

type Expected = (Vec<(String, String, String)>, Vec<(String, String)>);

fn expected(case: &AdmissionCase) -> Expected {
    let denials = case
        .expect
        .denials
        .iter()
        .map(|d| {
            (
                d.policy.clone(),
                d.rule.clone().unwrap_or_default(),
                d.message.clone(),
            )
        })
        .collect();
    let warnings = case
        .expect
        .warnings
        .iter()
        .map(|w| (w.policy.clone(), w.message.clone()))
        .collect();
    (denials, warnings)
}

#[test]
fn corpus_has_at_least_150_cases() {
    let cases = admission_cases().unwrap();
    assert!(cases.len() >= 150, "{} cases", cases.len());
    let mut names: Vec<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    names.sort();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "case names are unique");
}

#[test]
fn rust_evaluator_matches_the_corpus() {
    let mut failures = Vec::new();
    for case in admission_cases().unwrap() {
        let policies = policies_of(&case.name, &case.policies).unwrap();
        let object = AdmissionObject::from_json(&case.object).unwrap();
        let verdict = evaluate(&policies, &object, &AdmissionRequest::default());
        let denials: Vec<_> = verdict
            .denials
            .iter()
            .map(|d| (d.policy.to_string(), d.rule.to_string(), d.message.clone()))
            .collect();
        let warnings: Vec<_> = verdict
            .warnings
            .iter()
            .map(|d| (d.policy.to_string(), d.message.clone()))
            .collect();
        let (want_denials, want_warnings) = expected(&case);
        let want_denials: Vec<_> = want_denials
            .into_iter()
            .zip(&denials)
            .map(|((p, r, m), got)| (p, if r.is_empty() { got.1.clone() } else { r }, m))
            .collect();
        if verdict.checked != case.expect.checked
            || verdict.admitted() != case.expect.admitted
            || denials.len() != case.expect.denials.len()
            || denials != want_denials
            || warnings != want_warnings
        {
            failures.push(format!(
                "{} ({}): got checked={} denials={denials:?} warnings={warnings:?}; want checked={} denials={:?} warnings={want_warnings:?}",
                case.name, case.file, verdict.checked, case.expect.checked, case.expect.denials
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn rendered_cel_matches_the_corpus() {
    let mut failures = Vec::new();
    let mut evaluated = 0;
    for case in admission_cases().unwrap() {
        if !case.expect.checked {
            continue; // the API server never sends these kinds to the policy
        }
        let policies = policies_of(&case.name, &case.policies).unwrap();
        // An API server defaults the object before admission reads it (SPEC 4.2).
        let defaulted = palisade_policy::defaulting::apply(&case.object);
        let object = to_cel(&defaulted).unwrap();
        let request = to_cel(&request_for(&defaulted, "CREATE", "alice")).unwrap();
        let mut denials = Vec::new();
        let mut warnings = Vec::new();
        for policy in &policies {
            let Some(cel) = PolicyCel::of(policy) else {
                continue;
            };
            let compiled = CompiledPolicy::new(&cel).unwrap();
            evaluated += 1;
            match compiled.evaluate(&object, &request) {
                Ok(CelOutcome::Denied(message)) => match policy.mode() {
                    palisade_policy::Mode::Enforce => {
                        denials.push((policy.name().to_string(), message))
                    }
                    palisade_policy::Mode::Audit => {
                        warnings.push((policy.name().to_string(), message))
                    }
                },
                Ok(_) => {}
                Err(e) => failures.push(format!(
                    "{}: policy {}: CEL error {e}",
                    case.name,
                    policy.name()
                )),
            }
        }
        denials.sort();
        warnings.sort();
        let want_denials: Vec<_> = case
            .expect
            .denials
            .iter()
            .map(|d| (d.policy.clone(), d.message.clone()))
            .collect();
        let (_, want_warnings) = expected(&case);
        if denials != want_denials || warnings != want_warnings {
            failures.push(format!(
                "{} ({}): CEL gave denials={denials:?} warnings={warnings:?}; want {want_denials:?} {want_warnings:?}",
                case.name, case.file
            ));
        }
    }
    assert!(evaluated > 150, "{evaluated} policy evaluations");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
