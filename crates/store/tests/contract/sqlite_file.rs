//! The SQLite file itself: processes starting together on a new file all open it (the
//! migrations run under a lock), and the file palisade creates is private (mode 0600).
//!
//! The concurrent start runs in separate processes, as it happens in production: the test
//! re-invokes its own binary, whose `child_opens_the_store` test (named by its path in the
//! binary) then opens the store named by `PALISADE_TEST_CHILD_DB` at the moment
//! `PALISADE_TEST_CHILD_AT` names.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use palisade_store::sqlite::SqliteStore;
use palisade_store::Store;

const CHILD_DB: &str = "PALISADE_TEST_CHILD_DB";
const CHILD_AT: &str = "PALISADE_TEST_CHILD_AT";
const PROCESSES: usize = 4;
const ROUNDS: usize = 3;

fn unix_millis() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// The name the test harness gives `child_opens_the_store`: its path in the test binary.
fn child_test() -> String {
    let module = module_path!();
    match module.split_once("::") {
        Some((_, path)) => format!("{path}::child_opens_the_store"),
        None => "child_opens_the_store".to_owned(),
    }
}

/// In a child process: waits for the common start time, opens the store, and uses it.
/// Elsewhere: does nothing.
#[tokio::test]
async fn child_opens_the_store() {
    let (Ok(db), Ok(at)) = (std::env::var(CHILD_DB), std::env::var(CHILD_AT)) else {
        return;
    };
    let at: u128 = at.parse().unwrap();
    let now = unix_millis();
    if at > now {
        std::thread::sleep(Duration::from_millis((at - now) as u64));
    }
    let store = match SqliteStore::connect(&db).await {
        Ok(store) => store,
        Err(error) => panic!("child {}: connect failed: {error:?}", std::process::id()),
    };
    store.list_boundaries().await.unwrap();
}

#[test]
fn processes_starting_together_on_a_new_file_all_open_it() {
    let exe = std::env::current_exe().unwrap();
    for round in 0..ROUNDS {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("sqlite://{}", dir.path().join("palisade.db").display());
        let at = unix_millis() + 700;
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                Command::new(&exe)
                    .args(["--exact", &child_test(), "--nocapture"])
                    .env(CHILD_DB, &db)
                    .env(CHILD_AT, at.to_string())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut failures = Vec::new();
        for child in children {
            let output = child.wait_with_output().unwrap();
            if !output.status.success() {
                failures.push(format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
        }
        assert!(
            failures.is_empty(),
            "round {round}: {} of {PROCESSES} processes could not open the new file:\n{}",
            failures.len(),
            failures.join("\n---\n")
        );
    }
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test]
async fn a_new_database_file_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data").join("palisade.db");
    for url in [
        format!("sqlite://{}", path.display()),
        dir.path().join("plain.db").display().to_string(),
    ] {
        let store = SqliteStore::connect(&url).await.unwrap();
        store.create_boundary("b", None).await.unwrap();
        drop(store);
    }
    for file in [path, dir.path().join("plain.db")] {
        assert_eq!(mode(&file), 0o600, "{}", file.display());
        for suffix in ["-wal", "-shm", ".lock"] {
            let sibling = file.with_file_name(format!(
                "{}{suffix}",
                file.file_name().unwrap().to_string_lossy()
            ));
            if sibling.exists() {
                assert_eq!(mode(&sibling), 0o600, "{}", sibling.display());
            }
        }
    }
}
