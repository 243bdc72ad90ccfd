//! Preview and report through the HTTP API without clusters (SPEC 4.1; issue: preview and
//! audit): the resources a compute-plan rule would grandfather, with the 422 message a create
//! on that plan would get; what a preview needs (role, a valid spec, a saved version for an
//! empty body); the report of a policy with no cluster in its scope. The cluster half is proven
//! on real API servers in `crates/reconciler/tests/e2e/{preview,audit}.rs`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod common;

use axum::http::{Method, StatusCode};
use common::{plans, TestApp};
use serde_json::json;

const PREVIEW: &str = "/v1/boundaries/shop/policies/size-limits/preview";

#[tokio::test]
async fn a_compute_plan_rule_lists_the_resources_it_would_grandfather() {
    let app = TestApp::sqlite().await;
    app.boundary("shop").await;
    let dev = app.token("developer", Some("shop")).await;
    for (name, plan) in [("big", "large"), ("web", "small")] {
        let answer = app
            .create(
                "shop",
                &dev,
                json!({"type": "app", "name": name, "plan": plan, "image": "ghcr.io/acme/web:1.4"}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    let answer = app
        .admin(Method::POST, PREVIEW, Some(plans(&["small", "medium"])))
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({
            "boundary": "shop", "policy": "size-limits", "mode": "enforce", "saved": false,
            "summary": {"objects": 0, "workloads": 0, "replicas_at_risk": 0, "warned": 0,
                        "loosened": 0, "resources_grandfathered": 1, "clusters_unreadable": 0},
            "clusters": [],
            "grandfathered": [{"type": "app", "name": "big", "plans": ["large"],
                "message": "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium."}],
        })
    );
    // Nothing was saved; audit mode grandfathers nothing.
    let got = app
        .admin(
            Method::GET,
            "/v1/boundaries/shop/policies/size-limits",
            None,
        )
        .await;
    assert_eq!(got.status, StatusCode::NOT_FOUND);
    let mut audit = plans(&["small"]);
    audit["mode"] = json!("audit");
    let answer = app.admin(Method::POST, PREVIEW, Some(audit)).await;
    assert_eq!(
        answer.body["summary"]["resources_grandfathered"], 0,
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_preview_needs_an_editor_a_valid_spec_and_a_saved_version_for_an_empty_body() {
    let app = TestApp::sqlite().await;
    app.boundary("shop").await;
    let answer = app.admin(Method::POST, PREVIEW, None).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    assert_eq!(
        answer.message(),
        "policy 'size-limits' not found in boundary 'shop'"
    );
    let answer = app
        .admin(
            Method::POST,
            PREVIEW,
            Some(json!({"rules": [{"allowedRegistries": {"registries": []}}]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST);
    assert!(
        answer
            .message()
            .starts_with("/rules/0/allowedRegistries/registries: "),
        "{answer:?}"
    );
    let dev = app.token("developer", Some("shop")).await;
    let answer = app
        .call(Method::POST, PREVIEW, Some(&dev), Some(plans(&["small"])))
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    // The saved version, previewed with an empty body.
    app.policy("shop", "size-limits", plans(&["small"])).await;
    let answer = app.admin(Method::POST, PREVIEW, None).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["saved"], true);
}

#[tokio::test]
async fn a_report_lists_the_clusters_in_scope_and_is_readable_by_developers() {
    let app = TestApp::sqlite().await;
    app.boundary("shop").await;
    let dev = app.token("developer", Some("shop")).await;
    let report = "/v1/boundaries/shop/policies/no-latest/report";
    let answer = app.call(Method::GET, report, Some(&dev), None).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    app.policy(
        "shop",
        "no-latest",
        json!({"rules": [{"disallowLatestTag": {}}]}),
    )
    .await;
    let answer = app.call(Method::GET, report, Some(&dev), None).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"boundary": "shop", "policy": "no-latest", "mode": "enforce", "clusters": []})
    );
}
