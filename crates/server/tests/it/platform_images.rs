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
    for (name, spec) in [
        (
            "trusted",
            json!({"rules": [{"allowedRegistries": {"registries": ["ghcr.io/acme"]}},
                              {"disallowLatestTag": {}}]}),
        ),
        (
            "scoped",
            json!({"scope": {"clusters": ["c2"]},
                   "rules": [{"allowedRegistries": {"registries": ["quay.io/none"]}}]}),
        ),
    ] {
        let answer = app.policy("shop", name, spec).await;
        assert!(answer.status.is_success(), "{:?}", answer.body);
    }
    app
}

/// The builder image palisade runs for a build of `kind` (`app`, `static-web-app`, ...).
fn builder(kind: &str) -> String {
    format!("ghcr.io/palisade-dev/{kind}-builder:1.0.0")
}

/// Uploads `content` to the boundary `shop` as the admin and asserts the 201: the upload's id.
async fn upload(app: &TestApp, content: &str) -> String {
    let path = "/v1/boundaries/shop/uploads";
    let answer = app
        .post_body(path, &app.admin, content, "application/octet-stream")
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    answer.body["id"].as_str().unwrap().to_owned()
}

/// Creates `wanted` as the admin and asserts the 201: the answer's `Warning` headers.
async fn created_warnings(app: &TestApp, wanted: serde_json::Value) -> Vec<String> {
    let answer = app.admin_create(wanted).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    answer.warnings()
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

    let warnings = created_warnings(&app, wanted).await;
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    assert_eq!(warnings[0], denied("build Job", "app/api", &builder("app")));
    assert!(
        warnings[1].starts_with(
            "299 palisade \"the Deployment palisade runs for app/api will be denied: Policy 'trusted' (AllowedRegistries) denied image registry.palisade.internal/builds/shop/app-api:"
        ),
        "{warnings:?}"
    );

    let wanted = json!({"type": "static_web_app", "name": "docs",
                   "source": "https://git.example.com/acme/docs.git"});

    let warnings = created_warnings(&app, wanted).await;
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    let docs = "static_web_app/docs";
    let builder = builder("static-web-app");
    assert_eq!(warnings[0], denied("build Job", docs, &builder));
    let file_server = "docker.io/library/nginx:1.27.3";
    assert_eq!(warnings[2], denied("Deployment", docs, file_server));

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
    answer.assert_created_warnings(&[]);
}

#[tokio::test]
async fn a_function_from_an_upload_keeps_its_latest_builder_warning_once() {
    let app = placed().await;
    let id = upload(&app, "print('hi')").await;
    let wanted = json!({"type": "function", "name": "hook", "plan": "small", "upload": id});
    let warnings = created_warnings(&app, wanted).await;
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
    let id = upload(&app, "<h1>docs</h1>").await;
    let wanted = json!({"type": "static_web_app", "name": "site", "upload": id});
    let answer = app.admin_create(wanted).await;
    answer.assert_created_warnings(&["299 palisade \"uploaded code is not built: palisade serve has no --public-url for build Jobs to fetch it from\""]);
}
