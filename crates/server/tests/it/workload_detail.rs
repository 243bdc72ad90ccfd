//! `GET /v1/boundaries/{b}/resources/{type}/{name}/workload`: which objects the application
//! asks the cluster adapter about (the Deployment, the build Job, the selector, the namespace),
//! what it answers, and the 404s and 503 a user gets instead, each naming what is wrong. The
//! live read itself is proven on a real control plane (reconciler e2e, platform workloads).

use std::sync::{Arc, Mutex};

use crate::common::{fake, FakeClusters, TestApp, KUBECONFIG};
use axum::http::{Method, StatusCode};
use palisade_api_types::view::{DeploymentState, PodState, WorkloadDetail};
use palisade_app::ports::{ClusterError, WorkloadTarget};
use serde_json::json;

/// Records what it is asked; answers one running pod, or fails when `down`.
#[derive(Debug, Default)]
struct Recording {
    asked: Mutex<Vec<WorkloadTarget>>,
    down: bool,
}

impl FakeClusters for Recording {
    fn workload_detail(&self, target: &WorkloadTarget) -> Result<WorkloadDetail, ClusterError> {
        self.asked.lock().unwrap().push(target.clone());
        if self.down {
            return Err(ClusterError::Failed("connection refused".into()));
        }
        Ok(WorkloadDetail {
            deployment: Some(DeploymentState {
                name: target.deployment.clone(),
                desired: 1,
                ready: 1,
                available: 1,
                updated: 1,
            }),
            pods: vec![PodState {
                name: format!("{}-1", target.deployment),
                phase: "Running".into(),
                ready: true,
                restarts: 0,
                node: Some("kwok-node-0".into()),
            }],
            ..WorkloadDetail::default()
        })
    }
}

async fn placed(adapter: Arc<Recording>) -> TestApp {
    let app = TestApp::sqlite_with_clusters(fake(adapter)).await;
    app.boundary("shop").await;
    app.boundary("other").await;
    for (method, path, body) in [
        (
            Method::PUT,
            "/v1/clusters/c1",
            Some(json!({ "kubeconfig": KUBECONFIG })),
        ),
        (Method::PUT, "/v1/boundaries/shop/clusters/c1", None),
        (
            Method::PUT,
            "/v1/boundaries/shop/clusters/c1/namespaces/web",
            None,
        ),
    ] {
        let answer = app.admin(method, path, body).await;
        assert!(answer.status.is_success(), "{path}: {answer:?}");
    }
    for body in [
        json!({"type": "app", "name": "web", "plan": "small", "image": "ghcr.io/acme/web:1.4"}),
        json!({"type": "app", "name": "site", "plan": "small", "source": "https://git.example.com/acme/site.git"}),
        json!({"type": "valkey", "name": "cache", "plan": "small"}),
    ] {
        let answer = app.admin_create(body).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    app
}

const WEB: &str = "/v1/boundaries/shop/resources/app/web/workload";

#[tokio::test]
async fn a_developer_reads_the_workload_of_a_resource_of_their_boundary() {
    let adapter = Arc::new(Recording::default());
    let app = placed(adapter.clone()).await;
    let developer = app.token("developer", Some("shop")).await;
    let answer = app.get(WEB, &developer).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"cluster": "c1", "namespace": "web",
               "deployment": {"name": "app-web", "desired": 1, "ready": 1, "available": 1, "updated": 1},
               "pods": [{"name": "app-web-1", "phase": "Running", "ready": true, "restarts": 0, "node": "kwok-node-0"}],
               "events": []})
    );
    // A built app: its build Job is asked about too.
    let answer = app
        .get(
            "/v1/boundaries/shop/resources/app/site/workload",
            &developer,
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let asked = adapter.asked.lock().unwrap().clone();
    assert_eq!(asked[0].namespace, "web");
    assert_eq!(asked[0].deployment, "app-web");
    assert_eq!(asked[0].build_job, None);
    assert_eq!(
        asked[0].selector,
        "palisade.dev/resource-type=app,palisade.dev/resource=web"
    );
    assert_eq!(asked[1].deployment, "app-site");
    assert!(
        asked[1]
            .build_job
            .as_deref()
            .is_some_and(|job| job.starts_with("app-site-")),
        "{asked:?}"
    );
}

#[tokio::test]
async fn what_has_no_workload_or_is_not_reachable_says_why() {
    let adapter = Arc::new(Recording::default());
    let app = placed(adapter.clone()).await;
    let cases = [
        (
            "/v1/boundaries/shop/resources/valkey/cache/workload",
            "valkey 'cache' runs no workload in a cluster (databases, caches and vector stores are managed services)",
        ),
        (
            "/v1/boundaries/shop/resources/app/nope/workload",
            "app 'nope' not found in boundary 'shop'",
        ),
    ];
    for (path, message) in cases {
        let answer = app.admin_get(path).await;
        answer.assert_refusal(StatusCode::NOT_FOUND, "not_found", message);
    }
    // Another boundary's developer learns nothing of it, and nothing is read.
    let stranger = app.token("developer", Some("other")).await;
    let answer = app.get(WEB, &stranger).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    assert!(adapter.asked.lock().unwrap().is_empty());

    let down = Arc::new(Recording {
        down: true,
        ..Recording::default()
    });
    let app = placed(down).await;
    let answer = app.admin_get(WEB).await;
    answer.assert_refusal(
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
        "cluster 'c1': connection refused",
    );
}
