//! Reviewed snapshots of the rendered objects (SPEC 3.4).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use palisade_api_types::PolicyDocument;
use palisade_policy::{Catalog, Name};
use palisade_vap::render;

const DOCUMENT: &str = r#"{
  "apiVersion": "palisade.dev/v1", "kind": "BoundaryPolicy",
  "metadata": {"name": "size-limits", "boundary": "shop"},
  "spec": {"rules": [
    {"allowedComputePlans": {"plans": ["small", "medium", "valkey/small"]}},
    {"requiredLabels": {"labels": [{"key": "team", "value": "web"}, {"key": "owner"}]}},
    {"allowedRegistries": {"registries": ["ghcr.io/acme", "docker.io/library/"]}},
    {"disallowLatestTag": {}}
  ]}
}"#;

fn rendered(document: &str) -> palisade_vap::Rendered {
    let valid = PolicyDocument::from_json(document.as_bytes())
        .unwrap()
        .validate(&Catalog::builtin())
        .unwrap();
    render(&valid.boundary, &valid.policy, "3f2a9c1e").unwrap()
}

#[test]
fn enforce_mode_policy_and_binding() {
    let objects = rendered(DOCUMENT);
    assert_eq!(
        objects.policy.metadata.name.as_deref(),
        Some("size-limits.shop.palisade.dev")
    );
    insta::assert_yaml_snapshot!("policy", objects.policy);
    insta::assert_yaml_snapshot!("binding", objects.binding);
}

#[test]
fn audit_mode_warns_and_audits() {
    let audit = DOCUMENT.replace(
        r#""spec": {"rules""#,
        r#""spec": {"mode": "audit", "rules""#,
    );
    let objects = rendered(&audit);
    let actions = objects.binding.spec.unwrap().validation_actions.unwrap();
    assert_eq!(actions, ["Warn", "Audit"]);
}

#[test]
fn plan_only_policies_install_nothing() {
    let valid = PolicyDocument::from_json(
        br#"{"apiVersion": "palisade.dev/v1", "kind": "BoundaryPolicy", "metadata": {"name": "p", "boundary": "shop"},
            "spec": {"rules": [{"allowedComputePlans": {"plans": ["small"]}}]}}"#,
    )
    .unwrap()
    .validate(&Catalog::builtin())
    .unwrap();
    assert!(render(&Name::parse("shop").unwrap(), &valid.policy, "x").is_none());
}

#[test]
fn boundary_label_guard_policy_and_binding() {
    let objects =
        palisade_vap::boundary_label_guard("3f2a9c1e", "system:serviceaccount:palisade:palisade");
    assert_eq!(
        objects.policy.metadata.name.as_deref(),
        Some("3f2a9c1e.boundary-label-guard.palisade.dev")
    );
    assert_eq!(
        palisade_vap::guard_message("shop-web"),
        "The label palisade.dev/boundary on namespace 'shop-web' is managed by palisade."
    );
    insta::assert_yaml_snapshot!("guard_policy", objects.policy);
    insta::assert_yaml_snapshot!("guard_binding", objects.binding);
}
