//! Dev-only helpers: the `testdata/` corpus, a CEL evaluator that runs the rendered
//! expressions the way a Kubernetes API server does, on the `cel` crate, and PostgreSQL
//! servers for the store's and the server's tests.

pub mod cel_eval;
pub mod control_plane;
pub mod corpus;
pub mod postgres;
