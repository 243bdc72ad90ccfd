//! Exceptions through the HTTP API (SPEC 7): a developer's request, an approval by another,
//! the compute-plan check letting exactly the listed resource and plan past exactly the
//! excepted policy until `expiresAt`, with the warning; validation naming the field; roles.

use std::time::Duration;

use crate::common::{plans, postgresql, Answer, TestApp};
use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

async fn shop() -> TestApp {
    shop_on(TestApp::sqlite().await).await
}

async fn shop_on(app: TestApp) -> TestApp {
    app.boundary("shop").await;
    app.policy("shop", "size", plans(&["small"])).await;
    app
}

/// `expiresAt` `seconds` from now, as RFC 3339.
fn in_seconds(seconds: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(seconds))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn spec(resource: &str, expires_at: &str) -> Value {
    json!({"policy": "size", "resources": [resource], "plans": ["large"],
        "expiresAt": expires_at, "reason": "moving to small, ticket OPS-1234"})
}

async fn put(app: &TestApp, token: &str, name: &str, body: Value) -> Answer {
    app.put(
        &format!("/v1/boundaries/shop/exceptions/{name}"),
        token,
        body,
    )
    .await
}

/// `POST .../approve`, with `If-Match: <etag>` when given.
async fn approve(app: &TestApp, token: &str, name: &str, etag: Option<&str>) -> Answer {
    let quoted = etag.map(|e| {
        if e == "*" {
            e.to_owned()
        } else {
            format!("\"{e}\"")
        }
    });
    let headers: Vec<(&str, &str)> = quoted.iter().map(|e| ("if-match", e.as_str())).collect();
    app.raw(
        Method::POST,
        &format!("/v1/boundaries/shop/exceptions/{name}/approve"),
        Some(token),
        None,
        None,
        &headers,
    )
    .await
}

fn app_body(name: &str, plan: &str) -> Value {
    json!({"type": "app", "name": name, "plan": plan, "image": "ghcr.io/acme/web:1.4"})
}

#[tokio::test]
async fn a_request_applies_nothing_until_another_approves_it_then_exactly_its_resource_passes() {
    request_and_approval(shop().await).await;
}

#[tokio::test]
async fn a_request_and_its_approval_on_postgres() {
    request_and_approval(shop_on(TestApp::postgres().await).await).await;
}

async fn request_and_approval(app: TestApp) {
    let dev = app.token("developer", Some("shop")).await;
    let boundary_admin = app.token("boundary-admin", Some("shop")).await;
    let expires = in_seconds(3600);

    let requested = put(&app, &dev, "legacy-reports", spec("app/reports", &expires)).await;
    assert_eq!(requested.status, StatusCode::CREATED, "{requested:?}");
    assert_eq!(requested.body["status"], "requested");
    assert!(requested.body["requested_by"]
        .as_str()
        .unwrap()
        .ends_with("(developer)"));
    assert!(requested.body.get("approved_by").is_none());

    // A request lets nothing past.
    let refused = app.create("shop", &dev, app_body("reports", "large")).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.body["error"]["denied_by"], json!(["size"]));

    // A developer cannot approve.
    let path = "/v1/boundaries/shop/exceptions/legacy-reports/approve";
    let forbidden = app.call(Method::POST, path, Some(&dev), None).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN);

    let etag = requested.body["etag"].as_str().unwrap().to_owned();
    let approved = approve(&app, &boundary_admin, "legacy-reports", Some(&etag)).await;
    assert_eq!(approved.status, StatusCode::OK, "{approved:?}");
    assert_eq!(approved.body["status"], "active");
    assert!(approved.body["approved_by"]
        .as_str()
        .unwrap()
        .ends_with("(boundary-admin)"));
    assert!(approved.body["requested_by"]
        .as_str()
        .unwrap()
        .ends_with("(developer)"));

    // Exactly the listed resource and plan pass, with the warning.
    let created = app.create("shop", &dev, app_body("reports", "large")).await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    assert_eq!(
        created.warnings(),
        [format!(
            "299 palisade \"Compute plan 'large' is allowed by exception 'legacy-reports' until {expires}\""
        )]
    );
    let other = app.create("shop", &dev, app_body("web", "large")).await;
    other.assert_error(StatusCode::UNPROCESSABLE_ENTITY, "Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small.");
    let postgres = app
        .create("shop", &dev, postgresql("reports", "large"))
        .await;
    assert_eq!(postgres.status, StatusCode::UNPROCESSABLE_ENTITY);

    // Another policy still denies: the exception lets it past `size` only.
    app.policy("shop", "cost", plans(&["small", "medium"]))
        .await;
    let patched = app
        .delete("/v1/boundaries/shop/resources/app/reports", &dev)
        .await;
    assert_eq!(patched.status, StatusCode::NO_CONTENT);
    let refused = app.create("shop", &dev, app_body("reports", "large")).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(refused.body["error"]["denied_by"], json!(["cost"]));

    // The history names who asked and who approved.
    let history = app
        .get(
            "/v1/boundaries/shop/exceptions/legacy-reports/history",
            &dev,
        )
        .await;
    assert_eq!(history.items("action"), ["put", "approve"]);

    // A developer's change makes it a request again.
    let changed = put(
        &app,
        &dev,
        "legacy-reports",
        spec("app/reports", &in_seconds(7200)),
    )
    .await;
    assert_eq!(changed.status, StatusCode::OK, "{changed:?}");
    assert_eq!(changed.body["status"], "requested");
}

#[tokio::test]
async fn a_plan_move_is_excepted_and_the_api_stops_at_expires_at() {
    plan_move_and_expiry(shop().await).await;
}

/// PostgreSQL creates in one statement when the guard knows the policies' version: the
/// exception is part of that version.
#[tokio::test]
async fn on_postgres_too() {
    plan_move_and_expiry(shop_on(TestApp::postgres().await).await).await;
}

async fn plan_move_and_expiry(app: TestApp) {
    let dev = app.token("developer", Some("shop")).await;
    let created = app.create("shop", &dev, app_body("reports", "small")).await;
    assert_eq!(created.status, StatusCode::CREATED);
    // A create decided before the exception existed: its version is known to the guard.
    let refused = app.create("shop", &dev, app_body("fresh", "large")).await;
    assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY);
    let expires = in_seconds(3);
    let saved = put(&app, &app.admin, "short", spec("app/reports", &expires)).await;
    assert_eq!(saved.status, StatusCode::CREATED, "{saved:?}");
    assert_eq!(saved.body["status"], "active");
    let path = "/v1/boundaries/shop/resources/app/reports";
    let moved = app.patch(path, &dev, json!({"plan": "large"})).await;
    assert_eq!(moved.status, StatusCode::OK, "{moved:?}");
    assert_eq!(moved.warnings().len(), 1, "{moved:?}");
    let fresh = app.create("shop", &dev, app_body("fresh", "large")).await;
    assert_eq!(
        fresh.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "not listed: {fresh:?}"
    );
    // Back to small, then wait for the end.
    let back = app.patch(path, &dev, json!({"plan": "small"})).await;
    assert_eq!(back.status, StatusCode::OK);
    let end = chrono::DateTime::parse_from_rfc3339(&expires).unwrap();
    let wait = (end.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(20)).await;
    let refused = app.patch(path, &dev, json!({"plan": "large"})).await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{refused:?}"
    );
    let shown = app.get("/v1/boundaries/shop/exceptions/short", &dev).await;
    assert_eq!(shown.body["status"], "expired");
    // Approving an ended request is refused in words.
    let dev_request = put(&app, &dev, "late", spec("app/reports", &in_seconds(1))).await;
    assert_eq!(dev_request.status, StatusCode::CREATED);
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let etag = dev_request.body["etag"].as_str().unwrap().to_owned();
    let late = approve(&app, &app.admin, "late", Some(&etag)).await;
    assert_eq!(late.status, StatusCode::CONFLICT, "{late:?}");
}

#[tokio::test]
async fn refusals_name_the_field_and_roles_hold() {
    let app = shop().await;
    let expires = in_seconds(3600);
    let cases = [
        (
            json!({"policy": "size", "resources": ["app/reports"], "expiresAt": expires, "reason": "r"}),
            "/plans: is required with resources: the plans those resources may use",
        ),
        (
            spec("app/reports", "2020-01-01T00:00:00Z"),
            "/expiresAt: must be in the future, got '2020-01-01T00:00:00Z'",
        ),
        (
            spec("app/reports", &in_seconds(91 * 86_400)),
            "/expiresAt: must be at most 90 days ahead (serve --max-exception-days)",
        ),
        (
            json!({"policy": "size", "match": {"clusters": ["prod-1"]}, "expiresAt": expires, "reason": "r"}),
            "/match: must name namespaces, labels or images",
        ),
        (
            json!({"policy": "size", "resources": ["app/reports"], "plans": ["large"], "expiresAt": expires, "reason": ""}),
            "/reason: must be 1 to 500 characters, got 0",
        ),
    ];
    for (body, expected) in cases {
        let answer = put(&app, &app.admin, "x", body).await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{answer:?}");
        assert_eq!(answer.code(), "invalid_request");
        assert!(
            answer.message().starts_with(expected),
            "{}",
            answer.message()
        );
    }
    let bad_name = put(
        &app,
        &app.admin,
        "Not_A_Name",
        spec("app/reports", &expires),
    )
    .await;
    bad_name.assert_error_starts(StatusCode::BAD_REQUEST, "/path/exception: ");

    // Another boundary's developer sees nothing; a developer cannot delete.
    app.boundary("other").await;
    let stranger = app.token("developer", Some("other")).await;
    let saved = put(&app, &app.admin, "legacy", spec("app/reports", &expires)).await;
    assert_eq!(saved.status, StatusCode::CREATED);
    let hidden = app
        .get("/v1/boundaries/shop/exceptions/legacy", &stranger)
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    let dev = app.token("developer", Some("shop")).await;
    let delete = app
        .delete("/v1/boundaries/shop/exceptions/legacy", &dev)
        .await;
    assert_eq!(delete.status, StatusCode::FORBIDDEN);
    let list = app.get("/v1/boundaries/shop/exceptions", &dev).await;
    assert_eq!(list.status, StatusCode::OK);
    assert_eq!(list.body["items"][0]["name"], "legacy");
    // A policy the boundary does not have yet is a warning, not a refusal.
    let ahead = put(
        &app,
        &app.admin,
        "ahead",
        json!({"policy": "later", "resources": ["app/reports"],
        "plans": ["large"], "expiresAt": expires, "reason": "r"}),
    )
    .await;
    assert_eq!(ahead.status, StatusCode::CREATED);
    assert_eq!(
        ahead.body["warnings"],
        json!(["boundary 'shop' has no policy 'later' (yet): the exception applies once it has"])
    );
    let delete = app
        .delete("/v1/boundaries/shop/exceptions/legacy", &app.admin)
        .await;
    assert_eq!(delete.status, StatusCode::NO_CONTENT);
}

/// SPEC 7 v3.2 bounds: at most 64 entries per list, a spec of at most 16 KiB (a `PUT` body and
/// each applied document), a reason without control characters; each a 400 naming the field.
#[tokio::test]
async fn bounds_name_the_field() {
    let app = shop().await;
    let expires = in_seconds(3600);
    let namespaces: Vec<String> = (0..65).map(|i| format!("ns-{i}")).collect();
    let images: Vec<String> = (0..65).map(|i| format!("ghcr.io/acme/a:{i}")).collect();
    let cases = [
        (
            json!({"policy": "size", "match": {"namespaces": namespaces}, "expiresAt": expires, "reason": "r"}),
            "/match/namespaces: must have at most 64 entries, got 65",
        ),
        (
            json!({"policy": "size", "match": {"namespaces": ["web"], "images": images}, "expiresAt": expires, "reason": "r"}),
            "/match/images: must have at most 64 entries, got 65",
        ),
        (
            json!({"policy": "size", "match": {"namespaces": ["web"]}, "expiresAt": expires,
                "reason": "OPS-1234\u{7}"}),
            "/reason: must contain no control characters, found U+0007 at character 9",
        ),
    ];
    for (body, expected) in cases {
        let answer = put(&app, &app.admin, "x", body).await;
        answer.assert_refusal(StatusCode::BAD_REQUEST, "invalid_request", expected);
    }
    let big = json!({"policy": "size", "match": {"namespaces": ["web"]}, "expiresAt": expires,
        "reason": "r", "padding": "x".repeat(16 * 1024)});
    let size = big.to_string().len();
    let answer = put(&app, &app.admin, "x", big).await;
    answer.assert_error(
        StatusCode::BAD_REQUEST,
        format!(
            "the body must be at most 16384 bytes (16 KiB) for an exception's spec, got {size}"
        ),
    );
    // In an apply, the document's spec.
    let labels: String = (0..65).map(|i| format!("k{i}: v, ")).collect();
    let document = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryException\n\
         metadata: {{name: x, boundary: shop}}\n\
         spec: {{policy: size, match: {{labels: {{{labels}}}}}, expiresAt: '{expires}', reason: r}}\n"
    );
    let applied = app.post_yaml("/v1/apply", &app.admin, &document).await;
    applied.assert_error(
        StatusCode::BAD_REQUEST,
        "/0/spec/match/labels: must have at most 64 entries, got 65",
    );
    let document = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryException\n\
         metadata: {{name: x, boundary: shop}}\n\
         spec: {{policy: size, match: {{namespaces: [web]}}, expiresAt: '{expires}', reason: '{}'}}\n",
        "x".repeat(17 * 1024)
    );
    let applied = app.post_yaml("/v1/apply", &app.admin, &document).await;
    applied.assert_error_starts(
        StatusCode::BAD_REQUEST,
        "/0/spec: must be at most 16384 bytes (16 KiB) as JSON, got ",
    );
}

/// SPEC 7 v3.2: an approval approves what the approver read. Without `If-Match` it is a 400
/// naming the header (and `*` approves nothing read); with the etag of a spec changed since, a
/// 412; with the etag read, the approval.
#[tokio::test]
async fn an_approval_needs_the_etag_that_was_read() {
    let app = shop().await;
    let dev = app.token("developer", Some("shop")).await;
    let boundary_admin = app.token("boundary-admin", Some("shop")).await;
    let expires = in_seconds(3600);
    let requested = put(&app, &dev, "legacy", spec("app/reports", &expires)).await;
    assert_eq!(requested.status, StatusCode::CREATED);
    let read = requested.body["etag"].as_str().unwrap().to_owned();

    let bare = approve(&app, &boundary_admin, "legacy", None).await;
    bare.assert_refusal(StatusCode::BAD_REQUEST, "invalid_request", "/headers/If-Match: required: approve the etag you read (GET the exception and send its etag)");
    let star = approve(&app, &boundary_admin, "legacy", Some("*")).await;
    star.assert_error_starts(StatusCode::BAD_REQUEST, "/headers/If-Match: ");

    // The developer widens the request after the approver read it.
    let changed = put(&app, &dev, "legacy", spec("app/everything", &expires)).await;
    assert_eq!(changed.status, StatusCode::OK);
    let stale = approve(&app, &boundary_admin, "legacy", Some(&read)).await;
    assert_eq!(stale.status, StatusCode::PRECONDITION_FAILED, "{stale:?}");
    assert_eq!(stale.code(), "precondition_failed");
    let shown = app
        .get("/v1/boundaries/shop/exceptions/legacy", &boundary_admin)
        .await;
    assert_eq!(shown.body["status"], "requested", "nothing was approved");

    let etag = shown.body["etag"].as_str().unwrap().to_owned();
    let approved = approve(&app, &boundary_admin, "legacy", Some(&etag)).await;
    assert_eq!(approved.status, StatusCode::OK, "{approved:?}");
    assert_eq!(approved.body["status"], "active");
    assert_eq!(
        approved.body["spec"]["resources"],
        json!(["app/everything"])
    );

    // The history reads a page at a time: put, put, approve.
    let path = "/v1/boundaries/shop/exceptions/legacy/history";
    let first = app.get(&format!("{path}?limit=2"), &dev).await;
    assert_eq!(first.body["items"].as_array().map(Vec::len), Some(2));
    let token = first.body["continue"].as_str().unwrap().to_owned();
    let rest = app
        .get(&format!("{path}?limit=2&continue={token}"), &dev)
        .await;
    assert_eq!(rest.body["items"][0]["action"], "approve", "{rest:?}");
    assert!(rest.body.get("continue").is_none());
}

/// Pending requests count apart from the 100 exceptions a boundary may hold: at most 20 per
/// boundary (409 beyond, saying who can make room), they never take the room of approved
/// exceptions, and an admin or boundary-admin can always delete one.
#[tokio::test]
async fn pending_requests_are_bounded_apart_and_an_admin_can_delete_one() {
    let app = shop().await;
    let dev = app.token("developer", Some("shop")).await;
    let boundary_admin = app.token("boundary-admin", Some("shop")).await;
    let expires = in_seconds(3600);
    for i in 0..20 {
        let asked = put(
            &app,
            &dev,
            &format!("ask-{i}"),
            spec("app/reports", &expires),
        )
        .await;
        assert_eq!(asked.status, StatusCode::CREATED, "{asked:?}");
    }
    let refused = put(&app, &dev, "ask-20", spec("app/reports", &expires)).await;
    refused.assert_refusal(
        StatusCode::CONFLICT,
        "conflict",
        "boundary 'shop' holds 20 pending exception requests, the most it may hold: \
         an admin or boundary-admin of 'shop' must approve or delete one first",
    );
    // The requests take none of the approved exceptions' room.
    let saved = put(
        &app,
        &boundary_admin,
        "direct",
        spec("app/reports", &expires),
    )
    .await;
    assert_eq!(saved.status, StatusCode::CREATED, "{saved:?}");
    // A boundary-admin deletes a request; then there is room for another.
    let deleted = app
        .delete("/v1/boundaries/shop/exceptions/ask-0", &boundary_admin)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{deleted:?}");
    let asked = put(&app, &dev, "ask-20", spec("app/reports", &expires)).await;
    assert_eq!(asked.status, StatusCode::CREATED, "{asked:?}");
}

/// SPEC 7 v3.2: an applied `BoundaryException` whose `expiresAt` has passed is refused as new
/// or changed, but stored unchanged it is `unchanged` with a warning, and the apply's other
/// documents go through.
#[tokio::test]
async fn an_expired_document_stored_unchanged_does_not_block_an_apply() {
    let app = shop().await;
    let expires = in_seconds(1);
    let document = |name: &str, reason: &str| {
        format!(
            "apiVersion: palisade.dev/v1\nkind: BoundaryException\n\
             metadata: {{name: {name}, boundary: shop}}\n\
             spec: {{policy: size, resources: [app/reports], plans: [large], \
             expiresAt: '{expires}', reason: '{reason}'}}\n"
        )
    };
    let policy = |max: &str| {
        format!(
            "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\n\
             metadata: {{name: cost, boundary: shop}}\n\
             spec: {{rules: [{{allowedComputePlans: {{plans: [small, {max}]}}}}]}}\n"
        )
    };
    let apply = |body: String| {
        let app = &app;
        async move { app.post_yaml("/v1/apply", &app.admin, &body).await }
    };
    let saved = apply(document("legacy", "OPS-1234")).await;
    assert_eq!(saved.status, StatusCode::OK, "{saved:?}");
    let end = chrono::DateTime::parse_from_rfc3339(&expires).unwrap();
    let wait = (end.with_timezone(&chrono::Utc) - chrono::Utc::now())
        .to_std()
        .unwrap_or_default();
    tokio::time::sleep(wait + Duration::from_millis(50)).await;

    let again = apply(format!(
        "{}---\n{}",
        document("legacy", "OPS-1234"),
        policy("medium")
    ))
    .await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    assert_eq!(
        again.body["results"],
        json!([
            {"kind": "BoundaryException", "boundary": "shop", "name": "legacy", "action": "unchanged",
             "warnings": [format!("exception 'legacy' expired at {expires}")]},
            {"boundary": "shop", "name": "cost", "action": "created",
             "warnings": []},
        ])
    );
    // A dry run says the same.
    let dry = app
        .post_yaml(
            "/v1/apply?dry_run=true",
            &app.admin,
            &document("legacy", "OPS-1234"),
        )
        .await;
    assert_eq!(dry.status, StatusCode::OK, "{dry:?}");
    assert_eq!(dry.body["results"][0]["action"], "unchanged");

    // Changed, or new, it is refused, and nothing of the apply is written.
    let refusal = format!("/0/spec/expiresAt: must be in the future, got '{expires}'");
    for body in [
        document("legacy", "OPS-9999"),
        document("fresh", "OPS-1234"),
    ] {
        let refused = apply(format!("{body}---\n{}", policy("large"))).await;
        refused.assert_error(StatusCode::BAD_REQUEST, &refusal);
    }
    let cost = app.admin_get("/v1/boundaries/shop/policies/cost").await;
    assert_eq!(
        cost.body["spec"]["rules"][0]["allowedComputePlans"]["plans"],
        json!(["small", "medium"])
    );
}

/// A `match` of labels alone lets past anyone who may create objects in the boundary's
/// namespaces (they set the labels themselves): it saves, with a warning that says so, through
/// `PUT` and `apply`; a namespace or an image narrows it and the warning goes.
#[tokio::test]
async fn a_match_of_labels_alone_saves_with_a_warning() {
    let app = shop().await;
    let expires = in_seconds(3600);
    let warning = "exception 'legacy' matches objects by labels alone, which whoever creates an object sets: anyone who may create objects in the boundary's namespaces can be let past; name namespaces or images in match to narrow it";
    let labels_only = json!({"policy": "size", "match": {"labels": {"app": "legacy"}},
        "expiresAt": expires, "reason": "r"});
    let answer = put(&app, &app.admin, "legacy", labels_only).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(answer.body["warnings"], json!([warning]), "{answer:?}");
    for narrowed in [
        json!({"labels": {"app": "legacy"}, "namespaces": ["web"]}),
        json!({"labels": {"app": "legacy"}, "images": ["docker.io/library/nginx:1.27"]}),
    ] {
        let answer = put(
            &app,
            &app.admin,
            "legacy",
            json!({"policy": "size", "match": narrowed, "expiresAt": expires, "reason": "r"}),
        )
        .await;
        assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
        assert_eq!(answer.body["warnings"], json!([]), "{answer:?}");
    }
    let document = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {{name: legacy, boundary: shop}}\nspec:\n  policy: size\n  match: {{labels: {{app: legacy}}}}\n  expiresAt: \"{expires}\"\n  reason: r\n"
    );
    let answer = app.post_yaml("/v1/apply", &app.admin, &document).await;
    assert_eq!(answer.status, StatusCode::OK, "{answer:?}");
    assert_eq!(
        answer.body["results"][0]["warnings"],
        json!([warning]),
        "{answer:?}"
    );
}
