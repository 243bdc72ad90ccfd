//! Hardening of inputs through the API: policy documents' metadata and YAML tags on
//! `POST /v1/apply`, resources' `image` and `source` on create.

use crate::common::shop;
use axum::http::StatusCode;

#[tokio::test]
async fn apply_refuses_custom_tags_and_bad_metadata() {
    let app = shop().await;
    let cases = [
        (
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec: !evil {rules: [{disallowLatestTag: {}}]}\n",
            "/0/spec: custom YAML tags are not accepted (found !evil)",
        ),
        (
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop, labels: {'a b': c}}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
            "/0/metadata/labels/a b: label key name 'a b' must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
        (
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop, annotations: {'x/y/z': c}}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
            "/0/metadata/annotations/x~1y~1z: annotation key name 'y/z' must be at most 63 characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit",
        ),
    ];
    for (body, message) in cases {
        let answer = app.post_yaml("/v1/apply", &app.admin, body).await;
        answer.assert_invalid_request(message, body);
    }
}

#[tokio::test]
async fn resources_refuse_unsafe_sources_and_images() {
    let app = shop().await;
    let cases = [
        (
            r#"{"type": "function", "name": "f", "plan": "small", "source": "ext::sh -c touch% /tmp/pwned"}"#,
            "/source: ",
        ),
        (
            r#"{"type": "static_web_app", "name": "s", "source": "file:///etc/passwd"}"#,
            "/source: ",
        ),
        (
            r#"{"type": "app", "name": "web", "plan": "small", "image": "nginx\u001b[31m"}"#,
            "/image: ",
        ),
        (
            r#"{"type": "container_instance", "name": "ci", "components": [{"name": "a", "plan": "small", "image": "ghcr.io/acme/a:1"}, {"name": "b", "plan": "small", "image": "\"b\""}]}"#,
            "/components/1/image: ",
        ),
    ];
    for (body, prefix) in cases {
        let answer = app.create_text("shop", &app.admin, body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        assert!(
            answer.message().starts_with(prefix),
            "{body}: {}",
            answer.message()
        );
    }
}
