//! Architecture invariant: `palisade-policy` performs no I/O, so nothing that does I/O or
//! async work may enter its normal dependency tree.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use std::process::Command;

#[test]
fn policy_core_has_no_io_dependencies() {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "-p",
            "palisade-policy",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let tree = String::from_utf8_lossy(&output.stdout);
    let crates: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(crates.contains(&"palisade-policy"), "{tree}");
    let forbidden = [
        "tokio",
        "sqlx",
        "kube",
        "kube-client",
        "axum",
        "hyper",
        "reqwest",
        "mio",
        "async-std",
        "futures",
        "k8s-openapi",
    ];
    let found: Vec<&&str> = crates.iter().filter(|c| forbidden.contains(c)).collect();
    assert!(
        found.is_empty(),
        "I/O crates in the policy core: {found:?}\n{tree}"
    );
}
