//! Preview and report through the HTTP API without clusters (SPEC 4.1; issue: preview and
//! audit): the resources a compute-plan rule would grandfather, with the 422 message a create
//! on that plan would get; what a preview needs (role, a valid spec, a saved version for an
//! empty body); the report of a policy with no cluster in its scope; which denials are new
//! compared with the saved version (clusters read through a test double of the clusters port).
//! The cluster half is proven on real API servers in `crates/reconciler/tests/e2e/{preview,audit}.rs`.

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
                        "loosened": 0, "resources_grandfathered": 1, "clusters_unreadable": 0,
                        "new_objects": 0, "new_workloads": 0, "new_replicas_at_risk": 0},
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

/// A test double of the clusters port: every cluster holds `objects`.
#[derive(Debug)]
struct FixedClusters {
    objects: Vec<serde_json::Value>,
}

#[async_trait::async_trait]
impl palisade_app::ports::Clusters for FixedClusters {
    fn check_kubeconfig(&self, _: &str) -> Result<(), palisade_app::ports::ClusterError> {
        Ok(())
    }
    async fn label_namespace(
        &self,
        _: &str,
        _: &palisade_policy::Name,
        _: &str,
        _: bool,
    ) -> Result<palisade_app::ports::LabelOutcome, palisade_app::ports::ClusterError> {
        Ok(palisade_app::ports::LabelOutcome::Created)
    }
    async fn release_namespace(
        &self,
        _: &str,
        _: &palisade_policy::Name,
        _: &str,
    ) -> Result<(), palisade_app::ports::ClusterError> {
        Ok(())
    }
    async fn remove_installation(
        &self,
        _: &str,
        _: &str,
    ) -> Result<Vec<String>, palisade_app::ports::ClusterError> {
        Ok(Vec::new())
    }
    async fn scan(
        &self,
        _: &str,
        _: &palisade_policy::Name,
        _: u32,
        visit: palisade_app::ports::Visit<'_>,
    ) -> Result<palisade_app::ports::ScanInfo, palisade_app::ports::ClusterError> {
        visit(&self.objects);
        Ok(palisade_app::ports::ScanInfo {
            namespaces: vec!["web".into()],
            listed: self.objects.len() as u64,
            list_time: std::time::Duration::ZERO,
        })
    }
}

fn deployment(
    name: &str,
    replicas: u64,
    image: &str,
    labels: serde_json::Value,
) -> serde_json::Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": "web", "labels": labels.clone(), "uid": name},
        "spec": {"replicas": replicas, "template": {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": name, "image": image}]}}},
        "status": {"replicas": replicas}
    })
}

#[tokio::test]
async fn a_denial_is_new_unless_the_saved_version_denies_its_workload() {
    let mut app = TestApp::sqlite().await;
    let clusters = FixedClusters {
        objects: vec![
            deployment("web", 2, "nginx:latest", json!({"team": "web"})),
            deployment("api", 3, "ghcr.io/acme/api:1.0", json!({})),
        ],
    };
    app.state.app = app
        .state
        .app
        .clone()
        .with_clusters(std::sync::Arc::new(clusters));
    app.router = palisade_server::app(app.state.clone());
    app.boundary("shop").await;
    let store = app.state.store.clone();
    let sealed = app.state.sealing.seal(b"kubeconfig").unwrap();
    store.put_cluster("k1", &sealed).await.unwrap();
    store.attach_cluster("shop", "k1").await.unwrap();
    store.put_namespace("shop", "k1", "web").await.unwrap();
    let path = "/v1/boundaries/shop/policies/strict/preview";
    let no_latest = json!({"rules": [{"disallowLatestTag": {}}]});
    let stricter = json!({"rules": [{"disallowLatestTag": {}},
        {"requiredLabels": {"labels": [{"key": "team"}]}}]});

    // Nothing saved: every denial is new.
    let answer = app.admin(Method::POST, path, Some(no_latest.clone())).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body["summary"],
        json!({"objects": 1, "workloads": 1, "replicas_at_risk": 2, "new_objects": 1,
               "new_workloads": 1, "new_replicas_at_risk": 2, "warned": 0, "loosened": 0,
               "resources_grandfathered": 0, "clusters_unreadable": 0})
    );
    assert_eq!(answer.body["clusters"][0]["denied"][0]["new"], true);

    // Saved: the same version again denies nothing new.
    app.policy("shop", "strict", no_latest).await;
    let answer = app.admin(Method::POST, path, None).await;
    assert_eq!(answer.body["summary"]["objects"], 1, "{answer:?}");
    assert_eq!(answer.body["summary"]["new_objects"], 0, "{answer:?}");
    assert_eq!(
        answer.body["summary"]["new_replicas_at_risk"], 0,
        "{answer:?}"
    );
    assert_eq!(answer.body["clusters"][0]["denied"][0]["new"], false);

    // A required label: api is newly denied; web, denied already, is not.
    let answer = app.admin(Method::POST, path, Some(stricter)).await;
    let denied: Vec<(String, bool)> = answer.body["clusters"][0]["denied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["name"].as_str().unwrap().to_owned(),
                d["new"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        denied,
        [("api".to_owned(), true), ("web".to_owned(), false)],
        "{answer:?}"
    );
    assert_eq!(
        answer.body["summary"],
        json!({"objects": 2, "workloads": 2, "replicas_at_risk": 5, "new_objects": 1,
               "new_workloads": 1, "new_replicas_at_risk": 3, "warned": 0, "loosened": 0,
               "resources_grandfathered": 0, "clusters_unreadable": 0})
    );
}
