//! Times for docs/benchmarks.md ("Hardening II: untrusted parsing"): how long a YAML text
//! nested N deep takes to parse without the pre-scan (serde_yaml_ng alone) and to be refused
//! with it, and how long the worst texts the pre-scan accepts take to read.
//!
//! `cargo run --release -p palisade-api-types --example untrusted_parse [--before]`
//! (`--before` also times serde_yaml_ng alone on the deep texts: minutes at 100,000).

use std::time::{Duration, Instant};

use palisade_api_types::nesting;
use palisade_api_types::yaml;
use serde_yaml_ng::Value;

fn deep(depth: usize) -> String {
    format!(
        "metadata:\n  annotations: {{x: {}{}}}\n",
        "[".repeat(depth),
        "]".repeat(depth)
    )
}

/// The best of `runs` runs.
fn time(runs: usize, mut work: impl FnMut()) -> Duration {
    (0..runs)
        .map(|_| {
            let started = Instant::now();
            work();
            started.elapsed()
        })
        .min()
        .unwrap_or_default()
}

fn main() {
    let before = std::env::args().any(|a| a == "--before");
    println!("| depth | bytes | serde_yaml_ng alone | pre-scan refusal | documents() |");
    for depth in [5_000, 10_000, 20_000, 40_000, 100_000] {
        let text = deep(depth);
        let alone = if before || depth <= 10_000 {
            let took = time(1, || {
                let _ = serde_yaml_ng::from_str::<Value>(&text);
            });
            format!("{took:.2?}")
        } else {
            "not run".to_owned()
        };
        let refused = time(5, || {
            let _ = nesting::check_yaml(&text);
        });
        let read = time(5, || {
            let _ = yaml::documents::<Value>(&text);
        });
        println!(
            "| {depth} | {} | {alone} | {refused:.2?} | {read:.2?} |",
            text.len()
        );
    }

    const MIB: usize = 1024 * 1024;
    let fill = |unit: &str, head: &str, tail: &str| {
        let mut text = head.to_owned();
        while text.len() + unit.len() + tail.len() < MIB {
            text.push_str(unit);
        }
        text.push_str(tail);
        text
    };
    let flow64 = format!("{}x{}, ", "[".repeat(62), "]".repeat(62));
    let block64: String = (0..63)
        .map(|level| format!("{}k{level}:\n", "  ".repeat(level + 1)))
        .collect();
    let alias_unit = "*a, ";
    let cases = [
        (
            "flow, 64 deep, over and over",
            fill(&flow64, "a: [", "x]\n"),
        ),
        (
            "block, 64 deep, over and over",
            fill(&format!("-\n{block64}"), "", ""),
        ),
        (
            "1-character scalars in one flow sequence",
            fill("x, ", "a: [", "x]\n"),
        ),
        (
            "aliases of a 200-value sequence, to the budget",
            fill(
                alias_unit,
                &format!("a: &a [{}]\nb: [", vec!["x"; 200].join(", ")),
                "x]\n",
            ),
        ),
        (
            "1,000 small policy documents",
            (0..1_000)
                .map(|i| format!("apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {{name: p{i}, boundary: shop, annotations: {{a: '{}'}}}}\nspec: {{rules: [{{disallowLatestTag: {{}}}}]}}\n", "x".repeat(900)))
                .collect::<Vec<_>>()
                .join("---\n"),
        ),
    ];
    println!();
    println!("| text (1 MiB) | pre-scan | documents() | outcome |");
    for (what, text) in cases {
        let scanned = time(5, || {
            let _ = nesting::check_yaml(&text);
        });
        let mut outcome = String::new();
        let read = time(3, || {
            let documents = yaml::documents::<Value>(&text);
            outcome = match documents.iter().find_map(|(_, d)| d.as_ref().err()) {
                Some(error) => format!("refused: {error}"),
                None => format!("{} documents read", documents.len()),
            };
        });
        println!(
            "| {what} ({} bytes) | {scanned:.2?} | {read:.2?} | {outcome} |",
            text.len()
        );
    }

    let body = format!("{{\"x\": {}}}", "[".repeat(500_000));
    let json = time(5, || {
        let _ = palisade_api_types::json::parse_value(body.as_bytes());
    });
    let flat = format!("[{}1]", "1,".repeat(500_000));
    let json_flat = time(5, || {
        let _ = palisade_api_types::json::parse_value(flat.as_bytes());
    });
    println!();
    println!("JSON: 500,000 deep refused in {json:.2?}; 1 MiB of numbers read in {json_flat:.2?}");
}
