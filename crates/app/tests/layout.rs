//! The architecture as the dependency graph shows it (ARCHITECTURE.md, "Dependencies point
//! inward"): adapters depend on the application and never on each other, the application
//! knows no HTTP and no Kubernetes, the HTTP adapter knows no Kubernetes, and the portal
//! reaches neither the server's internals nor the store; one crate, `runtime`, composes them
//! and only the binary depends on it. Checked on the normal (non-dev) dependency trees that
//! `cargo tree` resolves from the lock file. The dev-only crates (the test kit, the
//! benchmarks) are no crate's normal dependency, and the benchmarks live in their own crate.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly"
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Every crate in the normal dependency tree of `package` (itself included).
fn tree(package: &str) -> BTreeSet<String> {
    cargo_tree(package, None)
}

/// `package` and its direct normal dependencies.
fn direct(package: &str) -> BTreeSet<String> {
    cargo_tree(package, Some(1))
}

fn cargo_tree(package: &str, depth: Option<u32>) -> BTreeSet<String> {
    let mut args: Vec<String> = [
        "tree",
        "-p",
        package,
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p}",
        "--offline",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    if let Some(depth) = depth {
        args.extend(["--depth".to_owned(), depth.to_string()]);
    }
    let output = Command::new(env!("CARGO"))
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let crates: BTreeSet<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    assert!(crates.contains(package), "{package} not in its own tree");
    crates
}

/// `package` and every workspace crate that depends on it, directly or not, through normal
/// dependencies.
fn dependents(package: &str) -> BTreeSet<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--workspace",
            "-e",
            "normal",
            "--invert",
            package,
            "--prefix",
            "none",
            "--format",
            "{p}",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "cargo tree --invert {package}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The crates of `forbidden` found in `package`'s tree.
fn intruders(package: &str, forbidden: &[&str]) -> Vec<String> {
    let crates = tree(package);
    forbidden
        .iter()
        .filter(|name| crates.contains(**name))
        .map(|name| (*name).to_owned())
        .collect()
}

const HTTP: [&str; 5] = ["axum", "hyper", "hyper-util", "tower", "tower-http"];
const KUBERNETES: [&str; 3] = ["kube", "kube-client", "k8s-openapi"];

#[test]
fn the_application_knows_no_http_and_no_kubernetes() {
    let mut forbidden: Vec<&str> = HTTP.to_vec();
    forbidden.extend(KUBERNETES);
    forbidden.extend([
        "palisade-server",
        "palisade-portal",
        "palisade-reconciler",
        "palisade-cli",
        "utoipa",
    ]);
    assert_eq!(intruders("palisade-app", &forbidden), Vec::<String>::new());
}

#[test]
fn the_http_adapter_knows_no_kubernetes_and_no_other_adapter() {
    let mut forbidden: Vec<&str> = KUBERNETES.to_vec();
    forbidden.extend(["palisade-reconciler", "palisade-portal", "palisade-cli"]);
    assert_eq!(
        intruders("palisade-server", &forbidden),
        Vec::<String>::new()
    );
}

#[test]
fn the_portal_reaches_neither_the_server_nor_the_store() {
    let mut forbidden: Vec<&str> = KUBERNETES.to_vec();
    forbidden.extend(["palisade-server", "palisade-reconciler", "palisade-cli"]);
    assert_eq!(
        intruders("palisade-portal", &forbidden),
        Vec::<String>::new()
    );
    // The store is reached only through the application's use cases.
    let own = direct("palisade-portal");
    let reached: Vec<&str> = ["palisade-store", "sqlx"]
        .into_iter()
        .filter(|name| own.contains(*name))
        .collect();
    assert_eq!(reached, Vec::<&str>::new());
}

#[test]
fn the_kubernetes_adapter_knows_no_http_adapter() {
    let forbidden = [
        "palisade-server",
        "palisade-portal",
        "palisade-cli",
        "axum",
        "utoipa",
    ];
    assert_eq!(
        intruders("palisade-reconciler", &forbidden),
        Vec::<String>::new()
    );
}

/// The reconciler reaches the store only through the application (issue 24): it reads the
/// desired state, opens credentials and records statuses with the application's methods.
#[test]
fn the_kubernetes_adapter_reaches_the_store_only_through_the_application() {
    let own = direct("palisade-reconciler");
    let reached: Vec<&str> = ["palisade-store", "sqlx"]
        .into_iter()
        .filter(|name| own.contains(*name))
        .collect();
    assert_eq!(reached, Vec::<&str>::new());
    assert!(own.contains("palisade-app"));
}

#[test]
fn the_wire_contract_depends_on_the_core_only() {
    let mut forbidden: Vec<&str> = HTTP.to_vec();
    forbidden.extend(KUBERNETES);
    forbidden.extend(["tokio", "sqlx", "reqwest"]);
    assert_builds_on_the_core_only("palisade-api-types", &forbidden);
}

/// `package` reaches no palisade crate but the policy core, and none of `forbidden`.
fn assert_builds_on_the_core_only(package: &str, forbidden: &[&str]) {
    let crates = tree(package);
    let palisade: Vec<&String> = crates
        .iter()
        .filter(|c| c.starts_with("palisade-") && c.as_str() != package)
        .collect();
    assert_eq!(palisade, vec!["palisade-policy"], "{package}");
    assert_eq!(
        intruders(package, forbidden),
        Vec::<String>::new(),
        "{package}"
    );
}

/// The workload renderer is pure like the policy core it builds on: no I/O crate, no async
/// runtime, no client; it renders JSON that the Kubernetes adapter sends.
#[test]
fn the_workload_renderer_is_pure() {
    let mut forbidden: Vec<&str> = HTTP.to_vec();
    forbidden.extend(KUBERNETES);
    forbidden.extend(["tokio", "sqlx", "reqwest"]);
    assert_builds_on_the_core_only("palisade-workload", &forbidden);
}

/// The admission renderer is pure too (`reconciler` → `vap` → `policy`): it builds the
/// Kubernetes objects as values (`k8s-openapi`'s types, no client), and knows no store, no
/// HTTP and no async runtime; the Kubernetes adapter sends what it renders.
#[test]
fn the_admission_renderer_is_pure() {
    let mut forbidden: Vec<&str> = HTTP.to_vec();
    forbidden.extend(["kube", "kube-client", "tokio", "sqlx", "reqwest"]);
    assert_builds_on_the_core_only("palisade-vap", &forbidden);
    assert!(
        dependents("palisade-vap").contains("palisade-reconciler"),
        "the Kubernetes adapter renders with it"
    );
}

/// One composition root (issue 24): `palisade-runtime` turns a configuration into the store,
/// the application, the API, the portal and the reconcile loop. Only the binary depends on it
/// (tests and benchmarks may, as dev-dependencies), and it depends on what it composes.
#[test]
fn only_the_binary_depends_on_the_composition_root() {
    assert_eq!(
        dependents("palisade-runtime"),
        BTreeSet::from(["palisade-cli".to_owned(), "palisade-runtime".to_owned()])
    );
    let composed: BTreeSet<String> = direct("palisade-runtime")
        .into_iter()
        .filter(|c| c.starts_with("palisade-") && c != "palisade-runtime")
        .collect();
    let expected = [
        "palisade-app",
        "palisade-policy",
        "palisade-portal",
        "palisade-reconciler",
        "palisade-server",
        "palisade-store",
        "palisade-workload",
    ];
    assert_eq!(composed, expected.map(str::to_owned).into());
}

/// The store is opened in one place: no adapter and not the binary list it among their
/// dependencies; the application (its port) and the composition root do.
#[test]
fn only_the_composition_root_opens_the_store() {
    for package in [
        "palisade-server",
        "palisade-portal",
        "palisade-reconciler",
        "palisade-cli",
    ] {
        assert!(
            !direct(package).contains("palisade-store"),
            "{package} lists palisade-store"
        );
    }
    assert!(direct("palisade-runtime").contains("palisade-store"));
}

/// The crates only tests and benchmarks use: no crate depends on them but as a
/// dev-dependency, and they are never published.
const DEV_ONLY: [(&str, &str); 2] = [("palisade-testkit", "testkit"), ("palisade-bench", "bench")];

#[test]
fn the_dev_only_crates_are_no_normal_dependency() {
    for (package, dir) in DEV_ONLY {
        assert_eq!(
            dependents(package),
            BTreeSet::from([package.to_owned()]),
            "{package} is a normal dependency"
        );
        let manifest = crates_dir().join(dir).join("Cargo.toml");
        let text = std::fs::read_to_string(&manifest).unwrap();
        assert!(
            text.lines().any(|l| l.trim() == "publish = false"),
            "{} lacks publish = false",
            manifest.display()
        );
    }
    // Everything the benchmarks use is a dev-dependency: their crate's own tree is itself.
    assert_eq!(
        tree("palisade-bench"),
        BTreeSet::from(["palisade-bench".to_owned()])
    );
}

/// The workspace's `crates/` directory.
fn crates_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/app has a parent")
}

/// Every benchmark lives in `palisade-bench`: no other crate, the adapters (server, portal,
/// reconciler, store) and the binary included, has a `benches/` directory (whose files
/// `cargo` would find by itself) or a `[[bench]]` target, so their builds and dependency
/// lists carry no benchmark.
#[test]
fn benchmarks_live_in_the_bench_crate_only() {
    let mut crates = BTreeSet::new();
    let mut found = Vec::new();
    for entry in std::fs::read_dir(crates_dir()).unwrap() {
        let dir = entry.unwrap().path();
        let manifest = dir.join("Cargo.toml");
        if !manifest.is_file() {
            continue;
        }
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        crates.insert(name.clone());
        if name == "bench" {
            continue;
        }
        if dir.join("benches").exists() {
            found.push(format!("crates/{name}/benches"));
        }
        let text = std::fs::read_to_string(&manifest).unwrap();
        if text
            .lines()
            .any(|l| l.trim_start().starts_with("[[bench]]"))
        {
            found.push(format!("crates/{name}/Cargo.toml: [[bench]]"));
        }
    }
    for name in ["bench", "server", "portal", "reconciler", "store", "cli"] {
        assert!(crates.contains(name), "no crates/{name}: {crates:?}");
    }
    assert_eq!(found, Vec::<String>::new());
}
