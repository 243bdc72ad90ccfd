//! Fail closed (SPEC 2.4): when the boundary's policies cannot be read, every create and plan
//! move gets 503 `compute_plan_policy_unavailable` with `Retry-After: 5`, nothing is written,
//! and the same request succeeds after recovery. Proven on a SQLite store whose policy table
//! becomes unreadable, on a stored policy that cannot be decoded, and on a real PostgreSQL
//! server stopped and restarted mid-run.

use crate::common::{app_resource, plans, postgresql, shop, Answer, TestApp};
use axum::http::{Method, StatusCode};
use serde_json::json;
use sqlx::Connection;

fn assert_unavailable(answer: &Answer) {
    assert_eq!(answer.status, StatusCode::SERVICE_UNAVAILABLE, "{answer:?}");
    assert_eq!(
        answer.body,
        json!({"error": {"code": "compute_plan_policy_unavailable",
            "message": "The boundary's policies could not be read; the request was not applied. Try again shortly."}})
    );
    assert_eq!(answer.headers.get("retry-after").unwrap(), "5");
}

async fn resource_names(app: &TestApp) -> Vec<String> {
    let list = app.admin_get("/v1/boundaries/shop/resources").await;
    assert_eq!(list.status, StatusCode::OK, "{list:?}");
    list.items("name").into_iter().map(str::to_owned).collect()
}

/// A second connection to the same SQLite file, as an operator (or a failing disk) would have.
async fn side_connection(app: &TestApp) -> sqlx::SqliteConnection {
    sqlx::SqliteConnection::connect(&app.url).await.unwrap()
}

/// Runs `sql` on the side connection `side`.
async fn execute(side: &mut sqlx::SqliteConnection, sql: &str) {
    sqlx::query(sql).execute(side).await.unwrap();
}

/// Makes the policy table unreadable (renamed) through a side connection, which it answers.
async fn hide_policies(app: &TestApp) -> sqlx::SqliteConnection {
    let mut side = side_connection(app).await;
    execute(
        &mut side,
        "ALTER TABLE policies RENAME TO policies_unreadable",
    )
    .await;
    side
}

/// The admin's PATCH of `change` to the app `old` that `setup` creates.
async fn patch_old(app: &TestApp, change: serde_json::Value) -> Answer {
    app.admin(
        Method::PATCH,
        "/v1/boundaries/shop/resources/app/old",
        Some(change),
    )
    .await
}

async fn setup() -> TestApp {
    let app = shop().await;
    app.policy("shop", "size-limits", plans(&["small", "medium"]))
        .await;
    let answer = app.admin_create(app_resource("old", "small")).await;
    assert_eq!(answer.status, StatusCode::CREATED);
    app
}

#[tokio::test]
async fn an_unreadable_policy_table_refuses_creates_and_moves() {
    let app = setup().await;
    let mut side = hide_policies(&app).await;
    // The policies changed before they became unreadable (as the database's trigger counts a
    // policy write): the decisions palisade made from them before no longer apply.
    execute(
        &mut side,
        "UPDATE boundaries SET policies_version = policies_version + 1",
    )
    .await;
    let create = app_resource("web", "small");
    assert_unavailable(&app.admin_create(create.clone()).await);
    assert_unavailable(&patch_old(&app, json!({"plan": "medium"})).await);
    assert_unavailable(&app.admin_get("/v1/boundaries/shop/plans?type=app").await);
    // Changes that do not move a plan do not need the policies.
    let answer = patch_old(&app, json!({"image": "j"})).await;
    assert_eq!(answer.status, StatusCode::OK);
    // Functions are still created, with the warning that says the plan was not compared.
    let wanted = json!({"type": "function", "name": "f", "plan": "xlarge", "image": "i"});
    let answer = app.admin_create(wanted).await;
    answer.assert_created_warnings(&[
        r#"299 palisade "The boundary's policies could not be read; the plan was not compared with them""#,
    ]);
    assert_eq!(
        resource_names(&app).await,
        vec!["old".to_owned(), "f".to_owned()]
    );
    // Recovery: the same request succeeds.
    execute(
        &mut side,
        "ALTER TABLE policies_unreadable RENAME TO policies",
    )
    .await;
    let answer = app.admin_create(create).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let answer = patch_old(&app, json!({"plan": "medium"})).await;
    assert_eq!(answer.status, StatusCode::OK);
}

/// A create checked against policies that have not changed since palisade last read them
/// (the same `policies_version`) is decided from what it read then: it needs no read, so an
/// unreadable policy table does not stop it; the plan picker, which reads, answers 503.
#[tokio::test]
async fn unchanged_policies_are_not_read_again() {
    let app = setup().await;
    let _side = hide_policies(&app).await;
    let allowed = app_resource("web", "small");
    let answer = app.admin_create(allowed).await;
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    let denied = app_resource("big", "large");
    let answer = app.admin_create(denied).await;
    assert_eq!(
        answer.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{answer:?}"
    );
    assert_eq!(answer.body["error"]["denied_by"], json!(["size-limits"]));
    assert_unavailable(&app.admin_get("/v1/boundaries/shop/plans?type=app").await);
}

#[tokio::test]
async fn a_stored_policy_that_cannot_be_decoded_refuses_creates() {
    let app = setup().await;
    let mut side = side_connection(&app).await;
    execute(&mut side, "UPDATE policies SET spec_json = '{\"rules\": [{\"allowedComputePlans\": {\"plans\": [\"BAD PLAN\"]}}]}'").await;
    let create = json!({"type": "valkey", "name": "cache", "plan": "small"});
    assert_unavailable(&app.admin_create(create.clone()).await);
    assert_eq!(resource_names(&app).await, vec!["old".to_owned()]);
    // The admin repairs the policy; the same request succeeds.
    app.policy("shop", "size-limits", plans(&["small"])).await;
    let answer = app.admin_create(create).await;
    assert_eq!(answer.status, StatusCode::CREATED);
}

#[tokio::test]
async fn a_stopped_postgresql_refuses_creates_until_it_is_back() {
    let mut server = tokio::task::spawn_blocking(palisade_testkit::postgres::TempPostgres::start)
        .await
        .unwrap()
        .expect("an own PostgreSQL cluster starts");
    let app = TestApp::on(server.url(), tempfile::tempdir().unwrap()).await;
    app.boundary("shop").await;
    app.policy("shop", "size-limits", plans(&["small", "medium"]))
        .await;
    let create = postgresql("db", "small");

    server = tokio::task::spawn_blocking(move || {
        server.stop().expect("stop");
        server
    })
    .await
    .unwrap();
    let started = std::time::Instant::now();
    assert_unavailable(&app.admin_create(create.clone()).await);
    let elapsed = started.elapsed();
    assert_unavailable(
        &app.admin_get("/v1/boundaries/shop/plans?type=postgresql")
            .await,
    );
    eprintln!("503 while PostgreSQL was stopped, answered in {elapsed:?}");

    server = tokio::task::spawn_blocking(move || {
        server.restart().expect("restart");
        server
    })
    .await
    .unwrap();
    // The pool reconnects; the same request now succeeds, and it is the only resource.
    let mut answer = app.admin_create(create.clone()).await;
    for _ in 0..50 {
        if answer.status != StatusCode::SERVICE_UNAVAILABLE {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        answer = app.admin_create(create.clone()).await;
    }
    assert_eq!(answer.status, StatusCode::CREATED, "{answer:?}");
    assert_eq!(resource_names(&app).await, vec!["db".to_owned()]);
    drop(server);
}
