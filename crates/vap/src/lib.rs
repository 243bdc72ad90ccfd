//! Pure renderer: a palisade policy becomes one `ValidatingAdmissionPolicy` and one
//! `ValidatingAdmissionPolicyBinding` (admissionregistration.k8s.io/v1, SPEC 3.4).
//!
//! No client, no async: the reconciler applies what this crate returns.

pub mod cel;
pub mod render;

pub use cel::{PolicyCel, MATCH_CONDITIONS};
pub use render::{object_name, render, Rendered, FIELD_MANAGER};
