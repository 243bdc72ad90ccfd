//! Generated admission inputs, shared by the property test that compares the Rust evaluator
//! with the rendered CEL (`palisade-vap`'s `agreement`) and by the end-to-end test that replays
//! a fixed-seed sample on real API servers (`palisade-reconciler`'s `generated`): Pods whose
//! images have registry ports, digests with and without tags, several `:` and `/`, upper case,
//! empty segments and odd characters, and whose label maps hit and miss required labels.

#![allow(
    clippy::panic,
    reason = "fixed test inputs: a bad one fails the test that uses it"
)]

use std::collections::BTreeMap;

use palisade_policy::Policy;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

/// The three policies generated inputs are judged against.
pub fn policies() -> Vec<Policy> {
    [
        serde_json::json!({"rules": [{"disallowLatestTag": {}}]}),
        serde_json::json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme", "registry:5000", "localhost/x/", "docker.io/library"]}}]}),
        serde_json::json!({"rules": [
            {"requiredLabels": {"labels": [{"key": "team", "value": "web"}, {"key": "app.kubernetes.io/name"}, {"key": "tier", "value": ""}]}},
            {"allowedRegistries": {"registries": ["ghcr.io"]}},
            {"disallowLatestTag": {}}
        ]}),
    ]
    .into_iter()
    .enumerate()
    .map(|(index, spec)| crate::corpus::policy(&format!("generated-{index}"), "shop", spec))
    .collect()
}

/// Image strings with ports, digests, several `:` and `/`, upper case, empty segments.
pub fn image() -> impl Strategy<Value = String> {
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

/// Label maps around the required labels of `policies()`.
pub fn labels() -> impl Strategy<Value = BTreeMap<String, String>> {
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

/// A Pod with `images` as containers, `init` as init containers and `labels`.
pub fn pod(
    images: &[String],
    init: &[String],
    labels: &BTreeMap<String, String>,
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

/// Generated Pods: 1-3 containers, 0-2 init containers, a label map.
pub fn pods() -> impl Strategy<Value = serde_json::Value> {
    (
        proptest::collection::vec(image(), 1..4),
        proptest::collection::vec(image(), 0..3),
        labels(),
    )
        .prop_map(|(images, init, labels)| pod(&images, &init, &labels))
}

/// `count` Pods from a fixed seed: the same list on every run and machine.
pub fn sample(seed: u64, count: usize) -> Vec<serde_json::Value> {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = pods();
    (0..count)
        .filter_map(|_| {
            strategy
                .new_tree(&mut runner)
                .ok()
                .map(|tree| tree.current())
        })
        .collect()
}
