//! Hardening (issue 9): the API stays available under costly applies and slow clients, bodies
//! are parsed strictly with messages that name the field, every list pages, and answers come
//! in the order SPEC 2.4 gives.

use crate::common;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::{page_path, postgresql, shop, TestApp, KUBECONFIG};
use axum::http::{Method, StatusCode};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn policy_documents(boundary: &str, count: usize, prefix: &str) -> String {
    (0..count)
        .map(|i| {
            format!(
                "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {{name: {prefix}-{i}, boundary: {boundary}}}\nspec:\n  rules:\n    - requiredLabels: {{labels: [{{key: team}}]}}\n"
            )
        })
        .collect::<Vec<_>>()
        .join("---\n")
}

async fn apply(app: &TestApp, token: &str, body: &str, dry_run: bool) -> common::Answer {
    let path = if dry_run {
        "/v1/apply?dry_run=true"
    } else {
        "/v1/apply"
    };
    app.post_yaml(path, token, body).await
}

/// A server on loopback with short limits, its base URL, and its shutdown trigger.
async fn listen(
    app: &TestApp,
    limits: palisade_server::Limits,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let router = app.router.clone();
    tokio::spawn(async move {
        palisade_server::serve_on(
            listener,
            router,
            async {
                let _ = stopped.await;
            },
            limits,
        )
        .await
        .unwrap();
    });
    (base, stop)
}

#[tokio::test]
async fn apply_refuses_more_documents_than_its_limit_before_validating_any() {
    let app = shop().await;
    let body = policy_documents("shop", 1_001, "p");
    let answer = apply(&app, &app.admin, &body, true).await;
    answer.assert_refusal(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", "the body holds 1001 documents; at most 1000 are accepted in one apply: split it into several requests");
}

#[tokio::test]
async fn a_boundary_holds_at_most_500_policies() {
    let app = shop().await;
    let answer = apply(&app, &app.admin, &policy_documents("shop", 500, "p"), false).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(answer.body["results"].as_array().unwrap().len(), 500);
    // Re-applying the same 500 is fine: nothing new.
    let again = apply(&app, &app.admin, &policy_documents("shop", 500, "p"), true).await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    assert!(again.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["action"] == "unchanged"));
    // One more is refused, naming the document and the limit.
    let more = format!(
        "{}---\n{}",
        policy_documents("shop", 1, "p"),
        policy_documents("shop", 1, "extra")
    );
    let answer = apply(&app, &app.admin, &more, false).await;
    answer.assert_error(StatusCode::BAD_REQUEST, "/1/metadata/name: boundary 'shop' would hold 501 policies; at most 500 policies are allowed in one boundary");
    let answer = app
        .admin(
            Method::PUT,
            "/v1/boundaries/shop/policies/one-more",
            Some(common::plans(&["small"])),
        )
        .await;
    answer.assert_error(StatusCode::BAD_REQUEST, "/path/policy: boundary 'shop' would hold 501 policies; at most 500 policies are allowed in one boundary");
    // Replacing a stored policy still works at the limit.
    let answer = app
        .admin(
            Method::PUT,
            "/v1/boundaries/shop/policies/p-0",
            Some(common::plans(&["small"])),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
}

/// Before the fix, four concurrent applies of 7,000 small documents left `/healthz`
/// unanswered for minutes. Now: the largest accepted applies, four at a time and again and
/// again, while `/healthz` is probed; every probe is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthz_answers_while_large_applies_run() {
    let app = shop().await;
    app.boundary("web").await;
    let (base, stop) = listen(&app, palisade_server::Limits::default()).await;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    // The most one apply takes: 1,000 documents, 500 (the most a boundary holds) in each of two.
    let body = Arc::new(format!(
        "{}---\n{}",
        policy_documents("shop", 500, "p"),
        policy_documents("web", 500, "p")
    ));
    // Before the fix, four of these (7,000 small documents, under 1 MiB) left /healthz
    // unanswered for minutes; now each is refused by its document count at once.
    let oversized = Arc::new(
        (0..7_000)
            .map(|i| {
                format!(
                    "{{apiVersion: palisade.dev/v1, kind: BoundaryPolicy, metadata: {{name: x{i}, boundary: shop}}, spec: {{rules: [{{disallowLatestTag: {{}}}}]}}}}"
                )
            })
            .collect::<Vec<_>>()
            .join("\n---\n"),
    );
    assert!(oversized.len() < 1024 * 1024, "under the body limit");
    let mut applies = Vec::new();
    for round in 0..8 {
        let (client, base, token) = (client.clone(), base.clone(), app.admin.clone());
        let body = if round % 2 == 0 {
            body.clone()
        } else {
            oversized.clone()
        };
        applies.push(tokio::spawn(async move {
            let answer = client
                .post(format!("{base}/v1/apply?dry_run=true"))
                .bearer_auth(token)
                .header("content-type", "application/yaml")
                .body(body.to_string())
                .send()
                .await
                .unwrap();
            answer.status().as_u16()
        }));
    }
    let probes = client.clone();
    let unanswered = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let prober = {
        let (unanswered, answered, base) = (unanswered.clone(), answered.clone(), base.clone());
        tokio::spawn(async move {
            for _ in 0..40 {
                let probe = probes
                    .get(format!("{base}/healthz"))
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await;
                match probe {
                    Ok(r) if r.status() == StatusCode::OK => {
                        answered.fetch_add(1, Ordering::Relaxed)
                    }
                    _ => unanswered.fetch_add(1, Ordering::Relaxed),
                };
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let mut statuses = Vec::new();
    for apply in applies {
        statuses.push(apply.await.unwrap());
    }
    prober.await.unwrap();
    let _ = stop.send(());
    assert_eq!(statuses, [200, 413, 200, 413, 200, 413, 200, 413]);
    assert_eq!(
        unanswered.load(Ordering::Relaxed),
        0,
        "healthz probes unanswered"
    );
    assert_eq!(answered.load(Ordering::Relaxed), 40);
}

/// Slow clients are disconnected: a request head that never completes, a body that never
/// completes, and an idle kept-alive connection.
#[tokio::test]
async fn slow_and_idle_connections_are_closed() {
    let app = TestApp::sqlite().await;
    let limits = palisade_server::Limits {
        header: Duration::from_millis(500),
        body: Duration::from_millis(500),
        request: Duration::from_secs(2),
        ..palisade_server::Limits::default()
    };
    let (base, stop) = listen(&app, limits).await;
    let address = base.trim_start_matches("http://").to_owned();
    let token = app.admin.clone();
    let mut connections = Vec::new();
    for kind in 0..60 {
        let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
        match kind % 3 {
            // Half a request head.
            0 => stream
                .write_all(b"POST /v1/boundaries HTTP/1.1\r\nHost: x\r\nContent-Ty")
                .await
                .unwrap(),
            // A whole head, half a body, a valid token (so the body is read).
            1 => stream
                .write_all(
                    format!(
                        "POST /v1/boundaries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"name\""
                    )
                    .as_bytes(),
                )
                .await
                .unwrap(),
            // One whole request, then idle on the kept-alive connection.
            _ => stream
                .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap(),
        }
        connections.push((kind % 3, stream));
    }
    // Well past every limit: each connection must have been closed by the server.
    let mut open = 0;
    let mut body_answers = 0;
    for (kind, mut stream) in connections {
        let mut seen = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(10), async {
            let mut buffer = [0u8; 4096];
            loop {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => return true,
                    Ok(n) => seen.extend_from_slice(&buffer[..n]),
                }
            }
        })
        .await
        .unwrap_or(false);
        if !closed {
            open += 1;
        }
        let text = String::from_utf8_lossy(&seen);
        if kind == 1
            && text.starts_with("HTTP/1.1 400")
            && text.contains("the body could not be read whole")
        {
            body_answers += 1;
        }
    }
    let _ = stop.send(());
    assert_eq!(open, 0, "connections still open past the limits");
    assert_eq!(
        body_answers, 20,
        "half-sent bodies answered 400 naming the cause"
    );
}

#[tokio::test]
async fn json_bodies_are_strict_and_messages_name_the_field_in_words() {
    let app = TestApp::sqlite().await;
    let cases = [
        (
            r#"{"name":"zz1"} xx"#,
            "the body is not valid JSON: it holds more than one JSON value (trailing characters at line 1 column 16)",
        ),
        (r#"{"name":"zz1","name":"zz2"}"#, "/name: is given twice"),
        ("[]", "the body must be a JSON object, got an array"),
        ("{}", "/name: is required"),
        (
            r#"{"name":"zz1","display_name":"a\u0000b"}"#,
            "/display_name: must not contain control characters (found U+0000)",
        ),
        (
            r#"{"name":"zz1","display_name":"a\u001b[31m"}"#,
            "/display_name: must not contain control characters (found U+001B)",
        ),
    ];
    for (body, message) in cases {
        let answer = app
            .post_body("/v1/boundaries", &app.admin, body, "application/json")
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}: {answer:?}");
        assert_eq!(answer.message(), message, "{body}");
    }
    let answer = app
        .admin(Method::PUT, "/v1/clusters/c", Some(json!({})))
        .await;
    answer.assert_error(StatusCode::BAD_REQUEST, "/kubeconfig: is required");
    app.boundary("shop").await;
    let answer = app
        .send_body(
            Method::PUT,
            "/v1/boundaries/shop/policies/p",
            &app.admin,
            r#"{"rules":[{"disallowLatestTag":{}}]} {"rules":[]}"#,
            "application/json",
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
    let answer = app
        .create_text(
            "shop",
            &app.admin,
            r#"{"type":"postgresql","name":"db","plan":"small","plan":"xlarge"}"#,
        )
        .await;
    answer.assert_error(StatusCode::BAD_REQUEST, "/plan: is given twice");
}

#[tokio::test]
async fn every_list_pages_and_refuses_bad_limits() {
    let app = shop().await;
    for i in 0..3 {
        app.token("developer", Some("shop")).await;
        app.policy(
            "shop",
            "p",
            common::plans(if i % 2 == 0 { &["small"] } else { &["medium"] }),
        )
        .await;
    }
    let lists = [
        "/v1/tokens",
        "/v1/boundaries/shop/namespaces",
        "/v1/boundaries/shop/policies/p/history",
        "/v1/boundaries",
        "/v1/boundaries/shop/policies",
        "/v1/boundaries/shop/resources",
    ];
    for list in lists {
        for bad in ["0", "abc", "1001"] {
            let answer = app.admin_get(&format!("{list}?limit={bad}")).await;
            assert_eq!(
                answer.status,
                StatusCode::BAD_REQUEST,
                "{list}?limit={bad}: {answer:?}"
            );
            assert!(
                answer.message().starts_with("/limit: "),
                "{list}: {}",
                answer.message()
            );
        }
    }
    // Tokens (admin + 3) and history (3 entries) page one item at a time, in order, once each.
    for (list, total) in [
        ("/v1/tokens", 4),
        ("/v1/boundaries/shop/policies/p/history", 3),
    ] {
        let mut seen = Vec::new();
        let mut next: Option<String> = None;
        loop {
            let path = page_path(list, 1, next.as_deref());
            let answer = app.admin_get(&path).await;
            assert_eq!(answer.status, StatusCode::OK, "{path}: {answer:?}");
            let items = answer.body["items"].as_array().unwrap();
            assert_eq!(items.len(), 1, "{path}");
            seen.push(items[0].clone());
            match answer.body["continue"].as_str() {
                Some(token) => next = Some(token.to_owned()),
                None => break,
            }
        }
        assert_eq!(seen.len(), total, "{list}: {seen:?}");
    }
    // The OpenAPI document says so.
    let openapi = app.admin_get("/openapi.json").await;
    for path in [
        "/v1/tokens",
        "/v1/boundaries/{boundary}/namespaces",
        "/v1/boundaries/{boundary}/policies/{policy}/history",
    ] {
        let parameters = &openapi.body["paths"][path]["get"]["parameters"];
        let names: Vec<&str> = parameters
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|p| p["name"].as_str())
            .collect();
        assert!(
            names.contains(&"limit") && names.contains(&"continue"),
            "{path}: {names:?}"
        );
    }
}

#[tokio::test]
async fn answers_come_in_the_order_of_spec_2_4() {
    let app = shop().await;
    app.boundary("other").await;
    let developer = app.token("developer", Some("shop")).await;
    let admin_of_shop = app.token("boundary-admin", Some("shop")).await;

    // A body over 1 MiB with a garbage token: 401 (the token is checked first).
    let big = format!("{{\"name\": \"{}\"}}", "x".repeat(1_100_000));
    let answer = app
        .post_body("/v1/boundaries", "garbage", &big, "application/json")
        .await;
    assert_eq!(
        answer.status,
        StatusCode::UNAUTHORIZED,
        "{:?}",
        answer.status
    );
    assert_eq!(
        answer
            .headers
            .get("www-authenticate")
            .and_then(|v| v.to_str().ok()),
        Some("Bearer realm=\"palisade\"")
    );
    // And with a valid token, 413.
    let answer = app
        .post_body("/v1/boundaries", &app.admin, &big, "application/json")
        .await;
    assert_eq!(answer.status, StatusCode::PAYLOAD_TOO_LARGE);

    // A boundary-admin naming another boundary in a body: 404, as for a path.
    let answer = app
        .post(
            "/v1/tokens",
            &admin_of_shop,
            json!({"role": "developer", "boundary": "other"}),
        )
        .await;
    answer.assert_error(StatusCode::NOT_FOUND, "boundary 'other' not found");
    // A developer may send no token body at all: 403 before its body is read, whatever
    // boundary it names.
    for boundary in ["shop", "other"] {
        let answer = app
            .post(
                "/v1/tokens",
                &developer,
                json!({"role": "developer", "boundary": boundary}),
            )
            .await;
        assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    }
    // A developer may apply nothing: 403 before the body is read, whatever it names (issue
    // 31); a boundary-admin of another boundary still learns nothing of `other`.
    let body = policy_documents("other", 1, "p");
    let answer = apply(&app, &developer, &body, true).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    let answer = apply(&app, &admin_of_shop, &body, true).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    let answer = apply(&app, &developer, &policy_documents("shop", 1, "p"), true).await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{answer:?}");
    // The developer token of another boundary: 404 to a developer, not 403.
    let other_developer = app.new_token("developer", Some("other")).await;
    let id = other_developer.body["id"].as_str().unwrap();
    let answer = app.delete(&format!("/v1/tokens/{id}"), &developer).await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
    let answer = app
        .delete(&format!("/v1/tokens/{id}"), &admin_of_shop)
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND, "{answer:?}");
}

#[tokio::test]
async fn the_bearer_scheme_is_case_insensitive_and_401s_say_how_to_authenticate() {
    let app = TestApp::sqlite().await;
    for scheme in ["bearer", "BEARER", "Bearer"] {
        let answer = app
            .raw(
                Method::GET,
                "/v1/boundaries",
                None,
                None,
                None,
                &[("authorization", &format!("{scheme} {}", app.admin))],
            )
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{scheme}");
    }
    for header in [None, Some("Basic abc"), Some("Bearer nope")] {
        let headers: Vec<(&str, &str)> = header.map(|h| ("authorization", h)).into_iter().collect();
        let answer = app
            .raw(Method::GET, "/v1/boundaries", None, None, None, &headers)
            .await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED);
        assert_eq!(
            answer
                .headers
                .get("www-authenticate")
                .and_then(|v| v.to_str().ok()),
            Some("Bearer realm=\"palisade\""),
            "{header:?}"
        );
    }
}

#[tokio::test]
async fn if_none_match_star_creates_only() {
    let app = shop().await;
    let spec = common::plans(&["small"]).to_string();
    let put = |spec: String| {
        let app = &app;
        async move {
            app.raw(
                Method::PUT,
                "/v1/boundaries/shop/policies/p",
                Some(&app.admin),
                Some(&spec),
                Some("application/json"),
                &[("if-none-match", "*")],
            )
            .await
        }
    };
    let first = put(spec.clone()).await;
    assert_eq!(first.status, StatusCode::CREATED, "{first:?}");
    let second = put(common::plans(&["large"]).to_string()).await;
    second.assert_refusal(
        StatusCode::PRECONDITION_FAILED,
        "precondition_failed",
        "policy 'p' already exists in boundary 'shop' (If-None-Match: * creates only)",
    );
    let stored = app.admin_get("/v1/boundaries/shop/policies/p").await;
    assert_eq!(
        stored.body["spec"]["rules"],
        common::plans(&["small"])["rules"],
        "not overwritten"
    );
}

/// Audit policies' warnings reach the caller on a 422 too, as on a success.
#[tokio::test]
async fn a_422_carries_the_audit_warnings() {
    let app = shop().await;
    app.policy("shop", "limits", common::plans(&["small"]))
        .await;
    app.policy("shop", "watch", common::audit_plans(&["medium"]))
        .await;
    let answer = app.admin_create(postgresql("db", "large")).await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
    assert_eq!(answer.code(), "compute_plan_not_allowed");
    let warnings = answer.warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].starts_with(
            "299 palisade \"Policy 'watch' (audit) would deny: Compute plan 'large' is not allowed"
        ),
        "{warnings:?}"
    );
}

/// A bad `limit` on a boundary the caller cannot see is 404 first (SPEC 2.4: 404 before 400).
#[tokio::test]
async fn an_unseen_boundary_is_404_before_a_bad_limit() {
    let app = shop().await;
    app.boundary("other").await;
    let developer = app.token("developer", Some("shop")).await;
    for list in [
        "/v1/boundaries/other/namespaces",
        "/v1/boundaries/other/policies/p/history",
        "/v1/boundaries/other/policies",
    ] {
        let answer = app.get(&format!("{list}?limit=0"), &developer).await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{list}: {answer:?}");
    }
}

/// Writes are rate limited per token and per boundary (429 `rate_limited` with Retry-After);
/// reads are not, and another token has its own bucket.
#[tokio::test]
async fn writes_past_the_rate_limit_are_429_and_reads_are_not() {
    use palisade_app::limits::{Rate, WriteLimits};
    let mut app = TestApp::sqlite().await;
    let limited = app
        .state
        .app
        .clone()
        .with_write_limits(WriteLimits::new(Rate::new(0.5, 3), Rate::new(100.0, 100)));
    app.router = palisade_server::app(palisade_server::AppState::of(limited));
    app.boundary("shop").await;
    let developer = app.token("developer", Some("shop")).await;
    let admin = app.admin.clone();
    // The boundary and the token took two of the admin's three writes.
    let answer = app.create("shop", &admin, postgresql("a", "small")).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
    let answer = app.create("shop", &admin, postgresql("c", "small")).await;
    assert_eq!(
        answer.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{:?}",
        answer.body
    );
    assert_eq!(answer.code(), "rate_limited");
    let message = answer.message();
    assert!(
        message.starts_with("too many writes: token ")
            && message.contains(" may make 0.5 per second (bursts of 3); retry in 2.0 s"),
        "{message}"
    );
    assert_eq!(answer.headers["retry-after"], "2");
    // Nothing was written.
    let answer = app
        .admin_get("/v1/boundaries/shop/resources/postgresql/c")
        .await;
    assert_eq!(answer.status, StatusCode::NOT_FOUND);
    // Reads go on.
    for _ in 0..20 {
        let answer = app.admin_get("/v1/boundaries/shop/resources").await;
        assert_eq!(answer.status, StatusCode::OK);
    }
    // Another token writes.
    let answer = app
        .create("shop", &developer, postgresql("d", "small"))
        .await;
    assert_eq!(answer.status, StatusCode::CREATED, "{:?}", answer.body);
}

/// Every route that takes a body, with a body over its limit (the uploads' limit is 8 MiB,
/// every other 1 MiB).
fn body_routes() -> Vec<(Method, &'static str, usize)> {
    let mib = 1024 * 1024;
    vec![
        (Method::POST, "/v1/boundaries", 2 * mib),
        (Method::PUT, "/v1/boundaries/shop/policies/p", 2 * mib),
        (
            Method::POST,
            "/v1/boundaries/shop/policies/p/preview",
            2 * mib,
        ),
        (Method::POST, "/v1/apply", 2 * mib),
        (Method::POST, "/v1/boundaries/shop/resources", 2 * mib),
        (
            Method::PATCH,
            "/v1/boundaries/shop/resources/app/web",
            2 * mib,
        ),
        (Method::POST, "/v1/boundaries/shop/uploads", 9 * mib),
        (Method::POST, "/v1/tokens", 2 * mib),
        (Method::PUT, "/v1/clusters/c", 2 * mib),
        (
            Method::PUT,
            "/v1/boundaries/shop/clusters/c/namespaces/ns",
            2 * mib,
        ),
    ]
}

/// A JSON object of `size` bytes.
fn big_body(size: usize) -> String {
    format!("{{\"name\": \"{}\"}}", "x".repeat(size - 12))
}

/// SPEC 4.1's order (401, 404, 403, then the body): no route reads a body before it knows the
/// caller may send one. Without a token, or with a bad one, a body over the limit is 401.
#[tokio::test]
async fn a_body_over_the_limit_without_a_token_is_401_on_every_route() {
    let app = shop().await;
    let mut wrong = Vec::new();
    for (method, path, size) in body_routes() {
        let body = big_body(size);
        for token in [None, Some("garbage")] {
            let answer = app
                .raw(
                    method.clone(),
                    path,
                    token,
                    Some(&body),
                    Some("application/json"),
                    &[],
                )
                .await;
            if answer.status != StatusCode::UNAUTHORIZED {
                wrong.push(format!(
                    "{method} {path} with token {token:?}: {} {}",
                    answer.status,
                    answer.message()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A caller that may not use a route gets 404 or 403 whatever its body: over the limit,
/// malformed, or of a type the route does not take.
#[tokio::test]
async fn a_caller_that_may_not_send_a_body_is_refused_before_it_is_read() {
    let app = shop().await;
    app.boundary("other").await;
    let developer = app.token("developer", Some("shop")).await;
    let admin_of_shop = app.token("boundary-admin", Some("shop")).await;
    let stranger = app.token("boundary-admin", Some("other")).await;
    let mut cases: Vec<(&str, Method, &str, usize, StatusCode)> = Vec::new();
    for (method, path, size) in body_routes() {
        let admin_only = path == "/v1/boundaries" || path.starts_with("/v1/clusters/");
        let editor_only = admin_only
            || path == "/v1/apply"
            || path == "/v1/tokens"
            || path.contains("/policies/")
            || path.contains("/namespaces/");
        let in_shop = path.starts_with("/v1/boundaries/shop/");
        if editor_only {
            cases.push((
                &developer,
                method.clone(),
                path,
                size,
                StatusCode::FORBIDDEN,
            ));
        }
        if admin_only {
            cases.push((
                &admin_of_shop,
                method.clone(),
                path,
                size,
                StatusCode::FORBIDDEN,
            ));
        }
        if in_shop {
            cases.push((&stranger, method.clone(), path, size, StatusCode::NOT_FOUND));
        }
    }
    let mut wrong = Vec::new();
    for (token, method, path, size, status) in cases {
        for (body, content_type) in [
            (big_body(size), "application/json"),
            ("{\"name\": ".to_owned(), "application/json"),
            ("[1, 2]".to_owned(), "application/json"),
            ("name=x".to_owned(), "application/x-www-form-urlencoded"),
        ] {
            let answer = app
                .send_body(method.clone(), path, token, &body, content_type)
                .await;
            if answer.status != status {
                wrong.push(format!(
                    "{method} {path} ({} bytes of {content_type}): {} {}, expected {status}",
                    body.len(),
                    answer.status,
                    answer.message()
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A body trickled a few bytes at a time is cut when the body limit has passed since the
/// handler began reading it, however steadily bytes arrive: 400 naming the limit (README
/// "Limits"), well before the request's total limit (which would be a 503).
#[tokio::test]
async fn a_trickled_body_is_cut_at_the_body_limit_with_a_400() {
    let app = TestApp::sqlite().await;
    let limits = palisade_server::Limits {
        header: Duration::from_secs(2),
        body: Duration::from_secs(1),
        request: Duration::from_secs(4),
        ..palisade_server::Limits::default()
    };
    let (base, stop) = listen(&app, limits).await;
    let address = base.trim_start_matches("http://").to_owned();
    let stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut reader, mut writer) = stream.into_split();
    let head = format!(
        "POST /v1/boundaries HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{{\"name\": \"",
        app.admin
    );
    writer.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    // One byte every 100 ms: never idle for long, never done within a second.
    let trickle = tokio::spawn(async move {
        for _ in 0..100 {
            if writer.write_all(b"x").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut seen = Vec::new();
    let closed = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(n) => seen.extend_from_slice(&buffer[..n]),
            }
        }
    })
    .await;
    let elapsed = started.elapsed();
    trickle.abort();
    let _ = stop.send(());
    assert!(closed.is_ok(), "the connection stayed open");
    let text = String::from_utf8_lossy(&seen);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    assert!(head.starts_with("HTTP/1.1 400 "), "{text}");
    let body: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(
        body,
        json!({"error": {"code": "invalid_request",
            "message": "the body could not be read whole: it did not arrive within 1 s"}})
    );
    assert!(
        elapsed >= Duration::from_secs(1) && elapsed < Duration::from_secs(3),
        "answered after {elapsed:?}"
    );
}

/// Every list pages with its own continue tokens and refuses any other `continue`: text it
/// never issued (even text shaped like one of its keys) and a token of another list are 400
/// naming `/continue`.
#[tokio::test]
async fn every_list_refuses_a_continue_it_did_not_issue() {
    let app = TestApp::sqlite().await;
    for boundary in ["other", "shop"] {
        app.boundary(boundary).await;
    }
    // Resources first: the policies then grandfather them.
    for i in 0..2 {
        let wanted = json!({"type": "postgresql", "name": format!("db{i}"), "plan": "large"});
        let answer = app.admin_create(wanted).await;
        assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    }
    for i in 0..2 {
        app.token("developer", Some("shop")).await;
        app.policy("shop", &format!("p{i}"), common::plans(&["small"]))
            .await;
        app.policy("shop", "p0", common::plans(&["medium", "small"][i..]))
            .await;
        let cluster = format!("c{i}");
        let answer = app.put_cluster(&cluster, KUBECONFIG).await;
        assert!(answer.status.is_success(), "{answer:?}");
        let answer = app.attach("shop", &cluster).await;
        assert!(answer.status.is_success(), "{answer:?}");
    }
    // Each list holds two items at least, so that `limit=1` issues a token. The grandfathered
    // resources are a view of the resource list: they share its tokens.
    let lists = [
        ("/v1/boundaries", "boundaries"),
        ("/v1/boundaries/shop/policies", "policies"),
        ("/v1/boundaries/shop/policies/p0/history", "history"),
        ("/v1/boundaries/shop/resources", "resources"),
        (
            "/v1/boundaries/shop/resources?grandfathered=true",
            "resources",
        ),
        ("/v1/tokens", "tokens"),
        ("/v1/clusters", "clusters"),
        ("/v1/boundaries/shop/clusters", "attached clusters"),
    ];
    let join = |list: &str, query: &str| {
        let separator = if list.contains('?') { '&' } else { '?' };
        format!("{list}{separator}{query}")
    };
    let mut issued = Vec::new();
    for (list, kind) in lists {
        let first = app.admin_get(&join(list, "limit=1")).await;
        assert_eq!(first.status, StatusCode::OK, "{list}: {first:?}");
        let token = first.body["continue"].as_str().unwrap().to_owned();
        let next = app
            .admin_get(&join(list, &format!("limit=1&continue={token}")))
            .await;
        assert_eq!(next.status, StatusCode::OK, "{list}: {next:?}");
        assert_ne!(next.body["items"], first.body["items"], "{list}");
        issued.push((kind, token));
    }
    // The namespace list is empty here: it refuses a bad token all the same.
    let mut wrong = Vec::new();
    for (list, kind) in lists
        .into_iter()
        .chain([("/v1/boundaries/shop/namespaces", "namespaces")])
    {
        let mut bad: Vec<String> = [
            "not-a-key",
            "shop",
            "p0",
            "postgresql/db0",
            "0000000000",
            "c0",
            "c0/web",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        // The tokens other lists issued.
        bad.extend(
            issued
                .iter()
                .filter(|(other, _)| *other != kind)
                .map(|(_, token)| token.clone()),
        );
        for token in bad {
            let path = join(list, &format!("continue={token}"));
            let answer = app.admin_get(&path).await;
            if answer.status != StatusCode::BAD_REQUEST
                || answer.message() != "/continue: is not a continue token of this list"
            {
                wrong.push(format!("{path}: {} {}", answer.status, answer.message()));
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// A 400 about a body's shape says it in words, never in serde's: no Rust type, no `struct`,
/// `enum`, `variant` or `expected ... with N elements`; it starts with the field's pointer or
/// with `the body`.
fn wordy(message: &str) -> Result<(), String> {
    let serde = regex::Regex::new(
        r"(?i)\bstruct\b|\benum\b|variant|with \d+ elements?|invalid type|invalid length|`",
    )
    .unwrap();
    let camel = regex::Regex::new(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b").unwrap();
    if !(message.starts_with('/') || message.starts_with("the body")) {
        return Err("does not start with a pointer or 'the body'".into());
    }
    if let Some(found) = serde.find(message) {
        return Err(format!("says '{}'", found.as_str()));
    }
    // `BoundaryPolicy` is the kind users write; any other CamelCase word is a Rust type.
    if let Some(found) = camel
        .find_iter(message)
        .find(|m| m.as_str() != "BoundaryPolicy")
    {
        return Err(format!("names '{}'", found.as_str()));
    }
    Ok(())
}

/// A body with `@` where a bad value goes, and the bad values that are valid there.
type Template = (&'static str, &'static [&'static str]);

/// Every body that is not the object a route takes, at the top and at every nested object,
/// is a 400 in words.
#[tokio::test]
async fn a_body_of_the_wrong_shape_is_refused_in_words() {
    let app = shop().await;
    let answer = app.admin_create(postgresql("db", "small")).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let bad = [
        "[]",
        "[1,2]",
        "\"x\"",
        "1",
        "null",
        "true",
        "[\"x1\"]",
        "[null,null,[]]",
    ];
    // Where a nested value must be an object, an array or a scalar of another kind (`@` is
    // replaced by each bad value but those that are valid there).
    let json_routes: Vec<(Method, &str, Vec<Template>)> = vec![
        (
            Method::POST,
            "/v1/boundaries",
            vec![("@", &[]), (r#"{"name": @}"#, &["\"x\""])],
        ),
        (
            Method::PUT,
            "/v1/boundaries/shop/policies/p",
            vec![
                ("@", &[]),
                (r#"{"rules": @}"#, &[]),
                (r#"{"rules": [@]}"#, &[]),
                (r#"{"rules": [{"allowedComputePlans": @}]}"#, &[]),
                (r#"{"rules": [{"requiredLabels": {"labels": [@]}}]}"#, &[]),
                (r#"{"rules": [{"disallowLatestTag": @}]}"#, &["null"]),
                (
                    r#"{"mode": @, "rules": [{"disallowLatestTag": {}}]}"#,
                    &["null"],
                ),
                (
                    r#"{"scope": @, "rules": [{"disallowLatestTag": {}}]}"#,
                    &["null"],
                ),
            ],
        ),
        (
            Method::POST,
            "/v1/boundaries/shop/policies/p/preview",
            vec![
                ("@", &[]),
                (r#"{"rules": [{"allowedRegistries": @}]}"#, &[]),
            ],
        ),
        (
            Method::POST,
            "/v1/boundaries/shop/resources",
            vec![
                ("@", &[]),
                (
                    r#"{"type": "container_instance", "name": "b", "components": [@]}"#,
                    &[],
                ),
                (
                    r#"{"type": "app", "name": "w", "plan": "small", "image": "i", "labels": @}"#,
                    &["null"],
                ),
            ],
        ),
        (
            Method::PATCH,
            "/v1/boundaries/shop/resources/postgresql/db",
            vec![("@", &[]), (r#"{"plan": @}"#, &[])],
        ),
        (
            Method::POST,
            "/v1/tokens",
            vec![("@", &[]), (r#"{"role": @}"#, &[])],
        ),
        (
            Method::PUT,
            "/v1/clusters/c",
            vec![("@", &[]), (r#"{"kubeconfig": @}"#, &[])],
        ),
        (
            Method::PUT,
            "/v1/boundaries/shop/clusters/c/namespaces/ns",
            vec![("@", &[]), (r#"{"adopt": @}"#, &["true", "null"])],
        ),
    ];
    let mut wrong = Vec::new();
    let mut check = |what: String, answer: common::Answer| {
        if answer.status != StatusCode::BAD_REQUEST {
            wrong.push(format!("{what}: {} {}", answer.status, answer.message()));
        } else if let Err(why) = wordy(answer.message()) {
            wrong.push(format!("{what}: {why}: {}", answer.message()));
        }
    };
    for (method, path, templates) in &json_routes {
        for (template, valid) in templates {
            for value in bad {
                if valid.contains(&value) {
                    continue;
                }
                let body = template.replace('@', value);
                let answer = app
                    .send_body(method.clone(), path, &app.admin, &body, "application/json")
                    .await;
                check(format!("{method} {path} {body}"), answer);
            }
        }
    }
    // A kubeconfig's text that is not a mapping.
    for value in bad {
        let answer = app.put_cluster("c", value).await;
        check(
            format!("PUT /v1/clusters/c kubeconfig text {value}"),
            answer,
        );
    }
    // Apply: YAML documents, whole and nested.
    let documents = [
        "@",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: @\nspec: {rules: [{disallowLatestTag: {}}]}\n",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec: @\n",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec: {rules: [@]}\n",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop, labels: @}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, boundary: shop}\nspec: {mode: @, rules: [{disallowLatestTag: {}}]}\n",
    ];
    for template in documents {
        for value in bad {
            // Optional fields may be null (and a document of null alone is no document).
            if value == "null" && (template.contains("mode: @") || template.contains("labels: @")) {
                continue;
            }
            let body = template.replace('@', value);
            let answer = apply(&app, &app.admin, &body, true).await;
            check(format!("POST /v1/apply {body:?}"), answer);
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// At the connection cap, the connection idle the longest makes room: a client holding idle
/// sockets (more than the cap) cannot keep `/healthz` out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_make_room_at_the_cap() {
    let app = TestApp::sqlite().await;
    let limits = palisade_server::Limits {
        header: Duration::from_secs(60),
        max_connections: 10,
        ..palisade_server::Limits::default()
    };
    let (base, stop) = listen(&app, limits).await;
    let address = base.trim_start_matches("http://").to_owned();
    // 40 sockets that never send anything (each would wait the 60 s header limit).
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(tokio::net::TcpStream::connect(&address).await.unwrap());
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    for _ in 0..20 {
        let answer = client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .expect("/healthz answers beside 40 idle sockets and a cap of 10");
        assert_eq!(answer.status(), StatusCode::OK);
    }
    // The oldest idle sockets were closed to make room: reading them ends.
    let mut closed = 0;
    for mut socket in idle {
        let mut byte = [0u8; 1];
        if let Ok(Ok(0)) =
            tokio::time::timeout(Duration::from_millis(200), socket.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    assert!(closed >= 30, "only {closed} of 40 idle sockets were closed");
    stop.send(()).ok();
}

/// At the connection cap, clients trickling request bodies (slow posts without a token, to a
/// form that reads its body before anything else, as the portal's sign-in does) make room too:
/// the one sending the longest is closed, so `/healthz` and `/readyz` are always answered; a
/// request that has arrived whole is answered, not closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_make_room_for_probes_at_the_cap() {
    let app = TestApp::sqlite().await;
    let limits = palisade_server::Limits {
        header: Duration::from_secs(60),
        body: Duration::from_secs(60),
        max_connections: 10,
        ..palisade_server::Limits::default()
    };
    let router = app.router.clone().route(
        "/slow-form",
        axum::routing::post(|body: String| async move { format!("{} bytes", body.len()) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(palisade_server::serve_on(
        listener,
        router,
        async {
            let _ = stopped.await;
        },
        limits,
    ));
    // 40 posts whose heads arrive whole and whose bodies stop after a byte (each would hold
    // its connection for the 60 s body limit).
    let mut slow = Vec::new();
    for _ in 0..40 {
        let mut socket = tokio::net::TcpStream::connect(&address).await.unwrap();
        socket
            .write_all(
                b"POST /slow-form HTTP/1.1\r\nHost: x\r\n\
                  Content-Type: application/x-www-form-urlencoded\r\n\
                  Content-Length: 1000\r\n\r\nt",
            )
            .await
            .unwrap();
        slow.push(socket);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A new connection per probe, as the kubelet makes them (an idle kept-alive connection
    // may be closed at the cap, as HTTP allows).
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let mut failed = Vec::new();
    for round in 0..20 {
        let path = if round % 2 == 0 {
            "/healthz"
        } else {
            "/readyz"
        };
        match client.get(format!("http://{address}{path}")).send().await {
            Ok(answer) if answer.status() == StatusCode::OK => {}
            other => failed.push(format!("{path}: {other:?}")),
        }
        // More slow posts keep coming meanwhile.
        if let Ok(mut socket) = tokio::net::TcpStream::connect(&address).await {
            let head = b"POST /slow-form HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nt";
            let _ = socket.write_all(head).await;
            slow.push(socket);
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 20 probes failed beside 40+ slow posts and a cap of 10: {failed:#?}",
        failed.len()
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    // A post that arrives whole is answered beside them.
    let answer = client
        .post(format!("http://{address}/slow-form"))
        .body("token=x")
        .send()
        .await
        .expect("a whole post is answered");
    assert_eq!(answer.text().await.unwrap(), "7 bytes");
    // The slow posts sending the longest were closed to make room: reading them ends.
    let mut closed = 0;
    for mut socket in slow {
        let mut byte = [0u8; 1];
        // Closed: the end of the stream, or a reset (the server had unread bytes).
        if let Ok(Ok(0) | Err(_)) =
            tokio::time::timeout(Duration::from_millis(100), socket.read(&mut byte)).await
        {
            closed += 1;
        }
    }
    assert!(closed >= 30, "only {closed} slow posts were closed");
    stop.send(()).ok();
}
