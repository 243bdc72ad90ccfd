//! Dev-only helpers: the `testdata/` corpus and a CEL evaluator that runs the rendered
//! expressions the way a Kubernetes API server does, on the `cel` crate.

pub mod cel_eval;
pub mod corpus;
