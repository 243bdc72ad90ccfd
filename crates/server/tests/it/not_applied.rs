//! "The request was not applied" means it (SPEC 2.4): while another connection holds the
//! store's write lock in cycles that end right around the policy deadline, a few clients
//! create resources with unique names. Every create answered 503 must have written nothing,
//! and the 503 must come by the deadline (counted, not asserted: wall-clock bounds flake).
//! SQLite: a second connection holding `BEGIN IMMEDIATE`; PostgreSQL: a transaction holding
//! the boundary's row `FOR UPDATE`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::{plans, TestApp};
use axum::body::Body;
use axum::http::{Request, StatusCode};
use http_body_util::BodyExt;
use palisade_store::{ResourceKey, StoreError};
use sqlx::Connection;
use tower::ServiceExt;

/// Smaller than the production 2 s so that a short run sees many deadlines.
const POLICY_TIMEOUT: Duration = Duration::from_millis(300);
const CLIENTS: usize = 6;
const CYCLES: u64 = 30;
/// A 503 answered later than the deadline plus this is counted as over the bound.
const SLACK: Duration = Duration::from_millis(200);

/// Holds the lock for a time that sweeps across the deadline: 240 ms to 345 ms.
fn hold(cycle: u64) -> Duration {
    Duration::from_millis(240 + (cycle * 7) % 106)
}

enum Locker {
    Sqlite(sqlx::SqliteConnection),
    Postgres(sqlx::PgConnection),
}

impl Locker {
    async fn open(app: &TestApp) -> Locker {
        if app.url.starts_with("postgres") {
            let connection = sqlx::PgConnection::connect(&app.url).await.unwrap();
            Locker::Postgres(connection)
        } else {
            let connection = sqlx::SqliteConnection::connect(&app.url).await.unwrap();
            Locker::Sqlite(connection)
        }
    }

    /// Holds the boundary `shop` locked for `time`: SQLite's write lock, PostgreSQL's row lock.
    async fn hold(&mut self, time: Duration) {
        let lock: &[&str] = match self {
            Locker::Sqlite(_) => &["BEGIN IMMEDIATE"],
            Locker::Postgres(_) => &[
                "BEGIN",
                "SELECT name FROM boundaries WHERE name = 'shop' FOR UPDATE",
            ],
        };
        for statement in lock {
            self.execute(statement).await;
        }
        tokio::time::sleep(time).await;
        self.execute("COMMIT").await;
    }

    /// Runs `statement` on the connection, whichever backend's it is.
    async fn execute(&mut self, statement: &str) {
        match self {
            Locker::Sqlite(c) => {
                sqlx::query(statement).execute(&mut *c).await.unwrap();
            }
            Locker::Postgres(c) => {
                sqlx::query(statement).execute(&mut *c).await.unwrap();
            }
        }
    }
}

#[derive(Debug, Default)]
struct Figures {
    answers: usize,
    created: usize,
    unavailable: usize,
    committed_but_unavailable: usize,
    unavailable_over_bound: usize,
    slowest_unavailable: Duration,
    other: usize,
}

async fn run(app: TestApp) -> Figures {
    app.boundary("shop").await;
    app.policy("shop", "size-limits", plans(&["small", "medium"]))
        .await;
    let mut state = app.state.clone();
    state.policy_timeout = POLICY_TIMEOUT;
    let router = palisade_server::app(state);

    let mut locker = Locker::open(&app).await;
    let done = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for client in 0..CLIENTS {
        let (router, done, token) = (router.clone(), done.clone(), app.admin.clone());
        clients.push(tokio::spawn(async move {
            let mut answers = Vec::new();
            let mut n = 0;
            while !done.load(Ordering::Relaxed) {
                n += 1;
                let name = format!("c{client}-{n}");
                let body = serde_json::json!({
                    "type": "app", "name": name, "plan": "small", "image": "i"
                });
                let request = Request::post("/v1/boundaries/shop/resources")
                    .header("authorization", format!("Bearer {token}"))
                    .header("content-type", "application/json")
                    .body(Body::from(body.to_string()))
                    .unwrap();
                let started = Instant::now();
                let response = router.clone().oneshot(request).await.unwrap();
                let status = response.status();
                let bytes = response.into_body().collect().await.unwrap().to_bytes();
                let elapsed = started.elapsed();
                answers.push((name, status, elapsed, bytes));
            }
            answers
        }));
    }
    for cycle in 0..CYCLES {
        locker.hold(hold(cycle)).await;
        tokio::time::sleep(Duration::from_millis(15)).await;
    }
    done.store(true, Ordering::Relaxed);

    let mut figures = Figures::default();
    for client in clients {
        for (name, status, elapsed, bytes) in client.await.unwrap() {
            figures.answers += 1;
            let key = ResourceKey {
                boundary: "shop".into(),
                resource_type: "app".into(),
                name: name.clone(),
            };
            let stored = match app.store.get_resource(&key).await {
                Ok(_) => true,
                Err(StoreError::NotFound) => false,
                Err(other) => panic!("reading {name} back: {other}"),
            };
            match status {
                StatusCode::CREATED => {
                    assert!(stored, "{name} was answered 201 but is not stored");
                    figures.created += 1;
                }
                StatusCode::SERVICE_UNAVAILABLE => {
                    let body: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
                    assert_eq!(
                        body["error"]["code"], "compute_plan_policy_unavailable",
                        "{body}"
                    );
                    figures.unavailable += 1;
                    if stored {
                        figures.committed_but_unavailable += 1;
                        eprintln!("{name}: answered 503 after {elapsed:?}, but it was written");
                    }
                    if elapsed > POLICY_TIMEOUT + SLACK {
                        figures.unavailable_over_bound += 1;
                    }
                    figures.slowest_unavailable = figures.slowest_unavailable.max(elapsed);
                }
                other => {
                    figures.other += 1;
                    eprintln!(
                        "{name}: unexpected {other}: {}",
                        String::from_utf8_lossy(&bytes)
                    );
                }
            }
        }
    }
    eprintln!("{} {figures:?}", app.store.backend());
    figures
}

fn check(figures: &Figures) {
    assert_eq!(figures.other, 0, "{figures:?}");
    assert!(
        figures.unavailable > 0,
        "the lock cycles must make some creates miss the deadline: {figures:?}"
    );
    assert!(figures.created > 0, "{figures:?}");
    assert_eq!(
        figures.committed_but_unavailable, 0,
        "a create answered 503 'not applied' was written: {figures:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_under_lock_contention_wrote_nothing_on_sqlite() {
    let figures = run(TestApp::sqlite().await).await;
    check(&figures);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_503_under_lock_contention_wrote_nothing_on_postgres() {
    let app = TestApp::postgres().await;
    let figures = run(app).await;
    check(&figures);
}
