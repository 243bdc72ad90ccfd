//! Property tests: for generated images and label maps, the Rust evaluator and the rendered CEL
//! give the same verdict and the same message.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use palisade_policy::admission::{first_violation, AdmissionObject};
use palisade_testkit::cel_eval::{request_for, to_cel, CelOutcome, CompiledPolicy};
use palisade_testkit::generated::{image, labels, pod, policies};
use palisade_vap::PolicyCel;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn rust_and_cel_agree(
        images in proptest::collection::vec(image(), 1..4),
        init in proptest::collection::vec(image(), 0..3),
        labels in labels(),
    ) {
        let json = pod(&images, &init, &labels);
        let object = AdmissionObject::from_json(&json).unwrap();
        let cel_object = to_cel(&json).unwrap();
        let request = to_cel(&request_for(&json, "CREATE", "alice")).unwrap();
        for policy in policies() {
            let rust = first_violation(&policy, &object).map(|d| d.message);
            let compiled = CompiledPolicy::new(&PolicyCel::of(&policy).unwrap()).unwrap();
            let cel = match compiled.evaluate(&cel_object, &request).unwrap() {
                CelOutcome::Denied(message) => Some(message),
                CelOutcome::Admitted | CelOutcome::NotMatched => None,
            };
            prop_assert_eq!(rust, cel, "policy {} on {}", policy.name(), json);
        }
    }
}
