//! Architecture invariant: `palisade-policy` performs no I/O, so its normal dependency tree is
//! an allow-list: `serde_json` and `thiserror` with what they pull in, on every target. Any
//! other crate (`tower`, `hyper-util`, a logging crate, ...) fails this test by name, with the
//! path through which it came in. Adding a crate here is a design decision, not a fix.
//!
//! The tree comes from `cargo tree --offline --locked` on the lock file: no network.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use std::process::Command;

/// Every crate allowed in the normal dependency tree of `palisade-policy` (all targets).
const ALLOWED: &[&str] = &[
    "palisade-policy",
    // serde_json and its dependencies
    "serde_json",
    "serde",
    "serde_core",
    "serde_derive",
    "indexmap",
    "equivalent",
    "hashbrown",
    "foldhash",
    "itoa",
    "memchr",
    "zmij",
    // thiserror and its derive
    "thiserror",
    "thiserror-impl",
    // SHA-256 without dependencies (the order of namespaces in staged rollout, SPEC 8)
    "hmac-sha256",
    // the proc-macro toolchain of serde_derive and thiserror-impl
    "proc-macro2",
    "quote",
    "syn",
    "unicode-ident",
];

/// One line of `cargo tree --prefix depth`: `<depth><name> v<version> [(path)] [(*)]`.
struct Line<'a> {
    depth: usize,
    name: &'a str,
}

fn parse(line: &str) -> Option<Line<'_>> {
    let digits = line.find(|c: char| !c.is_ascii_digit())?;
    let depth = line[..digits].parse().ok()?;
    let name = line[digits..].split_whitespace().next()?;
    Some(Line { depth, name })
}

/// The normal dependency tree of `palisade-policy` on every target, one crate a line.
fn dependency_tree() -> String {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "palisade-policy",
            "-e",
            "normal",
            "--target",
            "all",
            "--prefix",
            "depth",
            "--offline",
            "--locked",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Crates outside `allowed`, each with the path from the root through which it came in.
fn intruders(tree: &str, allowed: &[&str]) -> Vec<String> {
    let mut path: Vec<&str> = Vec::new();
    let mut found = Vec::new();
    for line in tree.lines().filter(|l| !l.trim().is_empty()) {
        let line = parse(line).unwrap_or_else(|| panic!("unexpected cargo tree line: {line}"));
        path.truncate(line.depth);
        path.push(line.name);
        if !allowed.contains(&line.name) {
            found.push(format!("{} (via {})", line.name, path.join(" -> ")));
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn policy_core_depends_only_on_allowed_crates() {
    let tree = dependency_tree();
    let root = tree.lines().next().and_then(parse);
    assert!(
        root.is_some_and(|r| r.depth == 0 && r.name == "palisade-policy"),
        "the tree does not start at palisade-policy:\n{tree}"
    );
    let found = intruders(&tree, ALLOWED);
    assert!(
        found.is_empty(),
        "crates outside the policy core's allow-list (it does no I/O; see ARCHITECTURE.md):\n  {}\n\
         full tree:\n{tree}",
        found.join("\n  ")
    );
}

/// The check itself: an intruder deep in the tree is named with its path.
#[test]
fn an_intruder_is_named_with_its_path() {
    let tree = "0palisade-policy v0.1.0 (/x)\n1serde_json v1.0.0\n2itoa v1.0.0\n1tower v0.5.0\n\
                2hyper-util v0.1.0\n3itoa v1.0.0 (*)\n";
    assert_eq!(
        intruders(tree, ALLOWED),
        [
            "hyper-util (via palisade-policy -> tower -> hyper-util)",
            "tower (via palisade-policy -> tower)",
        ]
    );
}
