//! Compute-plan enforcement through the HTTP API (SPEC 2): exact 422 bodies, component
//! checks, grandfathering, functions, static web apps, the picker and the answer order.

use crate::common::{app_resource, audit_plans, plans, postgresql, shop, Answer, TestApp};
use axum::http::{Method, StatusCode};
use serde_json::json;

#[tokio::test]
async fn create_on_a_disallowed_plan_answers_the_exact_422() {
    let app = shop().await;
    app.policy("shop", "size-limits", plans(&["small", "medium"]))
        .await;
    let dev = app.token("developer", Some("shop")).await;
    let wanted = json!({"type": "app", "name": "web", "plan": "large", "image": "ghcr.io/acme/web:1.4", "labels": {}});
    let answer = app.create("shop", &dev, wanted).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(
        answer.body,
        json!({"error": {"code": "compute_plan_not_allowed",
            "message": "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium.",
            "resource_type": "app", "plan": "large", "component": null,
            "allowed_plans": ["small", "medium"], "denied_by": ["size-limits"]}})
    );
    // Nothing was written.
    let got = app.get("/v1/boundaries/shop/resources/app/web", &dev).await;
    assert_eq!(got.status, StatusCode::NOT_FOUND);
    // An allowed plan is created.
    let wanted =
        json!({"type": "app", "name": "web", "plan": "medium", "image": "ghcr.io/acme/web:1.4"});
    let answer = app.create("shop", &dev, wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["plan"], "medium");
    assert_eq!(answer.body["boundary"], "shop");
    assert!(answer.headers.get("etag").is_some());
}

#[tokio::test]
async fn every_checked_type_is_refused_and_none_allowed_reads_none() {
    let app = shop().await;
    app.policy("shop", "a", plans(&["small", "valkey/medium"]))
        .await;
    app.policy("shop", "b", plans(&["medium", "app/small"]))
        .await;
    // app: a allows small; b allows medium + app/small -> small only.
    let answer = app.admin_create(app_resource("x", "medium")).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer.body["error"]["allowed_plans"], json!(["small"]));
    assert_eq!(answer.body["error"]["denied_by"], json!(["a"]));
    // postgresql: a allows small, b allows medium: nothing.
    let answer = app.admin_create(postgresql("db", "small")).await;
    answer.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "Compute plan 'small' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: none.");
    assert_eq!(answer.body["error"]["denied_by"], json!(["b"]));
    for (ty, plan) in [
        ("sqlserver", "large"),
        ("qdrant", "large"),
        ("valkey", "large"),
    ] {
        let wanted = json!({"type": ty, "name": "r", "plan": plan});
        let answer = app.admin_create(wanted).await;
        assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{ty}");
        assert_eq!(answer.body["error"]["resource_type"], ty);
    }
}

#[tokio::test]
async fn container_instance_components_are_checked_in_request_order() {
    let app = shop().await;
    app.policy("shop", "size-limits", plans(&["small"])).await;
    let wanted = json!({"type": "container_instance", "name": "batch", "components": [
            {"name": "worker", "plan": "small", "image": "a"},
            {"name": "cruncher", "plan": "large", "image": "b"},
            {"name": "other", "plan": "xlarge", "image": "c"}]});
    let answer = app.admin_create(wanted).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer.body["error"]["component"], "cruncher");
    assert_eq!(answer.body["error"]["plan"], "large");
    assert_eq!(answer.body["error"]["resource_type"], "container_instance");

    let wanted = json!({"type": "container_instance", "name": "batch", "components": [
            {"name": "worker", "plan": "small", "image": "a"}]});

    let answer = app.admin_create(wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    let path = "/v1/boundaries/shop/resources/container_instance/batch";
    // A renamed component is a create of that component: checked.
    let answer = app
        .admin(
            Method::PATCH,
            path,
            Some(json!({"components": [{"name": "renamed", "plan": "medium", "image": "a"}]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer.body["error"]["component"], "renamed");
    // Adding a component on an allowed plan, keeping the first, succeeds.
    let answer = app
        .admin(
            Method::PATCH,
            path,
            Some(json!({"components": [
            {"name": "worker", "plan": "small", "image": "a2"},
            {"name": "helper", "plan": "small", "image": "h"}]})),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["components"][1]["name"], "helper");
}

#[tokio::test]
async fn grandfathered_resources_keep_their_plan_and_accept_other_changes() {
    let app = shop().await;
    let wanted = json!({"type": "app", "name": "legacy", "plan": "large", "image": "ghcr.io/acme/r:1", "labels": {"team": "a"}});
    let created = app.admin_create(wanted).await;
    assert_eq!(created.status, StatusCode::CREATED);
    app.policy("shop", "size-limits", plans(&["small", "medium"]))
        .await;
    let path = "/v1/boundaries/shop/resources/app/legacy";
    // Image and labels change: no plan move, succeeds.
    let answer = app
        .send_body(
            Method::PATCH,
            path,
            &app.admin,
            r#"{"image": "ghcr.io/acme/r:2", "labels": {"team": "b"}}"#,
            "application/merge-patch+json",
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["image"], "ghcr.io/acme/r:2");
    assert_eq!(answer.body["plan"], "large");
    // Patching the same plan again is not a move.
    let answer = app
        .admin(Method::PATCH, path, Some(json!({"plan": "large"})))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    // Moving to another disallowed plan is refused.
    let answer = app
        .admin(Method::PATCH, path, Some(json!({"plan": "xlarge"})))
        .await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(answer.body["error"]["plan"], "xlarge");
    // The grandfathered list names it with the denying policy.
    let list = app
        .admin_get("/v1/boundaries/shop/resources?grandfathered=true")
        .await;
    assert_eq!(list.status, StatusCode::OK);
    let items = list.body["items"].as_array().unwrap();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["name"], "legacy");
    assert_eq!(items[0]["denied_by"], json!(["size-limits"]));
    // Moving to an allowed plan succeeds, and it is no longer grandfathered.
    let answer = app
        .admin(Method::PATCH, path, Some(json!({"plan": "small"})))
        .await;
    assert_eq!(answer.status, StatusCode::OK);
    let list = app
        .admin_get("/v1/boundaries/shop/resources?grandfathered=true")
        .await;
    assert_eq!(list.body["items"], json!([]));
}

#[tokio::test]
async fn functions_are_never_refused_but_carry_a_warning() {
    let app = shop().await;
    app.policy("shop", "size-limits", plans(&["small"])).await;
    let wanted = json!({"type": "function", "name": "f", "plan": "xlarge", "source": "https://git.example/f.git"});
    let answer = app.admin_create(wanted).await;
    answer.assert_created_warnings(&[
        r#"299 palisade "Compute plan 'xlarge' is disallowed by boundary policy 'size-limits'; plans of functions are not enforced""#,
    ]);
    let picker = app
        .admin_get("/v1/boundaries/shop/plans?type=function")
        .await;
    assert_eq!(picker.body["enforced"], false);
    assert_eq!(
        picker.body["plans"][3]["reason"],
        "Disallowed by boundary policy 'size-limits'"
    );
    // An allowed plan: no warning.
    let wanted =
        json!({"type": "function", "name": "g", "plan": "small", "image": "ghcr.io/acme/g:1"});
    let answer = app.admin_create(wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    assert!(answer.warnings().is_empty());
}

#[tokio::test]
async fn static_web_apps_take_no_plan_and_unknown_plans_list_the_catalog() {
    let app = shop().await;
    let wanted = json!({"type": "static_web_app", "name": "docs", "plan": "small"});
    let answer = app.admin_create(wanted).await;
    answer.assert_error(
        StatusCode::BAD_REQUEST,
        "/plan: static web apps take no plan",
    );
    let wanted = json!({"type": "valkey", "name": "c", "plan": "huge"});
    let answer = app.admin_create(wanted).await;
    answer.assert_error(
        StatusCode::BAD_REQUEST,
        "/plan: plan 'huge' is not in the catalog of valkey; its plans are small, medium, large",
    );
    let wanted =
        json!({"type": "static_web_app", "name": "docs", "source": "https://git.example/d.git"});
    let answer = app.admin_create(wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED);
}

#[tokio::test]
async fn picker_lists_catalog_order_with_reasons_and_audit_warnings() {
    let app = shop().await;
    app.policy("shop", "b-limits", plans(&["small", "medium"]))
        .await;
    app.policy("shop", "a-limits", plans(&["small"])).await;
    app.policy("shop", "watch", json!({"mode": "audit", "rules": [{"allowedComputePlans": {"plans": ["small", "medium", "large"]}}]})).await;
    let picker = app.admin_get("/v1/boundaries/shop/plans?type=app").await;
    assert_eq!(picker.status, StatusCode::OK);
    assert_eq!(
        picker.body,
        json!({"type": "app", "enforced": true, "plans": [
            {"name": "small", "cpu": 0.5, "memory": "1 GiB", "allowed": true},
            {"name": "medium", "cpu": 1.0, "memory": "2 GiB", "allowed": false, "reason": "Disallowed by boundary policy 'a-limits'"},
            {"name": "large", "cpu": 2.0, "memory": "4 GiB", "allowed": false, "reason": "Disallowed by boundary policies 'a-limits', 'b-limits'"},
            {"name": "xlarge", "cpu": 4.0, "memory": "8 GiB", "allowed": false, "reason": "Disallowed by boundary policies 'a-limits', 'b-limits'", "audit_warning": "Would be disallowed by audit policy 'watch'"}
        ]})
    );
    let answer = app.admin_get("/v1/boundaries/shop/plans?type=nope").await;
    answer.assert_error_starts(
        StatusCode::BAD_REQUEST,
        "/type: unknown resource type 'nope'",
    );
}

#[tokio::test]
async fn audit_policies_warn_and_never_deny() {
    let app = shop().await;
    app.policy("shop", "watch", audit_plans(&["small"])).await;
    let answer = app.admin_create(app_resource("w", "large")).await;
    answer.assert_created_warnings(&[
        r#"299 palisade "Policy 'watch' (audit) would deny: Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small.""#,
    ]);
}

#[tokio::test]
async fn answers_come_in_the_documented_order() {
    let app = shop().await;
    app.boundary("other").await;
    app.policy("shop", "size-limits", plans(&["small"])).await;
    let dev = app.token("developer", Some("shop")).await;
    let bad_plan = app_resource("web", "large");
    // 401 before anything.
    let answer = app
        .call(
            Method::POST,
            "/v1/boundaries/nope/resources",
            None,
            Some(json!("junk")),
        )
        .await;
    assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
    // 404 for an unknown boundary or another's, before the body is read.
    let wanted = json!("junk");
    let answer = app.create("nope", &dev, wanted).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    let answer = app.create("other", &dev, bad_plan.clone()).await;
    answer.assert_error(StatusCode::NOT_FOUND, "boundary 'other' not found");
    // 400 before 409 and 422.
    let answer = app.create("shop", &dev, app_resource("Web", "large")).await;
    answer.assert_error_starts(StatusCode::BAD_REQUEST, "/name: ");
    // 409 before 422.
    let ok = app.create("shop", &dev, app_resource("web", "small")).await;
    assert_eq!(ok.status, StatusCode::CREATED);
    let answer = app.create("shop", &dev, bad_plan).await;
    answer.assert_error(
        StatusCode::CONFLICT,
        "app 'web' already exists in boundary 'shop'",
    );
}

/// PATCHes the resource at `path` to the plan medium, as admin, under the etag `if_match`.
async fn move_to_medium(app: &TestApp, path: &str, if_match: &str) -> Answer {
    let headers = [("if-match", if_match)];
    let (body, media) = (r#"{"plan": "medium"}"#, "application/merge-patch+json");
    app.raw(
        Method::PATCH,
        path,
        Some(&app.admin),
        Some(body),
        Some(media),
        &headers,
    )
    .await
}

#[tokio::test]
async fn if_match_guards_updates_and_deletes() {
    let app = shop().await;
    let wanted = json!({"type": "valkey", "name": "c", "plan": "small"});
    let created = app.admin_create(wanted).await;
    let etag = created.body["etag"].as_str().unwrap().to_owned();
    let path = "/v1/boundaries/shop/resources/valkey/c";
    let stale = move_to_medium(&app, path, "\"0000\"").await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED);
    assert_eq!(stale.code(), "precondition_failed");
    let fresh = move_to_medium(&app, path, &format!("\"{etag}\"")).await;
    assert_eq!(fresh.status, StatusCode::OK);
    let answer = app
        .raw(
            Method::DELETE,
            path,
            Some(&app.admin),
            None,
            None,
            &[("if-match", &format!("\"{etag}\""))],
        )
        .await;
    assert_eq!(answer.status, StatusCode::PRECONDITION_FAILED);
    let answer = app.admin(Method::DELETE, path, None).await;
    assert_eq!(answer.status, StatusCode::NO_CONTENT);
}

/// The grandfathered list pages like the resource list, whatever the page's size or type, and
/// names each resource's denying policies (a function's plan is never checked, so a function
/// is never grandfathered); a token of the whole list continues a list of one type.
#[tokio::test]
async fn grandfathered_resources_page_like_the_resource_list() {
    let app = shop().await;
    let image = "ghcr.io/acme/w:1";
    let mut bodies = Vec::new();
    for (i, plan) in ["large", "small", "xlarge", "large"].iter().enumerate() {
        bodies
            .push(json!({"type": "app", "name": format!("app-{i}"), "plan": plan, "image": image}));
        bodies.push(json!({"type": "postgresql", "name": format!("db-{i}"), "plan": plan}));
        bodies.push(
            json!({"type": "container_instance", "name": format!("ci-{i}"),
            "components": [{"name": "a", "plan": "small", "image": image},
                           {"name": "b", "plan": plan, "image": image}]}),
        );
    }
    bodies.push(json!({"type": "function", "name": "hook", "plan": "large", "image": image}));
    for body in bodies {
        let answer = app.admin_create(body).await;
        assert!(answer.status.is_success(), "{answer:?}");
    }
    app.policy("shop", "size-limits", plans(&["small", "medium"]))
        .await;
    app.policy("shop", "tiny", plans(&["small", "medium", "large"]))
        .await;
    let read = |query: String| {
        let app = &app;
        async move {
            let mut names = Vec::new();
            let mut next: Option<String> = None;
            loop {
                let path = match &next {
                    None => format!("/v1/boundaries/shop/resources?grandfathered=true&{query}"),
                    Some(token) => format!(
                        "/v1/boundaries/shop/resources?grandfathered=true&{query}&continue={token}"
                    ),
                };
                let page = app.admin_get(&path).await;
                assert_eq!(page.status, StatusCode::OK, "{page:?}");
                for item in page.body["items"].as_array().unwrap() {
                    names.push(format!(
                        "{}/{} {}",
                        item["type"], item["name"], item["denied_by"]
                    ));
                }
                match page.body["continue"].as_str() {
                    Some(token) => next = Some(token.to_owned()),
                    None => return names,
                }
            }
        }
    };
    let all = [
        r#""app"/"app-0" ["size-limits"]"#,
        r#""app"/"app-2" ["size-limits","tiny"]"#,
        r#""app"/"app-3" ["size-limits"]"#,
        r#""container_instance"/"ci-0" ["size-limits"]"#,
        r#""container_instance"/"ci-2" ["size-limits","tiny"]"#,
        r#""container_instance"/"ci-3" ["size-limits"]"#,
        r#""postgresql"/"db-0" ["size-limits"]"#,
        r#""postgresql"/"db-2" ["size-limits","tiny"]"#,
        r#""postgresql"/"db-3" ["size-limits"]"#,
    ];
    for limit in 1..=4 {
        assert_eq!(read(format!("limit={limit}")).await, all, "limit {limit}");
        assert_eq!(
            read(format!("limit={limit}&type=container_instance")).await,
            all[3..6],
            "limit {limit}"
        );
    }
    // After the second app (a token of the whole list), the containers of a list of one type.
    let first = app
        .admin_get("/v1/boundaries/shop/resources?grandfathered=true&limit=2")
        .await;
    let token = first.body["continue"].as_str().unwrap();
    let of_type = app
        .admin_get(&format!(
                "/v1/boundaries/shop/resources?grandfathered=true&type=container_instance&continue={token}"
            ))
        .await;
    assert_eq!(of_type.items("name"), ["ci-0", "ci-2", "ci-3"]);
}
