//! The server's integration tests as one binary, so that they link once: each file here is
//! a module (`cargo test -p palisade-server --test it MODULE::`), `common` their harness.
//! `tests/metrics.rs` stays a binary of its own: the metrics recorder is one per process,
//! and the other tests would add series while it counts them.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod common;

mod auth_matrix;
mod cluster_lists;
mod compute_plans;
mod exceptions;
mod fail_closed;
mod hardening;
mod input_validation;
mod kubeconfig;
mod namespaces;
mod not_applied;
mod platform_images;
mod preview;
mod race;
mod requests;
mod untrusted_input;
mod uploads;
mod uploads_load;
mod versions;
mod workload_detail;
