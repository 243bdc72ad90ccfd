//! The admission corpus against two of its evaluators, through the test kit's harness: the Rust
//! evaluator and the rendered CEL run on the `cel` crate. (`palisade check` runs it in the CLI's
//! tests; the real API server in the reconciler's end-to-end tests.)

use palisade_policy::admission::{evaluate, AdmissionObject, AdmissionRequest, Denial};
use palisade_testkit::cel_eval::{request_for, to_cel, CelOutcome, CompiledPolicy};
use palisade_testkit::corpus::{
    admission_cases, policies_of, AdmissionCase, AdmissionHarness, Finding, Reports, Verdict,
};
use palisade_vap::PolicyCel;

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

fn finding(found: &Denial) -> Finding {
    Finding {
        policy: found.policy.to_string(),
        rule: Some(found.rule.to_string()),
        message: found.message.clone(),
    }
}

#[test]
fn rust_evaluator_matches_the_corpus() {
    AdmissionHarness::new("the Rust evaluator", Reports::InOrder).run(|case| {
        let policies = policies_of(&case.name, &case.policies).map_err(|e| e.to_string())?;
        let object = AdmissionObject::from_json(&case.object).map_err(|e| e.to_string())?;
        let verdict = evaluate(&policies, &object, &AdmissionRequest::default());
        Ok(Verdict {
            checked: Some(verdict.checked),
            admitted: verdict.admitted(),
            denials: verdict.denials.iter().map(finding).collect(),
            warnings: verdict.warnings.iter().map(finding).collect(),
        })
    });
}

/// The rendered CEL of each policy, run on the `cel` crate the way an API server runs it.
fn rendered_cel(case: &AdmissionCase, evaluated: &mut usize) -> Result<Verdict, String> {
    let policies = policies_of(&case.name, &case.policies).map_err(|e| e.to_string())?;
    // An API server defaults the object before admission reads it (SPEC 4.2).
    let defaulted = palisade_policy::defaulting::apply(&case.object);
    let object = to_cel(&defaulted).map_err(|e| e.to_string())?;
    let request = to_cel(&request_for(&defaulted, "CREATE", "alice")).map_err(|e| e.to_string())?;
    let mut verdict = Verdict::default();
    for policy in &policies {
        let Some(cel) = PolicyCel::of(policy) else {
            continue;
        };
        let compiled = CompiledPolicy::new(&cel).map_err(|e| e.to_string())?;
        *evaluated += 1;
        let outcome = compiled
            .evaluate(&object, &request)
            .map_err(|e| format!("policy {}: CEL error {e}", policy.name()))?;
        if let CelOutcome::Denied(message) = outcome {
            let found = Finding {
                policy: policy.name().to_string(),
                rule: None,
                message,
            };
            match policy.mode() {
                palisade_policy::Mode::Enforce => verdict.denials.push(found),
                palisade_policy::Mode::Audit => verdict.warnings.push(found),
            }
        }
    }
    verdict.admitted = verdict.denials.is_empty();
    Ok(verdict)
}

#[test]
fn rendered_cel_matches_the_corpus() {
    let mut evaluated = 0;
    AdmissionHarness::new("the rendered CEL", Reports::AnyOrder)
        // The API server never sends the kinds palisade does not check to the policy.
        .only(|case| case.expect.checked)
        .run(|case| rendered_cel(case, &mut evaluated));
    assert!(evaluated > 150, "{evaluated} policy evaluations");
}
