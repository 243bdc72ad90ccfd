//! The renderer's integration tests as one binary, so that they link once: each file here is
//! a module (`cargo test -p palisade-vap --test it MODULE::`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod agreement;
mod corpus;
mod per_boundary;
mod render;
