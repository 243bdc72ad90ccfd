//! Peak heap of reading YAML bodies of 1 MiB (the body limit), for docs/benchmarks.md
//! ("Memory per request is bounded"): the texts that were worst before the node limit (now
//! refused where a document passes it) and the worst ones accepted now (documents each as
//! large as the limits let it be). Printed per text: what serde_yaml_ng alone holds for it
//! (its events, no limits), what reading it as an apply does (`yaml::each_json_document`,
//! each document then read as a policy), `yaml::peak_bound`, and the time.
//!
//! `cargo run --release -p palisade-api-types --example parse_memory`

#![allow(clippy::print_stdout, reason = "an example prints its figures")]

use std::time::Instant;

use palisade_api_types::{nesting, yaml, PolicyDocument};
use peak_alloc::PeakAlloc;
use serde::de::IgnoredAny;
use serde::Deserialize;

#[global_allocator]
static ALLOCATOR: PeakAlloc = PeakAlloc;

const MIB: usize = 1 << 20;

fn mib(bytes: usize) -> f64 {
    bytes as f64 / MIB as f64
}

/// The most heap bytes `work` held at once beyond what was live before it.
fn peak(work: impl FnOnce()) -> usize {
    let before = ALLOCATOR.current_usage();
    ALLOCATOR.reset_peak_usage();
    work();
    ALLOCATOR.peak_usage().saturating_sub(before)
}

/// `head`, `unit` as often as fits in 1 MiB, `tail`.
fn fill(head: &str, unit: &str, tail: &str) -> String {
    let n = (MIB - head.len() - tail.len()) / unit.len();
    format!("{head}{}{tail}", unit.repeat(n))
}

/// Documents of `head`, `unit` as often as one document may hold it, `tail`, up to 1 MiB.
fn documents(head: &str, unit: &str, tail: &str) -> String {
    let document = |n: usize| format!("{head}{}{tail}", unit.repeat(n));
    let mut n = 1;
    while nesting::check_yaml(&document(n * 2)).is_ok() && document(n * 2).len() < MIB {
        n *= 2;
    }
    let mut step = n / 2;
    while step > 0 {
        if nesting::check_yaml(&document(n + step)).is_ok() && document(n + step).len() < MIB {
            n += step;
        }
        step /= 2;
    }
    let one = document(n);
    vec![one.as_str(); MIB / (one.len() + 4)].join("---\n")
}

fn main() {
    let flow64 = format!("{}x{}, ", "[".repeat(62), "]".repeat(62));
    let cases = [
        ("flow, 64 deep", fill("a: [", &flow64, "x]\n")),
        ("empty flow sequences", fill("a: [", "[],", "x]\n")),
        ("one-key flow mappings", fill("a: [", "{a},", "x]\n")),
        ("a block sequence of `-`", fill("", "-\n", "")),
        ("documents of one scalar", fill("", "x\n---\n", "")),
        (
            "aliases of a 64 KiB scalar",
            fill(
                &format!("a: &a {}\nb: [", "x".repeat(65_536)),
                "*a,",
                "x]\n",
            ),
        ),
        (
            "at the limit: empty flow sequences",
            documents("a: [", "[],", "x]\n"),
        ),
        (
            "at the limit: one-key flow mappings",
            documents("a: [", "{a},", "x]\n"),
        ),
        (
            "at the limit: pairs of explicit keys",
            documents("a: [", "? a,", "x]\n"),
        ),
    ];
    println!("| text (1 MiB) | serde_yaml_ng alone | read as an apply | bound | time | outcome |");
    println!("|---|---|---|---|---|---|");
    for (what, text) in cases {
        // Up to the first error: after one, the parser reports it again for ever. Aliases are
        // left alone: expanded without a bound, they would take all the memory there is.
        let alone = if text.contains('*') {
            "not run".to_owned()
        } else {
            let held = peak(|| {
                for document in serde_yaml_ng::Deserializer::from_str(&text) {
                    if IgnoredAny::deserialize(document).is_err() {
                        break;
                    }
                }
            });
            format!("{:.1} MiB", mib(held))
        };
        let started = Instant::now();
        let mut outcome = String::new();
        let mut read = 0;
        let held = peak(|| {
            for (_, document) in yaml::each_json_document(&text) {
                read += 1;
                match document.and_then(|json| yaml::from_json::<PolicyDocument>(&json)) {
                    Err(error) if outcome.is_empty() => outcome = error.to_string(),
                    _ => {}
                }
            }
        });
        let took = started.elapsed();
        println!(
            "| {what} ({} bytes) | {alone} | {:.1} MiB | {:.1} MiB | {took:.2?} | {read} documents; {} |",
            text.len(),
            mib(held),
            mib(yaml::peak_bound(&text)),
            outcome.chars().take(70).collect::<String>()
        );
    }
}
