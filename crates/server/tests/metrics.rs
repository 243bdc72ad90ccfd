//! `/metrics` has a bounded set of series (issue 31): nothing a request chooses — its method,
//! its path, a boundary or type it names — becomes a label value. A binary of its own, since
//! the recorder is one per process and other tests would add series while this one counts.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

#[path = "it/common.rs"]
mod common;

use std::collections::BTreeSet;

use axum::http::{Method, StatusCode};
use common::TestApp;
use serde_json::json;

/// The series of a Prometheus text exposition: every sample line without its value.
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            line.rsplit_once(' ')
                .map_or(line, |(series, _)| series)
                .to_owned()
        })
        .collect()
}

/// A small xorshift generator: the test's "random" values, the same on every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A token of `[A-Z0-9]`, 3 to 12 characters, made distinct by `i`.
    fn word(&mut self, i: usize) -> String {
        const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        let length = 3 + (self.next() % 10) as usize;
        let mut word: String = (0..length)
            .map(|_| LETTERS[(self.next() % LETTERS.len() as u64) as usize] as char)
            .collect();
        word.push_str(&format!("X{i}"));
        word
    }
}

/// One request of each kind the loop sends, each with a value chosen by `i`.
async fn send(app: &TestApp, random: &mut Random, i: usize) {
    let word = random.word(i);
    let method = Method::from_bytes(word.as_bytes()).unwrap();
    let lower = word.to_ascii_lowercase();
    let (answer, expected) = match i % 6 {
        // An unknown method on an unknown path.
        0 => (
            app.call(method, &format!("/{lower}/x"), None, None).await,
            StatusCode::NOT_FOUND,
        ),
        // An unknown method on a known path.
        1 => (
            app.call(method, "/v1/boundaries", None, None).await,
            StatusCode::METHOD_NOT_ALLOWED,
        ),
        // A known method on an unknown path.
        2 => (
            app.call(Method::GET, &format!("/v1/{lower}"), None, None)
                .await,
            StatusCode::NOT_FOUND,
        ),
        // A boundary in the path, no token.
        3 => (
            app.call(
                Method::GET,
                &format!("/v1/boundaries/{lower}/resources"),
                None,
                None,
            )
            .await,
            StatusCode::UNAUTHORIZED,
        ),
        // A boundary the caller cannot see.
        4 => (
            app.admin(Method::GET, &format!("/v1/boundaries/{lower}"), None)
                .await,
            StatusCode::NOT_FOUND,
        ),
        // A resource type no catalog knows, on a plan path.
        _ => (
            app.admin(
                Method::POST,
                "/v1/boundaries/shop/resources",
                Some(json!({"type": lower, "name": "x", "plan": "small"})),
            )
            .await,
            StatusCode::BAD_REQUEST,
        ),
    };
    assert_eq!(answer.status, expected, "request {i}: {answer:?}");
}

#[tokio::test]
async fn requests_of_any_method_and_path_add_no_series() {
    let app = TestApp::sqlite().await;
    app.boundary("shop").await;
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    // Each kind once, and /metrics itself, so that every series the loop can touch exists.
    for i in 0..6 {
        send(&app, &mut random, i).await;
    }
    app.call(Method::GET, "/metrics", None, None).await;
    let before = app.call(Method::GET, "/metrics", None, None).await;
    let before = before.body.as_str().unwrap().to_owned();
    for i in 6..10_006 {
        send(&app, &mut random, i).await;
    }
    let after = app.call(Method::GET, "/metrics", None, None).await;
    let after = after.body.as_str().unwrap().to_owned();
    let (old, new) = (series(&before), series(&after));
    let added: Vec<&String> = new.difference(&old).collect();
    assert!(
        added.is_empty(),
        "{} series added, e.g. {:?}",
        added.len(),
        &added[..added.len().min(5)]
    );
    assert_eq!(old, new);
    // Only the counts grew: a few digits per series.
    assert!(
        after.len() < before.len() + 8 * old.len(),
        "{} bytes before, {} after",
        before.len(),
        after.len()
    );
    // The label values the bounded set uses.
    assert!(
        after.contains(
            r#"palisade_http_requests_total{route="unmatched",method="other",status="404"}"#
        ),
        "{after}"
    );
    assert!(
        after.contains(
            r#"palisade_http_requests_total{route="/v1/boundaries",method="other",status="405"}"#
        ),
        "{after}"
    );
}
