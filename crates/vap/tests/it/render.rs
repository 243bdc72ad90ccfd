//! Reviewed snapshots of the rendered objects (SPEC 3.4).

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

/// The shared layout: the installation's one policy and two bindings, and the parameters of
/// one policy in one namespace of its boundary (messages made in Rust, carried as text).
#[test]
fn shared_layout_objects_and_parameters() {
    let objects = palisade_vap::shared_objects("3f2a9c1e");
    assert_eq!(
        objects.policy.metadata.name.as_deref(),
        Some("3f2a9c1e.policies.palisade.dev")
    );
    insta::assert_yaml_snapshot!("shared_policy", objects.policy);
    insta::assert_yaml_snapshot!("shared_enforce_binding", objects.enforce);
    insta::assert_yaml_snapshot!("shared_audit_binding", objects.audit);
    let valid = PolicyDocument::from_json(DOCUMENT.as_bytes())
        .unwrap()
        .validate(&Catalog::builtin())
        .unwrap();
    let parameters =
        palisade_vap::parameters(&valid.boundary, &valid.policy, "3f2a9c1e", "shop-web").unwrap();
    insta::assert_yaml_snapshot!("shared_parameters", parameters);
    // A policy of compute plans only has no parameters.
    let plans_only = r#"{"apiVersion": "palisade.dev/v1", "kind": "BoundaryPolicy",
      "metadata": {"name": "sizes", "boundary": "shop"},
      "spec": {"rules": [{"allowedComputePlans": {"plans": ["small"]}}]}}"#;
    let valid = PolicyDocument::from_json(plans_only.as_bytes())
        .unwrap()
        .validate(&Catalog::builtin())
        .unwrap();
    assert_eq!(
        palisade_vap::parameters(&valid.boundary, &valid.policy, "3f2a9c1e", "shop-web"),
        None
    );
}
