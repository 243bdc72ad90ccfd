//! Property tests: for generated images and label maps, the Rust evaluator and the rendered CEL
//! give the same verdict and the same message.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use palisade_api_types::PolicyDocument;
use palisade_policy::admission::{first_violation, AdmissionObject};
use palisade_policy::{Catalog, Policy};
use palisade_testkit::cel_eval::{request_for, to_cel, CelOutcome, CompiledPolicy};
use palisade_vap::PolicyCel;
use proptest::prelude::*;

fn policy(spec: serde_json::Value) -> Policy {
    let document = serde_json::json!({
        "apiVersion": "palisade.dev/v1", "kind": "BoundaryPolicy",
        "metadata": {"name": "p", "boundary": "shop"}, "spec": spec,
    });
    PolicyDocument::from_json(&serde_json::to_vec(&document).unwrap())
        .unwrap()
        .validate(&Catalog::builtin())
        .unwrap()
        .policy
}

fn policies() -> Vec<Policy> {
    vec![
        policy(serde_json::json!({"rules": [{"disallowLatestTag": {}}]})),
        policy(
            serde_json::json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme", "registry:5000", "localhost/x/", "docker.io/library"]}}]}),
        ),
        policy(serde_json::json!({"rules": [
            {"requiredLabels": {"labels": [{"key": "team", "value": "web"}, {"key": "app.kubernetes.io/name"}, {"key": "tier", "value": ""}]}},
            {"allowedRegistries": {"registries": ["ghcr.io"]}},
            {"disallowLatestTag": {}}
        ]})),
    ]
}

/// Image strings with ports, digests, several `:` and `/`, upper case, empty segments.
fn image() -> impl Strategy<Value = String> {
    let host = prop_oneof![
        Just(String::new()),
        Just("ghcr.io/".to_owned()),
        Just("ghcr.io/acme/".to_owned()),
        Just("GHCR.IO/acme/".to_owned()),
        Just("registry:5000/".to_owned()),
        Just("registry:5000".to_owned()),
        Just("localhost/x/".to_owned()),
        Just("docker.io/library/".to_owned()),
        Just("ghcr.io/acme-tools/".to_owned()),
        "[a-z.:]{1,8}/",
    ];
    let path = prop_oneof![
        Just("nginx".to_owned()),
        Just(String::new()),
        Just("a//b".to_owned()),
        "[a-zA-Z0-9._/-]{0,12}"
    ];
    let tag = prop_oneof![
        Just(String::new()),
        Just(":".to_owned()),
        Just(":latest".to_owned()),
        Just(":LATEST".to_owned()),
        Just(":1.27".to_owned()),
        Just(":a:b".to_owned()),
        ":[a-z0-9:/]{0,6}",
    ];
    let digest = prop_oneof![
        Just(String::new()),
        Just("@sha256:0123abcd".to_owned()),
        Just("@".to_owned())
    ];
    let odd = prop_oneof![
        Just(String::new()),
        Just(" ".to_owned()),
        Just("\n".to_owned()),
        Just("é".to_owned())
    ];
    (host, path, tag, digest, odd).prop_map(|(h, p, t, d, o)| format!("{h}{p}{t}{d}{o}"))
}

fn labels() -> impl Strategy<Value = std::collections::BTreeMap<String, String>> {
    let key = prop_oneof![
        Just("team".to_owned()),
        Just("app.kubernetes.io/name".to_owned()),
        Just("tier".to_owned()),
        Just("other".to_owned())
    ];
    let value = prop_oneof![
        Just(String::new()),
        Just("web".to_owned()),
        Just("api".to_owned()),
        Just("Web".to_owned()),
        "[a-z ]{0,5}"
    ];
    proptest::collection::btree_map(key, value, 0..4)
}

fn pod(
    images: &[String],
    init: &[String],
    labels: &std::collections::BTreeMap<String, String>,
) -> serde_json::Value {
    let containers: Vec<_> = images
        .iter()
        .enumerate()
        .map(|(i, im)| serde_json::json!({"name": format!("c{i}"), "image": im}))
        .collect();
    let inits: Vec<_> = init
        .iter()
        .enumerate()
        .map(|(i, im)| serde_json::json!({"name": format!("i{i}"), "image": im}))
        .collect();
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": labels},
        "spec": {"containers": containers, "initContainers": inits},
    })
}

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
