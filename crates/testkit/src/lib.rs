//! Dev-only helpers: the `testdata/` corpus and its harness, a CEL evaluator that runs the rendered
//! expressions the way a Kubernetes API server does, on the `cel` crate, PostgreSQL
//! servers for the store's, the server's and the reconciler's tests, and (feature `control-plane`) real
//! Kubernetes control planes for the reconciler's end-to-end tests and the benchmarks, and the
//! argument handling of the benchmarks that need them.

pub mod bench;
pub mod cel_eval;
#[cfg(feature = "control-plane")]
pub mod control_plane;
pub mod corpus;
pub mod generated;
pub mod postgres;
pub mod resources;
pub mod stall;

/// The parts of a name unique across processes and runs: this process's id (first, so that a
/// clean-up can tell whether its process is gone), a counter of this process, and the
/// nanoseconds of the clock's current second.
pub(crate) fn unique_parts() -> (u32, u32, u32) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let counter = COUNTER.fetch_add(1, Ordering::Relaxed);
    (std::process::id(), counter, nanos)
}

/// `$PALISADE_CACHE_DIR`, else `~/.cache/palisade`: where the control plane's binaries and the
/// machine's PostgreSQL test server live (the same rule as `testenv/lib.sh`).
pub fn cache_dir() -> std::path::PathBuf {
    match std::env::var_os("PALISADE_CACHE_DIR") {
        Some(dir) if !dir.is_empty() => dir.into(),
        _ => {
            let home = std::env::var_os("HOME").unwrap_or_else(|| "/root".into());
            std::path::PathBuf::from(home).join(".cache/palisade")
        }
    }
}
