//! What reading a YAML text holds in memory is bounded by what the limits allow (issue 42,
//! item 8): the worst texts known, at sizes up to the 1 MiB body limit, each read as an apply,
//! the portal and a kubeconfig read them, never take more heap than
//! `yaml::peak_bound(text.len())`. Before the bound (no node limit, aliases counted by values
//! only, the YAML and the JSON value held whole at once), 256 KiB of `[[], [], ...]` took
//! 40 MiB and 1 MiB of one-key mappings 255 MiB; a 64 KiB anchor named 100 times, 13 MiB.
//!
//! Counted: the heap bytes live at once, by a counting allocator of this test binary's own.
//! One test, so nothing else allocates meanwhile.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    reason = "a test fails loudly and says what it measured"
)]

use palisade_api_types::{kubeconfig, nesting, yaml, ExceptionDocument, PolicyDocument};
use peak_alloc::PeakAlloc;
use serde::de::IgnoredAny;

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The most heap bytes `work` held at once beyond what was live before it.
fn peak(work: impl FnOnce()) -> usize {
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    work();
    ALLOCATOR.peak_usage().saturating_sub(before)
}

/// Whether every document of `text` is read without a refusal for its size (nodes, aliases).
fn within_limits(text: &str) -> bool {
    // Only aliases build more than the pre-scan counts.
    nesting::check_yaml(text).is_ok()
        && (!text.contains('*')
            || yaml::each_document::<IgnoredAny>(text).all(|(_, document)| match document {
                Ok(_) => true,
                Err(error) => !error.message.contains("more than"),
            }))
}

/// The largest `document(n)`, for `n` up to `most`, that the limits let through within
/// `size` bytes.
fn largest(size: usize, most: usize, document: impl Fn(usize) -> String) -> String {
    let fits = |n: usize| {
        let text = document(n);
        text.len() <= size && within_limits(&text)
    };
    let mut n = most;
    if !document(1).contains('*') {
        // Without aliases, nodes and bytes grow in step with `n`: where both limits are met.
        let nodes = |n: usize| nesting::yaml_nodes(&document(n), usize::MAX).unwrap();
        let (bytes_one, bytes_each) = (document(1).len(), document(2).len() - document(1).len());
        let (nodes_one, nodes_each) = (nodes(1), nodes(2) - nodes(1));
        let by_bytes = size.saturating_sub(bytes_one) / bytes_each.max(1) + 1;
        // (A stream of copies holds as many nodes in one document whatever their number.)
        let by_nodes = match nodes_each {
            0 => n,
            each => nesting::MAX_NODES.saturating_sub(nodes_one) / each + 1,
        };
        n = n.min(by_bytes).min(by_nodes);
        while n > 0 && !fits(n) {
            n -= 1;
        }
        return document(n);
    }
    // Doubling first, so that the texts tried add up to about twice the one found.
    let mut low = 0_usize;
    let mut high = 1_usize.min(n);
    while high < n && fits(high) {
        low = high;
        high = (high * 2).min(n);
    }
    while low < high {
        let middle = (low + high).div_ceil(2);
        if fits(middle) {
            low = middle;
        } else {
            high = middle - 1;
        }
    }
    document(low)
}

/// `head`, then `unit` as often as one document may hold it within `size` bytes, then `tail`.
fn repeated(size: usize, head: &str, unit: &str, tail: &str) -> String {
    largest(size, size / unit.len(), |n| {
        format!("{head}{}{tail}", unit.repeat(n))
    })
}

/// `copies` copies of `document`, one document each.
fn stream(document: &str, copies: usize) -> String {
    vec![document; copies].join("---\n")
}

/// The worst texts known of at most `size` bytes, each within the limits.
fn worst(size: usize) -> Vec<(&'static str, String)> {
    let flow64 = format!("{}x{}, ", "[".repeat(62), "]".repeat(62));
    let block64: String = (0..63)
        .map(|level| format!("{}k{level}:\n", "  ".repeat(level + 1)))
        .collect();
    let keys = |n: usize| {
        let keys: Vec<String> = (0..n).map(|i| format!("k{i:x}")).collect();
        format!("a: {{{}}}\n", keys.join(","))
    };
    let block_keys = |n: usize| (0..n).map(|i| format!("k{i:x}:\n")).collect::<String>();
    let explicit_keys = |n: usize| (0..n).map(|i| format!("? k{i:x}\n")).collect::<String>();
    let mappings = vec!["{a}"; 200].join(",");
    vec![
        ("flow, 64 deep", repeated(size, "a: [", &flow64, "x]\n")),
        (
            "empty flow sequences",
            repeated(size, "a: [", "[],", "x]\n"),
        ),
        ("1-character scalars", repeated(size, "a: [", "x,", "x]\n")),
        (
            "one-key flow mappings",
            repeated(size, "a: [", "{a},", "x]\n"),
        ),
        ("flow keys without values", largest(size, size / 2, keys)),
        (
            "block keys without values",
            largest(size, size / 4, block_keys),
        ),
        ("a block sequence of `-`", repeated(size, "", "-\n", "")),
        (
            "explicit keys without values",
            largest(size, size / 4, explicit_keys),
        ),
        (
            "pairs of explicit keys",
            repeated(size, "a: [", "? a,", "x]\n"),
        ),
        (
            "many values, then many events",
            format!(
                "{}---\n{}",
                repeated(size / 2, "a: [", "{a},", "x]\n"),
                repeated(size / 2, "a: [", "[],", "x]\n")
            ),
        ),
        ("empty tagged nodes", repeated(size, "a: [", "!,", "x]\n")),
        (
            "block mappings, 64 deep",
            repeated(size, "", &format!("-\n{block64}"), ""),
        ),
        (
            "aliases of 200 one-key mappings",
            repeated(size, &format!("a: &a [{mappings}]\nb: ["), "*a,", "x]\n"),
        ),
        (
            "aliases of a long scalar",
            repeated(
                size,
                &format!("a: &a {}\nb: [", "x".repeat(size / 2)),
                "*a,",
                "x]\n",
            ),
        ),
    ]
}

/// How an untrusted text is read: as an apply (each document as JSON, then as what its kind
/// says), as the portal's editor (each as a policy, counted), as a value and as a kubeconfig.
const READERS: [&str; 4] = ["apply", "portal", "value", "kubeconfig"];

fn read(reader: &str, text: &str) {
    match reader {
        "apply" => {
            for (_, document) in yaml::each_json_document(text) {
                if let Ok(json) = document {
                    let _ = yaml::from_json::<PolicyDocument>(&json);
                    let _ = yaml::from_json::<ExceptionDocument>(&json);
                }
            }
        }
        "portal" => {
            let _ = yaml::each_document::<PolicyDocument>(text).count();
        }
        "value" => {
            let _ = yaml::value(text);
        }
        _ => {
            let _ = kubeconfig::normalise(text);
        }
    }
}

/// Reads `text` with `readers` and fails when one holds more than the bound.
fn within_bound(what: &str, text: &str, readers: &[&str]) {
    assert!(!text.trim().is_empty(), "{what}: empty");
    assert!(within_limits(text), "{what}: not within the limits");
    let bound = yaml::peak_bound(text);
    for reader in readers {
        let took = peak(|| read(reader, text));
        println!(
            "{what:<36} {reader:<10} {:>8} bytes: {:>5.1} MiB of {:>5.1} MiB ({:>3}%)",
            text.len(),
            took as f64 / MIB as f64,
            bound as f64 / MIB as f64,
            took * 100 / bound
        );
        assert!(
            took <= bound,
            "{what} ({} bytes, {reader}): {took} bytes held, more than {bound}",
            text.len()
        );
    }
}

/// A text of documents each as large as the limits let it be, up to `size` bytes (with
/// aliases, as many as the text's own bound on them lets through).
fn documents(document: &str, size: usize) -> String {
    let most = size / (document.len() + 4);
    largest(size, most, |n| stream(document, n))
}

/// One test at a time: the allocator counts every thread's memory.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The worst texts known: 16 KiB of each, a document of each as large as the limits let it
/// be (up to 256 KiB), and 1 MiB of such documents, read as an apply and a kubeconfig.
#[test]
fn reading_a_text_holds_at_most_its_bound() {
    let _one = ONE_AT_A_TIME.lock();
    for (what, text) in worst(16 * KIB) {
        within_bound(what, &text, &READERS);
    }
    for (what, document) in worst(256 * KIB) {
        within_bound(what, &document, &["apply"]);
        if ["pairs of explicit keys", "many values, then many events"].contains(&what) {
            within_bound(what, &documents(&document, MIB), &["apply", "kubeconfig"]);
        }
    }
    // Before a refusal the parser reads one document past the last it returns.
    let document = repeated(256 * KIB, "a: [", "[],", "x]\n");
    let refused = format!("{}---\n[{}]\n", stream(&document, 3), "[".repeat(70));
    let bound = yaml::peak_bound(&refused);
    let took = peak(|| {
        let read: Vec<bool> = yaml::each_json_document(&refused)
            .map(|(_, document)| document.is_ok())
            .collect();
        assert_eq!(read, [true, true, true, false]);
    });
    assert!(
        took <= bound,
        "cut short: {took} bytes held, more than {bound}"
    );
}

/// Every size from 1 KiB to 1 MiB and every reader: minutes in a debug build.
/// `cargo test --release -p palisade-api-types --test parse_memory -- --ignored --nocapture`
#[test]
#[ignore = "minutes in a debug build; run in release"]
fn every_size_and_reader_holds_at_most_its_bound() {
    let _one = ONE_AT_A_TIME.lock();
    for size in [KIB, 4 * KIB, 16 * KIB, 64 * KIB, 96 * KIB, 256 * KIB] {
        println!("{size} bytes at most:");
        for (what, text) in worst(size) {
            if !text.trim().is_empty() {
                within_bound(what, &text, &READERS);
            }
        }
    }
    println!("1 MiB of documents:");
    for (what, document) in worst(256 * KIB) {
        within_bound(what, &documents(&document, MIB), &READERS);
    }
}
