//! The command line's integration tests as one binary, so that they link once: each file here
//! is a module (`cargo test -p palisade-cli --test it MODULE::`), `common` what the client
//! tests share. Each test runs `palisade` as a process of its own (`CARGO_BIN_EXE_palisade`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod common;

mod chart_monitoring;
mod check;
mod cli;
mod client;
mod client_more;
mod cluster_access;
mod fleet;
mod helm_chart;
mod logging;
mod malformed;
mod metrics;
mod policy_test;
mod readme;
mod serve_database;
mod serve_tls;
mod serve_workloads;
mod tokens;
mod untrusted_input;
