//! Dev-only helpers: the `testdata/` corpus, a CEL evaluator that runs the rendered
//! expressions the way a Kubernetes API server does, on the `cel` crate, PostgreSQL
//! servers for the store's and the server's tests, and (feature `control-plane`) real
//! Kubernetes control planes for the reconciler's end-to-end tests.

pub mod cel_eval;
#[cfg(feature = "control-plane")]
pub mod control_plane;
pub mod corpus;
pub mod generated;
pub mod postgres;
