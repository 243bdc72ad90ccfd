//! A policy document's `metadata.labels` and `metadata.annotations` follow Kubernetes' syntax,
//! and YAML tags other than the core schema's are refused wherever YAML is read.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod common;

use common::outcome;
use palisade_api_types::yaml::documents;
use palisade_api_types::PolicyDocument;

fn with_metadata(extra: &str) -> String {
    format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: p\n  boundary: shop\n{extra}spec:\n  rules: [{{disallowLatestTag: {{}}}}]\n"
    )
}

#[test]
fn metadata_labels_follow_kubernetes_label_syntax() {
    let ok = [
        "  labels: {team: platform, app.kubernetes.io/name: palisade, empty: ''}\n",
        "  annotations: {example.com/note: 'any text: at all', note: ''}\n",
        "  annotations: {argocd.argoproj.io/sync-wave: '2'}\n",
    ];
    for extra in ok {
        assert_eq!(outcome(&with_metadata(extra)), Ok(()), "{extra}");
    }
    let refused = [
        ("  labels: {'a b': c}\n", "/metadata/labels/a b: "),
        ("  labels: {team: 'has space'}\n", "/metadata/labels/team: "),
        (
            "  labels: {'example.com/bad key': x}\n",
            "/metadata/labels/example.com~1bad key: ",
        ),
        ("  labels: {'a~b': x}\n", "/metadata/labels/a~0b: "),
        ("  labels: {'': x}\n", "/metadata/labels/: "),
        (
            "  labels: {'Bad_Prefix/x': y}\n",
            "/metadata/labels/Bad_Prefix~1x: ",
        ),
        ("  labels: {team: 'quote\"d'}\n", "/metadata/labels/team: "),
        ("  annotations: {'a b': c}\n", "/metadata/annotations/a b: "),
        (
            "  annotations: {'x/y/z': c}\n",
            "/metadata/annotations/x~1y~1z: ",
        ),
    ];
    for (extra, prefix) in refused {
        let error = outcome(&with_metadata(extra)).expect_err(extra);
        assert!(error.starts_with(prefix), "{extra}: {error}");
    }
    // Values must be strings, as in Kubernetes (a number is quoted in YAML).
    let error = outcome(&with_metadata("  labels: {version: 1}\n")).unwrap_err();
    assert!(error.starts_with("/metadata/labels/version: "), "{error}");
    let error = outcome(&with_metadata("  annotations: {sync: true}\n")).unwrap_err();
    assert!(error.starts_with("/metadata/annotations/sync: "), "{error}");
}

#[test]
fn annotations_are_bounded_like_kubernetes() {
    let big = "x".repeat(256 * 1024);
    let error = outcome(&with_metadata(&format!(
        "  annotations: {{note: '{big}'}}\n"
    )))
    .unwrap_err();
    assert!(
        error.starts_with("/metadata/annotations: ") && error.contains("262144"),
        "{}",
        &error[..error.len().min(200)]
    );
}

#[test]
fn custom_yaml_tags_are_refused_with_the_pointer_and_the_tag() {
    let cases = [
        (
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec: !evil {rules: [{disallowLatestTag: {}}]}\n",
            "/spec: custom YAML tags are not accepted (found !evil)",
        ),
        (
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop, labels: {team: !secret web}}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
            "/metadata/labels/team: custom YAML tags are not accepted (found !secret)",
        ),
        (
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec:\n  rules:\n  - allowedRegistries: {registries: [!x ghcr.io/acme]}\n",
            "/spec/rules/0/allowedRegistries/registries/0: custom YAML tags are not accepted (found !x)",
        ),
        (
            "!policy\napiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
            "custom YAML tags are not accepted (found !policy)",
        ),
        (
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop, labels: {! team: web}}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
            "/metadata/labels: custom YAML tags are not accepted (found !)",
        ),
    ];
    for (text, want) in cases {
        let mut docs = documents::<PolicyDocument>(text);
        let (_, document) = docs.remove(0);
        let error = document.expect_err(text);
        assert_eq!(error.to_string(), want, "{text}");
    }
    // The same holds for any document read through the YAML reader (manifests too).
    let mut docs = documents::<serde_json::Value>(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: !pod {containers: [{name: a, image: x}]}\n",
    );
    let (_, document) = docs.remove(0);
    assert_eq!(
        document.unwrap_err().to_string(),
        "/spec: custom YAML tags are not accepted (found !pod)"
    );
}

#[test]
fn core_schema_tags_are_accepted() {
    let text = "apiVersion: !!str palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: !!map {name: p, boundary: shop, labels: {version: !!str 1}}\nspec: {rules: !!seq [{disallowLatestTag: {}}]}\n";
    assert_eq!(outcome(text), Ok(()));
}
