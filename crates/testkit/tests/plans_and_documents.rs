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

#[test]
fn plan_decisions_match_the_corpus() {
    let catalog = Catalog::builtin();
    let cases = plan_cases().unwrap();
    assert!(cases.len() >= 45, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
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
        if got != want {
            failures.push(format!(
                "{} ({}): got {got:?}\n   want {want:?}",
                case.name, case.file
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
fn documents_match_the_corpus() {
    let catalog = Catalog::builtin();
    let cases = document_cases().unwrap();
    assert!(cases.len() >= 40, "{} cases", cases.len());
    let mut failures = Vec::new();
    for case in cases {
        let bytes = serde_json::to_vec(&case.document).unwrap();
        let result = PolicyDocument::from_json(&bytes).and_then(|d| d.validate(&catalog));
        match (&case.expect.error_pointer, result) {
            (Some(pointer), Err(error)) => {
                let shown = error.to_string();
                if error.pointer != *pointer || !shown.starts_with(&format!("{pointer}: ")) {
                    failures.push(format!(
                        "{} ({}): got error {shown:?}, want pointer {pointer}",
                        case.name, case.file
                    ));
                }
            }
            (Some(pointer), Ok(_)) => failures.push(format!(
                "{} ({}): accepted, want an error at {pointer}",
                case.name, case.file
            )),
            (None, Err(error)) => {
                failures.push(format!("{} ({}): rejected: {error}", case.name, case.file))
            }
            (None, Ok(valid)) => {
                let warnings: Vec<String> =
                    valid.warnings.iter().map(ToString::to_string).collect();
                if warnings != case.expect.warnings {
                    failures.push(format!(
                        "{} ({}): warnings {:?}, want {:?}",
                        case.name, case.file, warnings, case.expect.warnings
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
