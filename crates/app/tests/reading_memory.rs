//! Memory per request is bounded (issue 42, item 8): an apply holds at most what it reserves
//! (`policies::apply_memory`), the applies under way hold at most the reading pools together,
//! and a small apply does not wait for large ones. Before, the deepest YAML the depth limit
//! let through held about 400 MB per parse, two at once 825 MB (above the chart's 512 MiB
//! limit), and another boundary-admin's small apply waited 3.3 s.
//!
//! Counted: the heap bytes live at once, by a counting allocator of this test binary's own;
//! one test at a time.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "a test fails loudly and says what it measured"
)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use palisade_app::policies::apply_memory;
use palisade_app::reading::{LARGE_POOL, SMALL_POOL};
use palisade_app::{App, AppError, Caller, Role, SealingKey};
use palisade_policy::Catalog;
use peak_alloc::PeakAlloc;

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

/// One test at a time: the allocator counts every thread's memory.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MIB: usize = 1 << 20;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / MIB as f64
}

async fn app(dir: &std::path::Path) -> App {
    let url = format!("sqlite://{}", dir.join("palisade.db").display());
    let store = palisade_store::connect(&url).await.unwrap();
    store.create_boundary("shop", None).await.unwrap();
    store.create_boundary("web", None).await.unwrap();
    App::new(store, Catalog::builtin(), SealingKey::random())
}

fn admin() -> Caller {
    Caller {
        token_id: "test".into(),
        role: Role::Admin,
    }
}

/// Copies of `document` up to about 1 MiB, one document each.
fn mebibyte_of(document: &str) -> String {
    let copies = MIB / (document.len() + 4);
    vec![document; copies.max(1)].join("---\n")
}

/// The worst bodies known (`palisade-api-types/tests/parse_memory.rs` has them all) and an
/// ordinary large one, each about 1 MiB.
fn bodies() -> Vec<(&'static str, String)> {
    // As many of each as one document may hold (50,000 nodes).
    let empty_sequences = format!("a: [{}x]\n", "[],".repeat(49_990));
    let explicit_pairs = format!("a: [{}x]\n", "? a,".repeat(16_665));
    let one_key_mappings = format!("a: [{}x]\n", "{a},".repeat(16_665));
    // 500 policies in each of two boundaries (the most one may hold).
    let boundary = |i: usize| if i.is_multiple_of(2) { "shop" } else { "web" };
    let policies: Vec<String> = (0..1_000)
        .map(|i| {
            format!(
                "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {{name: p{i}, \
                 boundary: {}, annotations: {{note: '{}'}}}}\nspec:\n  rules:\n  - \
                 requiredLabels: {{labels: [{{key: team}}]}}\n  - disallowLatestTag: {{}}\n",
                boundary(i),
                "x".repeat(850)
            )
        })
        .collect();
    // Policies of many short entries: as much of what an apply keeps per byte as it gets.
    let labels: Vec<String> = (0..32).map(|l| format!("{{key: l{l}}}")).collect();
    let registries: Vec<String> = (0..32).map(|r| format!("r{r}.io/")).collect();
    let dense: Vec<String> = (0..1_000)
        .map(|i| {
            format!(
                "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {{name: p{i}, \
                 boundary: {}}}\nspec: {{rules: [{{requiredLabels: {{labels: [{}]}}}}, \
                 {{allowedRegistries: {{registries: [{}]}}}}]}}\n",
                boundary(i),
                labels.join(", "),
                registries.join(", ")
            )
        })
        .collect();
    vec![
        ("empty flow sequences", mebibyte_of(&empty_sequences)),
        ("pairs of explicit keys", mebibyte_of(&explicit_pairs)),
        ("one-key flow mappings", mebibyte_of(&one_key_mappings)),
        ("documents of one scalar", "x\n---\n".repeat(MIB / 6)),
        ("1,000 policies of 1 KiB", policies.join("---\n")),
        ("1,000 policies of 64 entries", dense.join("---\n")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_apply_holds_at_most_what_it_reserves() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path()).await;
    for (what, body) in bodies() {
        let reserved = apply_memory(body.as_bytes());
        let body = body.into_bytes();
        let size = body.len();
        let before = ALLOCATOR.current_usage();
        ALLOCATOR.reset_peak_usage();
        let answer = app.apply(&admin(), body, true).await;
        let took = ALLOCATOR.peak_usage().saturating_sub(before);
        println!(
            "{what} ({size} bytes): {:.1} MiB of {:.1} MiB reserved; {}",
            mib(took),
            mib(reserved),
            match &answer {
                Ok(results) => format!("{} documents", results.results.len()),
                Err(error) => error.to_string().chars().take(80).collect(),
            }
        );
        assert!(
            took <= reserved,
            "{what}: {took} bytes held, {reserved} reserved"
        );
        if what.starts_with("1,000") {
            assert_eq!(
                answer.map(|r| r.results.len()).map_err(|e| e.to_string()),
                Ok(1_000)
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applies_under_way_hold_at_most_the_reading_pools() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path()).await;
    // Every body at once: they reserve more than the pools hold.
    let requests: Vec<Vec<u8>> = bodies()
        .into_iter()
        .map(|(_, body)| body.into_bytes())
        .collect();
    let count = requests.len();
    let bodies_held: usize = requests.iter().map(Vec::len).sum();
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    let mut applies = tokio::task::JoinSet::new();
    for body in requests {
        let app = app.clone();
        applies.spawn(async move { app.apply(&admin(), body, true).await.is_ok() });
    }
    while let Some(done) = applies.join_next().await {
        done.unwrap();
    }
    let took = ALLOCATOR.peak_usage().saturating_sub(before);
    // The bodies themselves are the requests' (read before the pools are asked), and what
    // the applies keep of their documents after they were read is theirs too.
    let kept = bodies_held * 16;
    let bound = SMALL_POOL + LARGE_POOL + bodies_held + kept;
    println!(
        "{count} applies at once: {:.1} MiB at most, {:.1} MiB allowed",
        mib(took),
        mib(bound)
    );
    assert!(
        took <= bound,
        "{took} bytes held at once, more than {bound}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_apply_does_not_wait_for_large_ones() {
    let _one = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path()).await;
    let large = bodies().swap_remove(1).1;
    let done = Arc::new(AtomicUsize::new(0));
    let mut applies = tokio::task::JoinSet::new();
    // One more than there are cores on a 2-core machine.
    for _ in 0..3 {
        let (app, body, done) = (app.clone(), large.clone().into_bytes(), done.clone());
        applies.spawn(async move {
            let _ = app.apply(&admin(), body, true).await;
            done.fetch_add(1, Ordering::SeqCst);
        });
    }
    // Until the large ones hold every core turn.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let small = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: p, \
                 boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n";
    let started = Instant::now();
    let answer = app.apply(&admin(), small.as_bytes().to_vec(), true).await;
    let took = started.elapsed();
    let large_done = done.load(Ordering::SeqCst);
    println!("the small apply answered in {took:?}, after {large_done} of 3 large ones");
    assert!(
        answer.is_ok(),
        "{:?}",
        answer.err().map(|e: AppError| e.to_string())
    );
    assert_eq!(large_done, 0, "the small apply waited for a large one");
    while applies.join_next().await.is_some() {}
}
