//! The crate's modules depend on each other in one direction only: no module reaches, through
//! the `crate::` paths of its production code, a module that reaches it back. Read from the
//! sources, so a new import that closes a cycle fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level modules and the `crate::<module>` paths their production code names.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(&src).expect("the crate's sources") {
        let path = entry.expect("a source entry").path();
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        if path.is_dir() {
            for file in std::fs::read_dir(&path).expect("a module directory") {
                let file = file.expect("a source file").path();
                if file.extension().is_some_and(|e| e == "rs") {
                    files.entry(stem.clone()).or_default().push(read(&file));
                }
            }
        } else if path.extension().is_some_and(|e| e == "rs") && stem != "lib" {
            files.entry(stem).or_default().push(read(&path));
        }
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    files
        .into_iter()
        .map(|(module, texts)| {
            let used = texts
                .iter()
                .flat_map(|text| text.split("crate::").skip(1))
                .map(|rest| {
                    rest.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .filter(|used| *used != module && modules.contains(used))
                .collect();
            (module, used)
        })
        .collect()
}

/// A file's production code: what comes before its test module.
fn read(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a readable source file");
    match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => text[..at].to_owned(),
        None => match text.find("#[cfg(test)]\npub(crate) mod tests") {
            Some(at) => text[..at].to_owned(),
            None => text,
        },
    }
}

fn reaches(graph: &BTreeMap<String, BTreeSet<String>>, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut next = vec![from.to_owned()];
    while let Some(module) = next.pop() {
        for used in graph.get(&module).into_iter().flatten() {
            if seen.insert(used.clone()) {
                next.push(used.clone());
            }
        }
    }
    seen
}

#[test]
fn no_module_reaches_a_module_that_reaches_it_back() {
    let graph = graph();
    assert!(graph.len() > 20, "too few modules read: {graph:?}");
    let cycles: Vec<(String, String)> = graph
        .keys()
        .flat_map(|a| {
            reaches(&graph, a)
                .into_iter()
                .filter(|b| a < b && reaches(&graph, b).contains(a))
                .map(|b| (a.clone(), b))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(cycles.is_empty(), "modules on a cycle: {cycles:?}");
}

#[test]
fn the_layouts_render_without_a_cluster() {
    let graph = graph();
    let admission = &graph["admission"];
    assert!(
        !admission.contains("cluster"),
        "admission uses {admission:?}"
    );
}
