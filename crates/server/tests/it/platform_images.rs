//! A create or update of a workload built by palisade warns about every enforce-mode policy
//! in scope of its cluster that will deny an image palisade itself runs for it: the builder
//! (build Job), the image the build pushes and a static web app's file server (Deployment),
//! each with the message the cluster will give. Images the user names are the user's own
//! business and give no warning.

use crate::common::{shop, TestApp};
use axum::http::StatusCode;
use serde_json::json;

/// A boundary `shop` placed in cluster `c1`, namespace `web`, with `trusted` (registries under
/// ghcr.io/acme, no latest tag), and `scoped`, which applies to another cluster only.
async fn placed() -> TestApp {
    let app = shop().await;
    let store = &app.store;
    store.put_cluster("c1", b"sealed", None).await.unwrap();
    store.attach_cluster("shop", "c1").await.unwrap();
    store
        .put_namespace("shop", "c1", "web", None)
        .await
        .unwrap();
    let answer = app
        .policy(
            "shop",
            "trusted",
            json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}},
                              {"disallowLatestTag": {}}]}),
        )
        .await;
    assert!(answer.status.is_success(), "{:?}", answer.body);
    let answer = app
        .policy(
            "shop",
            "scoped",
            json!({"scope": {"clusters": ["c2"]},
                   "rules": [{"allowedRegistries": {"registries": ["quay.io/none"]}}]}),
        )
        .await;
    assert!(answer.status.is_success(), "{:?}", answer.body);
    app
}

fn denied(object: &str, resource: &str, image: &str) -> String {
    format!(
        "299 palisade \"the {object} palisade runs for {resource} will be denied: Policy 'trusted' (AllowedRegistries) denied image {image}: it is not under ghcr.io/acme.\""
    )
}

#[tokio::test]
async fn builds_warn_about_every_platform_image_a_policy_denies() {
    let app = placed().await;
    let admin = app.admin.clone();

    let wanted = json!({"type": "app", "name": "api", "plan": "small",
                   "source": "https://git.example.com/acme/api.git"});

    let answer = app.create("shop", &admin, wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(
        warnings[0],
        denied(
            "build Job",
            "app/api",
            "ghcr.io/palisade-dev/app-builder:1.0.0"
        )
    );
    assert!(
        warnings[1].starts_with(
            "299 palisade \"the Deployment palisade runs for app/api will be denied: Policy 'trusted' (AllowedRegistries) denied image registry.palisade.internal/builds/shop/app-api:"
        ),
        "{warnings:?}"
    );

    let wanted = json!({"type": "static_web_app", "name": "docs",
                   "source": "https://git.example.com/acme/docs.git"});

    let answer = app.create("shop", &admin, wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert_eq!(
        warnings[0],
        denied(
            "build Job",
            "static_web_app/docs",
            "ghcr.io/palisade-dev/static-web-app-builder:1.0.0"
        )
    );
    assert_eq!(
        warnings[2],
        denied(
            "Deployment",
            "static_web_app/docs",
            "docker.io/library/nginx:1.27.3"
        )
    );

    // An update warns again: the objects are applied again and judged again.
    let answer = app
        .patch(
            "/v1/boundaries/shop/resources/app/api",
            &admin,
            json!({"labels": {"team": "web"}}),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.body);
    assert_eq!(answer.warnings().len(), 2, "{:?}", answer.warnings());

    // The user's own image: nothing of palisade's to warn about.
    let wanted = json!({"type": "app", "name": "web", "plan": "small",
                   "image": "quay.io/acme/web:1.0"});
    let answer = app.create("shop", &admin, wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(answer.warnings(), Vec::<String>::new());
}

#[tokio::test]
async fn a_function_from_an_upload_keeps_its_latest_builder_warning_once() {
    let app = placed().await;
    let admin = app.admin.clone();
    let upload = app
        .post_body(
            "/v1/boundaries/shop/uploads",
            &admin,
            "print('hi')",
            "application/octet-stream",
        )
        .await;
    assert_eq!(upload.status, StatusCode::CREATED, "{:?}", upload.body);
    let id = upload.body["id"].as_str().unwrap().to_owned();
    let wanted = json!({"type": "function", "name": "hook", "plan": "small", "upload": id});
    let answer = app.create("shop", &admin, wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    let warnings = answer.warnings();
    assert_eq!(
        warnings[0],
        "299 palisade \"Policy 'trusted' (DisallowLatestTag) denies builds of uploaded code: the function builder is referenced by the tag latest\""
    );
    // The registry rule is still said; the latest tag is not said twice.
    assert_eq!(
        warnings[1],
        denied(
            "build Job",
            "function/hook",
            "ghcr.io/palisade-dev/function-builder:latest"
        )
    );
    assert!(
        !warnings
            .iter()
            .any(|w| w.contains("(DisallowLatestTag) denied image")),
        "{warnings:?}"
    );
    assert_eq!(warnings.len(), 3, "{warnings:?}");
}

/// A process that cannot have uploads fetched (no `--public-url`, listening on `0.0.0.0`) says
/// so on the write, instead of only `not deployed: ...` later.
#[tokio::test]
async fn an_upload_that_will_not_be_built_says_so() {
    let mut app = placed().await;
    let state = palisade_server::AppState::of(app.state.app.clone().without_upload_builds());
    app.router = palisade_server::app(state);
    let admin = app.admin.clone();
    let upload = app
        .post_body(
            "/v1/boundaries/shop/uploads",
            &admin,
            "<h1>docs</h1>",
            "application/octet-stream",
        )
        .await;
    let id = upload.body["id"].as_str().unwrap().to_owned();
    let wanted = json!({"type": "static_web_app", "name": "site", "upload": id});
    let answer = app.create("shop", &admin, wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    assert_eq!(
        answer.warnings(),
        ["299 palisade \"uploaded code is not built: palisade serve has no --public-url for build Jobs to fetch it from\""]
    );
}
