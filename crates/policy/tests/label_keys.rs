//! Architecture invariant: the label and annotation keys palisade writes to clusters are
//! defined once, in `palisade_policy::labels`. A key spelled out as a string anywhere else in
//! the workspace's library and binary sources fails this test, naming the file and line.
//! Tests (`tests.rs`, `tests/`, what follows `#[cfg(test)]`) may spell them out: they check
//! the wire format on their own.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly"
)]

use std::fs;
use std::path::{Path, PathBuf};

use palisade_policy::labels::{
    BOUNDARY_LABEL, BUILD_LABEL, INSTALLATION_LABEL, MANAGED_BY_LABEL, MODE_LABEL,
    POLICIES_ANNOTATION, POLICY_LABEL, RENDERING_ANNOTATION, RESOURCE_LABEL, RESOURCE_TYPE_LABEL,
    SWITCH_LABEL,
};

const KEYS: [&str; 11] = [
    BOUNDARY_LABEL,
    BUILD_LABEL,
    INSTALLATION_LABEL,
    MANAGED_BY_LABEL,
    MODE_LABEL,
    POLICIES_ANNOTATION,
    POLICY_LABEL,
    RENDERING_ANNOTATION,
    RESOURCE_LABEL,
    RESOURCE_TYPE_LABEL,
    SWITCH_LABEL,
];

fn sources(dir: &Path, found: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n != "tests") {
                sources(&path, found);
            }
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            found.push(path);
        }
    }
}

#[test]
fn label_keys_are_spelled_out_only_in_the_labels_module() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut files = Vec::new();
    for krate in fs::read_dir(&crates).unwrap() {
        let src = krate.unwrap().path().join("src");
        if src.is_dir() {
            sources(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "the sources were not found: {files:?}");
    let mut spelled = Vec::new();
    for file in files {
        if file.ends_with("policy/src/labels.rs") {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in code.lines().enumerate() {
            for key in KEYS {
                if line.contains(&format!("\"{key}\"")) {
                    let shown = file.strip_prefix(&crates).unwrap_or(&file);
                    spelled.push(format!("crates/{}:{}: {key}", shown.display(), n + 1));
                }
            }
        }
    }
    assert!(
        spelled.is_empty(),
        "label keys spelled out outside palisade_policy::labels (use its constants):\n{}",
        spelled.join("\n")
    );
}
