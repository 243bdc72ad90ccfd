//! Dev-only helpers: the `testdata/` corpus, a CEL evaluator that runs the rendered
//! expressions the way a Kubernetes API server does, on the `cel` crate, PostgreSQL
//! servers for the store's, the server's and the reconciler's tests, and (feature `control-plane`) real
//! Kubernetes control planes for the reconciler's end-to-end tests.

pub mod cel_eval;
#[cfg(feature = "control-plane")]
pub mod control_plane;
pub mod corpus;
pub mod generated;
pub mod postgres;

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
