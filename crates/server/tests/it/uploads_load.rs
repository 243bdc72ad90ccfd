//! Uploads under load (issues 30 and 31), over real HTTP on loopback: what many 8 MiB uploads
//! cost the process in memory, whether upload loops of one boundary keep another boundary's
//! plan-checked creates from their 2 s bound on SQLite, and how much database 40 uploads make.
//! Figures are printed (`--nocapture`) for docs/benchmarks.md; only answers are asserted
//! (memory and wall-clock figures are reported, never asserted). The tests take turns (a
//! process-wide lock), so that one's load does not land in another's figures, and the filter
//! keeps the binary's other tests out of them:
//!
//! `cargo test -p palisade-server --test it uploads_load:: -- --nocapture --test-threads=1`
//!
//! The creates beside upload loops run 20 s, or `PALISADE_UPLOADS_LOAD_SECONDS`. Their
//! baseline with no uploads and their runs on PostgreSQL are ignored unless asked for
//! (`-- --ignored` or `--include-ignored`): they measure, and take 20 s each.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::{plans, shop, Backend, TestApp};
use axum::body::Bytes;
use axum::http::StatusCode;
use serde_json::json;

const MIB: usize = 1024 * 1024;
const UPLOAD: usize = 8 * MIB;

/// One test at a time in this binary (see the module's comment).
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `VmRSS` and `VmHWM` (peak) of this process, in KiB.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

/// Starts the peak (`VmHWM`) again from the current resident size.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Incompressible bytes.
fn payload(size: usize) -> Bytes {
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    let mut bytes = Vec::with_capacity(size);
    while bytes.len() < size {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        bytes.extend_from_slice(&state.to_le_bytes());
    }
    bytes.truncate(size);
    Bytes::from(bytes)
}

/// Serves the app on a loopback port with the production limits; its base URL.
async fn serve(app: &TestApp) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = app.router.clone();
    tokio::spawn(async move {
        palisade_server::serve_on(
            listener,
            router,
            std::future::pending(),
            palisade_server::Limits::default(),
        )
        .await
        .unwrap();
    });
    base
}

/// An answer's status, or `error` when the request failed without one; and the answer's
/// `Retry-After`, if any.
async fn upload_answer(
    client: &reqwest::Client,
    base: &str,
    boundary: &str,
    token: &str,
    body: Bytes,
) -> (String, Option<u64>) {
    let answer = client
        .post(format!("{base}/v1/boundaries/{boundary}/uploads"))
        .bearer_auth(token)
        .header("content-type", "application/octet-stream")
        .body(body)
        .send()
        .await;
    match answer {
        Ok(answer) => {
            let status = answer.status();
            let retry = answer
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok());
            if matches!(status.as_u16(), 429 | 503) {
                assert!(retry.is_some(), "a {status} carries Retry-After");
            }
            let _ = answer.bytes().await;
            (status.as_u16().to_string(), retry)
        }
        // A refusal is answered before the body is read, and the connection closed: a client
        // that is still sending the body may fail to write it (broken pipe) and miss the answer.
        Err(_) => ("error".to_owned(), None),
    }
}

/// [`upload_answer`]'s status.
async fn upload(
    client: &reqwest::Client,
    base: &str,
    boundary: &str,
    token: &str,
    body: Bytes,
) -> String {
    upload_answer(client, base, boundary, token, body).await.0
}

fn count(counts: &Mutex<BTreeMap<String, usize>>, key: String) {
    *counts.lock().unwrap().entry(key).or_default() += 1;
}

/// The value at `q` (0..=1) of sorted `values`.
fn quantile(values: &[Duration], q: f64) -> Duration {
    if values.is_empty() {
        return Duration::ZERO;
    }
    let index = ((values.len() - 1) as f64 * q).round() as usize;
    values[index]
}

/// 48 upload loops of `shop`'s developer that upload again as soon as they have an answer,
/// while 4 clients create plan-checked resources in `web` for 20 s, on SQLite: every create
/// is answered 201 within its 2 s bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upload_loops_leave_another_boundarys_creates_their_bound_on_sqlite() {
    upload_loops_beside_creates(Backend::Sqlite, 48, false).await;
}

/// The same with loops that wait as long as a refusal's `Retry-After` says.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn upload_loops_honouring_retry_after_leave_creates_their_bound_on_sqlite() {
    upload_loops_beside_creates(Backend::Sqlite, 48, true).await;
}

/// The same creates with no uploads: the baseline of the two above.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement: run with --ignored"]
async fn creates_with_no_uploads_on_sqlite() {
    upload_loops_beside_creates(Backend::Sqlite, 0, true).await;
}

/// On PostgreSQL: loops uploading again at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement: run with --ignored"]
async fn upload_loops_beside_creates_on_postgres() {
    upload_loops_beside_creates(Backend::Postgres, 48, false).await;
}

/// On PostgreSQL: loops honouring `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement: run with --ignored"]
async fn upload_loops_honouring_retry_after_beside_creates_on_postgres() {
    upload_loops_beside_creates(Backend::Postgres, 48, true).await;
}

/// On PostgreSQL: the same creates with no uploads.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "a measurement: run with --ignored"]
async fn creates_with_no_uploads_on_postgres() {
    upload_loops_beside_creates(Backend::Postgres, 0, true).await;
}

/// How long the creates run: 20 s, or `PALISADE_UPLOADS_LOAD_SECONDS`.
fn run_length() -> Duration {
    let seconds = std::env::var("PALISADE_UPLOADS_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    Duration::from_secs(seconds)
}

async fn upload_loops_beside_creates(
    backend: Backend,
    upload_loops: usize,
    honour_retry_after: bool,
) {
    const CREATE_CLIENTS: usize = 4;
    let run = run_length();
    let _turn = TURN.lock().await;

    let (app, store) = match backend {
        Backend::Sqlite => (TestApp::sqlite().await, "sqlite"),
        Backend::Postgres => (TestApp::postgres().await, "postgres"),
    };
    app.boundary("shop").await;
    app.boundary("web").await;
    app.policy("web", "size-limits", plans(&["small", "medium"]))
        .await;
    let uploader = app.token("developer", Some("shop")).await;
    let creator = app.token("developer", Some("web")).await;
    let base = serve(&app).await;
    let client = reqwest::Client::new();
    let body = payload(UPLOAD);
    reset_peak();
    let (rss_before, _) = memory();

    let done = Arc::new(AtomicBool::new(false));
    let uploads = Arc::new(Mutex::new(BTreeMap::new()));
    let mut loops = Vec::new();
    for _ in 0..upload_loops {
        let (client, base, token, body, done, uploads) = (
            client.clone(),
            base.clone(),
            uploader.clone(),
            body.clone(),
            done.clone(),
            uploads.clone(),
        );
        loops.push(tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let (status, retry_after) =
                    upload_answer(&client, &base, "shop", &token, body.clone()).await;
                count(&uploads, status);
                if let (true, Some(seconds)) = (honour_retry_after, retry_after) {
                    tokio::time::sleep(Duration::from_secs(seconds)).await;
                }
            }
        }));
    }
    let creates = Arc::new(Mutex::new(BTreeMap::new()));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let mut creators = Vec::new();
    for c in 0..CREATE_CLIENTS {
        let (client, base, token, done, creates, latencies) = (
            client.clone(),
            base.clone(),
            creator.clone(),
            done.clone(),
            creates.clone(),
            latencies.clone(),
        );
        creators.push(tokio::spawn(async move {
            let mut n = 0;
            while !done.load(Ordering::Relaxed) {
                n += 1;
                let started = Instant::now();
                let answer = client
                    .post(format!("{base}/v1/boundaries/web/resources"))
                    .bearer_auth(&token)
                    .json(&json!({"type": "app", "name": format!("c{c}-{n}"), "plan": "small", "image": "ghcr.io/acme/web:1"}))
                    .send()
                    .await
                    .unwrap();
                let status = answer.status();
                let text = answer.text().await.unwrap_or_default();
                latencies.lock().unwrap().push(started.elapsed());
                if status != StatusCode::CREATED {
                    eprintln!("create c{c}-{n}: {status} after {:?}: {text}", started.elapsed());
                }
                count(&creates, status.as_u16().to_string());
            }
        }));
    }
    tokio::time::sleep(run).await;
    done.store(true, Ordering::Relaxed);
    for task in creators.into_iter().chain(loops) {
        task.await.unwrap();
    }
    let (_, peak) = memory();

    let mut latencies = latencies.lock().unwrap().clone();
    latencies.sort();
    let creates = creates.lock().unwrap().clone();
    let uploads = uploads.lock().unwrap().clone();
    let loops = if honour_retry_after {
        "honouring Retry-After"
    } else {
        "retrying at once"
    };
    eprintln!(
        "{store}, {run:?}: {upload_loops} upload loops of 8 MiB in 'shop' {loops}: {uploads:?}; \
         {CREATE_CLIENTS} clients creating in 'web': {creates:?}, p50 {:?}, p99 {:?}, max {:?}; \
         resident memory {} MiB before, peak {} MiB",
        quantile(&latencies, 0.5),
        quantile(&latencies, 0.99),
        latencies.last().copied().unwrap_or_default(),
        rss_before / 1024,
        peak / 1024,
    );
    let created = creates.get("201").copied().unwrap_or(0);
    assert_eq!(
        created,
        latencies.len(),
        "every create in 'web' is answered 201 within its 2 s bound: {creates:?}"
    );
    assert!(created > 0);
    assert!(upload_loops == 0 || uploads.get("201").copied().unwrap_or(0) > 0);
}

/// 128 uploads of 8 MiB at once, 8 in each of 16 boundaries: the process's peak memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn memory_of_128_concurrent_uploads() {
    const BOUNDARIES: usize = 16;
    const PER_BOUNDARY: usize = 8;
    let _turn = TURN.lock().await;

    let app = TestApp::sqlite().await;
    for b in 0..BOUNDARIES {
        app.boundary(&format!("b{b}")).await;
    }
    let base = serve(&app).await;
    let client = reqwest::Client::new();
    let body = payload(UPLOAD);
    reset_peak();
    let (rss_before, _) = memory();
    let started = Instant::now();
    let barrier = Arc::new(tokio::sync::Barrier::new(BOUNDARIES * PER_BOUNDARY));
    let counts = Arc::new(Mutex::new(BTreeMap::new()));
    let mut tasks = Vec::new();
    for b in 0..BOUNDARIES {
        for _ in 0..PER_BOUNDARY {
            let (client, base, token, body, barrier, counts) = (
                client.clone(),
                base.clone(),
                app.admin.clone(),
                body.clone(),
                barrier.clone(),
                counts.clone(),
            );
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                let status = upload(&client, &base, &format!("b{b}"), &token, body).await;
                count(&counts, status);
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let elapsed = started.elapsed();
    let (_, peak) = memory();
    let counts = counts.lock().unwrap().clone();
    eprintln!(
        "{} concurrent uploads of 8 MiB in {BOUNDARIES} boundaries: {counts:?} in {elapsed:?}; \
         resident memory {} MiB before, peak {} MiB (+{} MiB)",
        BOUNDARIES * PER_BOUNDARY,
        rss_before / 1024,
        peak / 1024,
        peak.saturating_sub(rss_before) / 1024,
    );
    // An upload refused at once (503, 429) is answered before its body is read; a client
    // still sending may then see the connection closed instead of the answer (HTTP/1.1 stops
    // a body in flight only by closing). Such closes are counted as "error", and never more
    // than the refusals.
    assert!(
        counts
            .keys()
            .all(|k| matches!(k.as_str(), "201" | "429" | "503" | "error")),
        "{counts:?}"
    );
    let refused = counts.get("503").copied().unwrap_or(0) + counts.get("429").copied().unwrap_or(0);
    assert!(
        counts.get("error").copied().unwrap_or(0) <= refused,
        "{counts:?}"
    );
    assert!(counts.get("201").copied().unwrap_or(0) > 0, "{counts:?}");
}

/// 40 uploads of 8 MiB by a developer, one after another: time and database size.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn database_growth_of_40_uploads() {
    const UPLOADS: usize = 40;
    let _turn = TURN.lock().await;

    let app = shop().await;
    let developer = app.token("developer", Some("shop")).await;
    let base = serve(&app).await;
    let client = reqwest::Client::new();
    let body = payload(UPLOAD);
    let size = |app: &TestApp| -> u64 {
        ["palisade.db", "palisade.db-wal"]
            .iter()
            .filter_map(|f| std::fs::metadata(app.dir.path().join(f)).ok())
            .map(|m| m.len())
            .sum()
    };
    let before = size(&app);
    let started = Instant::now();
    let mut counts = BTreeMap::new();
    for _ in 0..UPLOADS {
        let status = upload(&client, &base, "shop", &developer, body.clone()).await;
        *counts.entry(status).or_insert(0usize) += 1;
    }
    let elapsed = started.elapsed();
    let after = size(&app);
    eprintln!(
        "{UPLOADS} uploads of 8 MiB by a developer, one after another: {counts:?} in {elapsed:?}; \
         database {} MiB before, {} MiB after",
        before / MIB as u64,
        after / MIB as u64,
    );
    assert_eq!(counts.get("201"), Some(&UPLOADS), "{counts:?}");
}
