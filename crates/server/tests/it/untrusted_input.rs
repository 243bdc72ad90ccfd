//! Hardening II (issue 31, item 2): untrusted YAML and JSON are bounded before they are
//! parsed. A body nested 100,000 deep is a 400 naming where, on every route that reads YAML,
//! JSON or a kubeconfig; YAML tags the parser would drop are refused; a developer's apply is
//! a 403 before its body is read.
//!
//! The answer times are printed (`--nocapture`) and recorded in docs/benchmarks.md, not
//! asserted: wall-clock bounds do not belong in these tests.

use std::future::Future;
use std::time::Instant;

use crate::common::{shop, Answer, TestApp};
use axum::http::{Method, StatusCode};
use serde_json::json;

const DEPTH: usize = 100_000;

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// A policy document whose annotation holds a value nested `depth` deep (issue 31's example).
fn deep_document(boundary: &str, depth: usize) -> String {
    format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: p\n  boundary: {boundary}\n  annotations: {{x: {}}}\nspec:\n  rules: [{{disallowLatestTag: {{}}}}]\n",
        nested(depth)
    )
}

/// The answer to a dry-run apply of `body` by the admin.
async fn dry_run(app: &TestApp, body: &str) -> Answer {
    app.post_yaml("/v1/apply?dry_run=true", &app.admin, body)
        .await
}

/// Awaits `answer`, the answer to `body`, and prints how long it took under `label`
/// (`--nocapture`; the times are recorded, not asserted).
async fn timed(label: &str, body: &str, answer: impl Future<Output = Answer>) -> Answer {
    let started = Instant::now();
    let answer = answer.await;
    println!(
        "{label} ({} KiB): {} in {:?}",
        body.len() / 1024,
        answer.status,
        started.elapsed()
    );
    answer
}

/// A kubeconfig otherwise acceptable, with a value nested `depth` deep.
fn deep_kubeconfig(depth: usize) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://127.0.0.1:6443', certificate-authority-data: Zm9v}}\nusers:\n- name: u\n  user: {{token: abc}}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\npreferences: {{x: {}}}\n",
        nested(depth)
    )
}

#[tokio::test]
async fn every_route_refuses_a_body_nested_100000_deep_naming_where() {
    let app = shop().await;
    let json_body = format!("{{\"x\": {}}}", nested(DEPTH));
    let json_refused = "the body: line 1 column 70: nesting deeper than 64 levels";
    let cases: Vec<(Method, &str, String, &str, String)> = vec![
        (
            Method::POST,
            "/v1/boundaries",
            json_body.clone(),
            "application/json",
            json_refused.into(),
        ),
        (
            Method::POST,
            "/v1/tokens",
            json_body.clone(),
            "application/json",
            json_refused.into(),
        ),
        (
            Method::PUT,
            "/v1/boundaries/shop/policies/p",
            json_body.clone(),
            "application/json",
            json_refused.into(),
        ),
        (
            Method::POST,
            "/v1/boundaries/shop/policies/p/preview",
            json_body.clone(),
            "application/json",
            json_refused.into(),
        ),
        (
            Method::POST,
            "/v1/boundaries/shop/resources",
            json_body.clone(),
            "application/json",
            json_refused.into(),
        ),
        (
            Method::PATCH,
            "/v1/boundaries/shop/resources/app/web",
            json_body.clone(),
            "application/merge-patch+json",
            json_refused.into(),
        ),
        (
            Method::PUT,
            "/v1/boundaries/shop/clusters/c/namespaces/ns",
            json_body.clone(),
            "application/json",
            json_refused.into(),
        ),
        (
            Method::PUT,
            "/v1/clusters/c",
            json_body.clone(),
            "application/json",
            json_refused.into(),
        ),
        (
            Method::PUT,
            "/v1/clusters/c",
            json!({"kubeconfig": deep_kubeconfig(DEPTH)}).to_string(),
            "application/json",
            "/kubeconfig: line 12 column 80: nesting deeper than 64 levels".into(),
        ),
        (
            Method::POST,
            "/v1/apply?dry_run=true",
            deep_document("shop", DEPTH),
            "application/yaml",
            "the body: line 6 column 81: nesting deeper than 64 levels".into(),
        ),
        (
            Method::POST,
            "/v1/apply",
            format!(
                "{}---\n{}",
                deep_document("shop", 3),
                deep_document("shop", DEPTH)
            ),
            "application/yaml",
            "the body: line 15 column 81: nesting deeper than 64 levels".into(),
        ),
    ];
    let mut wrong = Vec::new();
    for (method, path, body, content_type, message) in cases {
        let label = format!("{method} {path}");
        let send = app.send_body(method.clone(), path, &app.admin, &body, content_type);
        let answer = timed(&label, &body, send).await;
        if (answer.status, answer.code(), answer.message())
            != (StatusCode::BAD_REQUEST, "invalid_request", message.as_str())
        {
            wrong.push(format!(
                "{method} {path}: {} {:?}",
                answer.status, answer.body
            ));
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
}

#[tokio::test]
async fn a_body_as_deep_as_the_limit_is_read() {
    let app = shop().await;
    // The document itself nests 3 levels around the annotation: 61 more reach 64.
    let answer = dry_run(&app, &deep_document("shop", 61)).await;
    // Annotation values are strings: past the nesting bound, the document's own rules speak.
    answer.assert_error_starts(StatusCode::BAD_REQUEST, "/0/metadata/annotations/x: ");
    let answer = dry_run(&app, &deep_document("shop", 62)).await;
    assert_eq!(
        answer.message(),
        "the body: line 6 column 81: nesting deeper than 64 levels"
    );
    let answer = app
        .post(
            "/v1/boundaries/shop/resources",
            &app.admin,
            json!({"type": "app", "name": "web", "plan": "small", "image": "ghcr.io/a/b:1",
                "labels": {"x": serde_json::from_str::<serde_json::Value>(&nested(62)).unwrap()}}),
        )
        .await;
    answer.assert_error_starts(StatusCode::BAD_REQUEST, "/labels/x: ");
}

#[tokio::test]
async fn yaml_tags_the_parser_would_drop_are_refused_naming_where() {
    let app = shop().await;
    let accepted = "the tags accepted are !!str, !!int, !!float, !!bool, !!null, !!map, !!seq";
    let document = |metadata: &str| {
        format!(
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: p\n  boundary: shop\n{metadata}spec:\n  rules: [{{disallowLatestTag: {{}}}}]\n"
        )
    };
    let cases = [
        (
            document("  annotations: {x: !!binary aGVsbG8=}\n"),
            format!("the body: line 6 column 20: the YAML tag !!binary is not accepted; {accepted}"),
        ),
        (
            document("  annotations:\n    x: !!python/object:os.system [ls]\n"),
            format!("the body: line 7 column 8: the YAML tag !!python/object:os.system is not accepted; {accepted}"),
        ),
        (
            document("  annotations: {x: !<tag:yaml.org,2002:str> y}\n"),
            format!("the body: line 6 column 20: the YAML tag !<tag:yaml.org,2002:str> is not accepted; {accepted}"),
        ),
        (
            format!("%TAG !! tag:example.com,2000:\n---\n{}", document("")),
            "the body: line 1 column 1: %TAG directives are not accepted".to_owned(),
        ),
        // Local tags are refused after parsing, naming the node, as before.
        (
            document("  annotations: {x: !local y}\n"),
            "/0/metadata/annotations/x: custom YAML tags are not accepted (found !local)"
                .to_owned(),
        ),
    ];
    for (body, message) in cases {
        dry_run(&app, &body)
            .await
            .assert_error(StatusCode::BAD_REQUEST, message);
    }
    // The core schema's tags are read as before.
    let answer = dry_run(&app, &document("  annotations: !!map {x: !!str y}\n")).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    let kubeconfig = deep_kubeconfig(1).replace("{token: abc}", "{token: !!binary YWJj}");
    let answer = app.put_cluster("c", &kubeconfig).await;
    answer.assert_error(
        StatusCode::BAD_REQUEST,
        format!("/kubeconfig: line 8 column 17: the YAML tag !!binary is not accepted; {accepted}"),
    );
}

/// A developer may not apply: 403 before the body is read, whatever it names or holds.
#[tokio::test]
async fn a_developer_apply_is_403_before_the_body_is_read() {
    let app = shop().await;
    app.boundary("other").await;
    let developer = app.token("developer", Some("shop")).await;
    let forbidden = "this needs the role admin or boundary-admin; the token is a developer token";
    for body in [
        deep_document("shop", 3),
        deep_document("other", 3),
        deep_document("shop", DEPTH),
        "not: [yaml".to_owned(),
    ] {
        let send = app.post_yaml("/v1/apply", &developer, &body);
        let answer = timed("developer apply", &body, send).await;
        answer.assert_error(StatusCode::FORBIDDEN, forbidden);
    }
}

/// Aliases that would expand a small text into millions of values are refused.
#[tokio::test]
async fn an_alias_bomb_is_refused() {
    let app = shop().await;
    let items = vec!["x"; 2_000].join(", ");
    let aliases = vec!["*a"; 2_000].join(", ");
    let body = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: p\n  boundary: shop\n  annotations: {{x: &a [{items}], y: [{aliases}]}}\nspec:\n  rules: [{{disallowLatestTag: {{}}}}]\n"
    );
    let answer = dry_run(&app, &body).await;
    answer.assert_error(StatusCode::BAD_REQUEST, "/0: aliases expand the text to more than 79692 values (one per byte of it, plus 65536) (line 6 column 4932)");
}

/// Memory per request (issue 42, item 8): a document of more nodes than a parse may hold is a
/// 400 naming where, before it is parsed; aliases that would copy a long scalar thousands of
/// times are a 400 naming the bound on the bytes they build (before, a 77 KB body held
/// 501 MiB this way, and a 1 MiB one would have asked for about 40 GB).
#[tokio::test]
async fn bodies_that_would_hold_too_much_memory_are_refused_in_words() {
    let app = shop().await;
    let many_nodes = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: p\n  boundary: shop\n  annotations: {{x: [{}x]}}\nspec:\n  rules: [{{disallowLatestTag: {{}}}}]\n",
        "[],".repeat(60_000)
    );
    let long = "x".repeat(65_536);
    let aliases = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata:\n  name: p\n  boundary: shop\n  annotations: {{x: &a {long}, y: [{}x]}}\nspec:\n  rules: [{{disallowLatestTag: {{}}}}]\n",
        "*a, ".repeat(4_000)
    );
    let cases = [
        (
            many_nodes,
            "the body: line 6 column 149976: more than 50000 nodes (keys, values, items) in one document".to_owned(),
        ),
        (
            aliases.clone(),
            format!(
                "/0: aliases expand the text to more than {} bytes of strings (two per byte of it, plus 65536) (line 6 column 20)",
                2 * aliases.len() + 65_536
            ),
        ),
    ];
    for (body, expected) in cases {
        let answer = timed("apply", &body, dry_run(&app, &body)).await;
        answer.assert_error(StatusCode::BAD_REQUEST, expected);
    }
}
