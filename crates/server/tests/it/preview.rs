//! Preview and report through the HTTP API without clusters (SPEC 4.1; issue: preview and
//! audit): the resources a compute-plan rule would grandfather, with the 422 message a create
//! on that plan would get; what a preview needs (role, a valid spec, a saved version for an
//! empty body); the report of a policy with no cluster in its scope; which denials are new
//! compared with the saved version (clusters read through a test double of the clusters port);
//! the preview paged like a list over clusters an adapter in the test holds.
//! The cluster half is proven on real API servers in `crates/reconciler/tests/e2e/{preview,audit}.rs`.

use crate::common::{
    audit_plans, fake, page_path, plans, shop, Answer, FakeClusters, TestApp, KUBECONFIG,
};
use axum::http::{Method, StatusCode};
use palisade_app::ports::{ClusterError, ScanInfo, Visit};
use serde_json::{json, Value};

const PREVIEW: &str = "/v1/boundaries/shop/policies/size-limits/preview";

#[tokio::test]
async fn a_compute_plan_rule_lists_the_resources_it_would_grandfather() {
    let app = shop().await;
    let dev = app.token("developer", Some("shop")).await;
    for (name, plan) in [("big", "large"), ("web", "small")] {
        let wanted =
            json!({"type": "app", "name": name, "plan": plan, "image": "ghcr.io/acme/web:1.4"});
        let answer = app.create("shop", &dev, wanted).await;
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
        .admin_get("/v1/boundaries/shop/policies/size-limits")
        .await;
    assert_eq!(got.status, StatusCode::NOT_FOUND);
    let answer = preview(&app, PREVIEW, &audit_plans(&["small"])).await;
    assert_eq!(
        answer.body["summary"]["resources_grandfathered"], 0,
        "{answer:?}"
    );
}

#[tokio::test]
async fn a_preview_needs_an_editor_a_valid_spec_and_a_saved_version_for_an_empty_body() {
    let app = shop().await;
    let answer = app.admin(Method::POST, PREVIEW, None).await;
    answer.assert_error(
        StatusCode::NOT_FOUND,
        "policy 'size-limits' not found in boundary 'shop'",
    );
    let answer = app
        .admin(
            Method::POST,
            PREVIEW,
            Some(json!({"rules": [{"allowedRegistries": {"registries": []}}]})),
        )
        .await;
    answer.assert_error_starts(
        StatusCode::BAD_REQUEST,
        "/rules/0/allowedRegistries/registries: ",
    );
    let dev = app.token("developer", Some("shop")).await;
    let answer = app.post(PREVIEW, &dev, plans(&["small"])).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    // The saved version, previewed with an empty body.
    app.policy("shop", "size-limits", plans(&["small"])).await;
    let answer = app.admin(Method::POST, PREVIEW, None).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["saved"], true);
}

#[tokio::test]
async fn a_report_lists_the_clusters_in_scope_and_is_readable_by_developers() {
    let app = shop().await;
    let dev = app.token("developer", Some("shop")).await;
    let report = "/v1/boundaries/shop/policies/no-latest/report";
    let answer = app.get(report, &dev).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    app.policy(
        "shop",
        "no-latest",
        json!({"rules": [{"disallowLatestTag": {}}]}),
    )
    .await;
    let answer = app.get(report, &dev).await;
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

impl FakeClusters for FixedClusters {
    fn scan(&self, _: u32, visit: Visit<'_>) -> Result<ScanInfo, ClusterError> {
        visit(&self.objects);
        Ok(ScanInfo {
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
        .with_clusters(fake(std::sync::Arc::new(clusters)));
    app.router = palisade_server::app(app.state.clone());
    app.boundary("shop").await;
    let store = app.store.clone();
    let sealed = app.state.sealing.seal(b"kubeconfig").unwrap();
    store.put_cluster("k1", &sealed, None).await.unwrap();
    store.attach_cluster("shop", "k1").await.unwrap();
    store
        .put_namespace("shop", "k1", "web", None)
        .await
        .unwrap();
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

/// A cluster adapter whose every cluster holds the same Pods in namespace `ns`: `latest` Pods
/// labelled `team` whose image is tagged `latest`, and `unlabelled` Pods of a pinned image.
#[derive(Debug)]
struct Pods {
    latest: usize,
    unlabelled: usize,
}

impl FakeClusters for Pods {
    fn scan(&self, page_size: u32, visit: Visit<'_>) -> Result<ScanInfo, ClusterError> {
        let pod = |name: String, labels: Value, image: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "ns", "labels": labels},
                "spec": {"containers": [{"name": "c", "image": image}]}})
        };
        // Listed in reverse name order: the preview orders its findings itself.
        let objects: Vec<Value> = (0..self.latest)
            .rev()
            .map(|i| {
                pod(
                    format!("web-{i:03}"),
                    json!({"team": "a"}),
                    "ghcr.io/acme/web:latest",
                )
            })
            .chain(
                (0..self.unlabelled)
                    .map(|i| pod(format!("job-{i}"), json!({}), "ghcr.io/acme/job:1.0")),
            )
            .collect();
        for page in objects.chunks(page_size as usize) {
            visit(page);
        }
        Ok(ScanInfo {
            namespaces: vec!["ns".into()],
            listed: objects.len() as u64,
            list_time: std::time::Duration::ZERO,
        })
    }
}

/// An app with the boundary `shop`, whose every cluster holds `Pods { latest, unlabelled }`.
async fn shop_of_pods(latest: usize, unlabelled: usize) -> TestApp {
    let pods = Pods { latest, unlabelled };
    let app = TestApp::sqlite_with_clusters(fake(std::sync::Arc::new(pods))).await;
    app.boundary("shop").await;
    app
}

/// Every finding of a preview body, by list (`denied of c1`, ..., `grandfathered`).
/// The admin's preview of `spec` at `path` (`PREVIEW`, with a query or without).
async fn preview(app: &TestApp, path: &str, spec: &Value) -> Answer {
    app.admin(Method::POST, path, Some(spec.clone())).await
}

fn findings(body: &Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for cluster in body["clusters"].as_array().unwrap() {
        for list in ["denied", "warned", "loosened"] {
            for finding in cluster[list].as_array().unwrap() {
                out.push((format!("{list} of {}", cluster["cluster"]), finding.clone()));
            }
        }
    }
    for resource in body["grandfathered"].as_array().unwrap() {
        out.push(("grandfathered".to_owned(), resource.clone()));
    }
    out
}

/// A preview's clusters without their findings: what every page repeats whole.
fn clusters_without_findings(body: &Value) -> Value {
    let mut clusters = body["clusters"].clone();
    for cluster in clusters.as_array_mut().unwrap() {
        for list in ["denied", "warned", "loosened", "list_ms", "evaluate_ms"] {
            cluster.as_object_mut().unwrap().remove(list);
        }
    }
    clusters
}

#[tokio::test]
async fn a_preview_pages_its_findings_like_a_list() {
    let app = shop_of_pods(60, 5).await;
    for cluster in ["c1", "c2"] {
        let answer = app.put_cluster(cluster, KUBECONFIG).await;
        assert!(answer.status.is_success(), "{answer:?}");
        let answer = app.attach("shop", cluster).await;
        assert!(answer.status.is_success(), "{answer:?}");
    }
    for name in ["db1", "db2", "db3"] {
        let wanted = json!({"type": "postgresql", "name": name, "plan": "large"});
        let answer = app.admin_create(wanted).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    // Saved: every Pod needs a team label (the unlabelled ones are denied today).
    app.policy(
        "shop",
        "size-limits",
        json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}]}),
    )
    .await;
    let enforce = json!({"rules": [{"disallowLatestTag": {}},
        {"allowedComputePlans": {"plans": ["small"]}}]});
    let audit = json!({"mode": "audit", "rules": [{"disallowLatestTag": {}}]});
    for (spec, total) in [(enforce, 120 + 10 + 3), (audit, 120 + 10)] {
        let whole = preview(&app, &format!("{PREVIEW}?limit=1000"), &spec).await;
        assert_eq!(whole.status, StatusCode::OK, "{whole:?}");
        assert!(
            whole.body.get("continue").is_none(),
            "{:?}",
            whole.body["summary"]
        );
        let all = findings(&whole.body);
        assert_eq!(all.len(), total, "{:?}", whole.body["summary"]);
        // Without a limit: the lists' default of 100.
        let first = preview(&app, PREVIEW, &spec).await;
        assert_eq!(findings(&first.body).len(), 100);
        assert!(
            first.body["continue"].is_string(),
            "{:?}",
            first.body["summary"]
        );
        // Pages of 25, in order: each with the whole summary and every cluster.
        let mut paged = Vec::new();
        let mut next: Option<String> = None;
        let mut pages = 0;
        loop {
            let page = preview(&app, &page_path(PREVIEW, 25, next.as_deref()), &spec).await;
            assert_eq!(page.status, StatusCode::OK, "{page:?}");
            pages += 1;
            assert_eq!(page.body["summary"], whole.body["summary"], "page {pages}");
            assert_eq!(
                clusters_without_findings(&page.body),
                clusters_without_findings(&whole.body),
                "page {pages}"
            );
            let items = findings(&page.body);
            match page.body["continue"].as_str() {
                Some(token) => {
                    assert_eq!(items.len(), 25, "page {pages}");
                    next = Some(token.to_owned());
                    paged.extend(items);
                }
                None => {
                    assert_eq!(items.len(), total - 25 * (pages - 1), "last page");
                    paged.extend(items);
                    break;
                }
            }
        }
        assert_eq!(pages, total.div_ceil(25));
        assert_eq!(
            paged, all,
            "the pages hold the whole preview, once, in order"
        );
    }
    // A continue it did not issue, or another list's, is refused before anything is read.
    let policies = app.admin_get("/v1/boundaries/shop/policies?limit=1").await;
    assert!(policies.body.get("continue").is_none());
    let tokens_list = app.admin_get("/v1/tokens").await;
    assert_eq!(tokens_list.status, StatusCode::OK);
    let no_latest = json!({"rules": [{"disallowLatestTag": {}}]});
    for token in ["not-a-key", "0", "c1"] {
        let answer = preview(&app, &format!("{PREVIEW}?continue={token}"), &no_latest).await;
        answer.assert_error(
            StatusCode::BAD_REQUEST,
            "/continue: is not a continue token of this list",
        );
    }
    let answer = preview(&app, &format!("{PREVIEW}?limit=0"), &no_latest).await;
    assert_eq!(answer.message(), "/limit: must be from 1 to 1000, got 0");
}

/// Pages that start and end among the grandfathered resources (issue 42, item 8: a page reads
/// only the resources it shows): with every small limit, the pages hold the whole preview,
/// once, in order, after the clusters' findings, with the whole summary on each.
#[tokio::test]
async fn a_preview_pages_its_grandfathered_resources_from_any_place() {
    let app = shop_of_pods(3, 0).await;
    let answer = app.put_cluster("c1", KUBECONFIG).await;
    assert!(answer.status.is_success(), "{answer:?}");
    let answer = app.attach("shop", "c1").await;
    assert!(answer.status.is_success(), "{answer:?}");
    let image = "ghcr.io/acme/w:1";
    let mut bodies = Vec::new();
    for i in 0..7 {
        let plan = if i == 3 { "small" } else { "large" };
        bodies
            .push(json!({"type": "app", "name": format!("app-{i}"), "plan": plan, "image": image}));
    }
    for (i, plans) in [
        ["large", "small"],
        ["small", "small"],
        ["small", "large"],
        ["medium", "small"],
        ["large", "large"],
    ]
    .iter()
    .enumerate()
    {
        let components: Vec<Value> = plans
            .iter()
            .enumerate()
            .map(|(c, plan)| json!({"name": format!("c{c}"), "plan": plan, "image": image}))
            .collect();
        bodies.push(
            json!({"type": "container_instance", "name": format!("ci-{i}"),
            "components": components}),
        );
    }
    for (i, plan) in ["large", "small", "xlarge", "large"].iter().enumerate() {
        bodies.push(json!({"type": "postgresql", "name": format!("db-{i}"), "plan": plan}));
    }
    for (i, plan) in ["large", "medium"].iter().enumerate() {
        bodies.push(json!({"type": "valkey", "name": format!("kv-{i}"), "plan": plan}));
    }
    for body in bodies {
        let answer = app.admin_create(body).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    let spec = json!({"rules": [{"disallowLatestTag": {}},
        {"allowedComputePlans": {"plans": ["small", "medium"]}}]});
    let whole = preview(&app, &format!("{PREVIEW}?limit=1000"), &spec).await;
    assert_eq!(whole.status, StatusCode::OK, "{whole:?}");
    let listed: Vec<String> = whole.body["grandfathered"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{}/{} {}", r["type"], r["name"], r["plans"]))
        .collect();
    assert_eq!(
        listed,
        [
            r#""app"/"app-0" ["large"]"#,
            r#""app"/"app-1" ["large"]"#,
            r#""app"/"app-2" ["large"]"#,
            r#""app"/"app-4" ["large"]"#,
            r#""app"/"app-5" ["large"]"#,
            r#""app"/"app-6" ["large"]"#,
            r#""container_instance"/"ci-0" ["large"]"#,
            r#""container_instance"/"ci-2" ["large"]"#,
            r#""container_instance"/"ci-4" ["large","large"]"#,
            r#""postgresql"/"db-0" ["large"]"#,
            r#""postgresql"/"db-2" ["xlarge"]"#,
            r#""postgresql"/"db-3" ["large"]"#,
            r#""valkey"/"kv-0" ["large"]"#,
        ]
    );
    assert_eq!(whole.body["summary"]["resources_grandfathered"], 13);
    let all = findings(&whole.body);
    assert_eq!(all.len(), 3 + 13);
    for limit in 1..=7 {
        let mut paged = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let path = page_path(PREVIEW, limit, next.as_deref());
            let page = preview(&app, &path, &spec).await;
            assert_eq!(page.status, StatusCode::OK, "{page:?}");
            assert_eq!(page.body["summary"], whole.body["summary"], "limit {limit}");
            let items = findings(&page.body);
            assert!(items.len() <= limit, "limit {limit}");
            paged.extend(items);
            match page.body["continue"].as_str() {
                Some(token) => next = Some(token.to_owned()),
                None => break,
            }
        }
        assert_eq!(paged, all, "limit {limit}");
    }
}
