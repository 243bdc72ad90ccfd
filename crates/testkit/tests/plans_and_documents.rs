//! The compute-plan and policy-document corpora against the policy core and the document
//! parser.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use palisade_api_types::PolicyDocument;
use palisade_policy::{compute_plan, Catalog, PlanName, ResourceType};
use palisade_testkit::corpus::{document_cases, plan_cases, policies_of};

/// Runs `check` on every case (at least `at_least` of them) and fails with each one that did
/// not match, one a line (`check` answers what was wrong, `None` when it matched).
fn check_each<C>(cases: Vec<C>, at_least: usize, check: impl FnMut(C) -> Option<String>) {
    assert!(cases.len() >= at_least, "{} cases", cases.len());
    let failures: Vec<String> = cases.into_iter().filter_map(check).collect();
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn plan_decisions_match_the_corpus() {
    let catalog = Catalog::builtin();
    check_each(plan_cases().unwrap(), 45, |case| {
        let policies = policies_of(&case.name, &case.policies).unwrap();
        let ty = ResourceType::parse(&case.resource_type).unwrap();
        let plan = PlanName::parse(&case.plan).unwrap();
        let decision = compute_plan::decide(&policies, &catalog, ty, &plan).unwrap();
        let got = (
            decision.allowed,
            decision.message(),
            decision
                .allowed_plans
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            decision
                .denied_by
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
            decision
                .audit_warnings
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>(),
        );
        let want = (
            case.expect.allowed,
            case.expect.message.clone(),
            case.expect.allowed_plans.clone(),
            case.expect.denied_by.clone(),
            case.expect.audit_warnings.clone(),
        );
        (got != want).then(|| {
            format!(
                "{} ({}): got {got:?}\n   want {want:?}",
                case.name, case.file
            )
        })
    });
}

#[test]
fn documents_match_the_corpus() {
    let catalog = Catalog::builtin();
    check_each(document_cases().unwrap(), 40, |case| {
        let bytes = serde_json::to_vec(&case.document).unwrap();
        let result = PolicyDocument::from_json(&bytes).and_then(|d| d.validate(&catalog));
        match (&case.expect.error_pointer, result) {
            (Some(pointer), Err(error)) => {
                let shown = error.to_string();
                (error.pointer != *pointer || !shown.starts_with(&format!("{pointer}: "))).then(
                    || {
                        format!(
                            "{} ({}): got error {shown:?}, want pointer {pointer}",
                            case.name, case.file
                        )
                    },
                )
            }
            (Some(pointer), Ok(_)) => Some(format!(
                "{} ({}): accepted, want an error at {pointer}",
                case.name, case.file
            )),
            (None, Err(error)) => Some(format!("{} ({}): rejected: {error}", case.name, case.file)),
            (None, Ok(valid)) => {
                let warnings: Vec<String> =
                    valid.warnings.iter().map(ToString::to_string).collect();
                (warnings != case.expect.warnings).then(|| {
                    format!(
                        "{} ({}): warnings {:?}, want {:?}",
                        case.name, case.file, warnings, case.expect.warnings
                    )
                })
            }
        }
    });
}
