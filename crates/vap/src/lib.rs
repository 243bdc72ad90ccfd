//! Pure renderer: a palisade policy becomes one `ValidatingAdmissionPolicy` and one
//! `ValidatingAdmissionPolicyBinding` (admissionregistration.k8s.io/v1, SPEC 3.4); so does the
//! installation's boundary-label guard. The shared layout ([`shared`]) is one policy and two
//! bindings per installation, with each policy's rules in parameter objects; the per-boundary
//! layout ([`per_boundary`]) is one policy and one binding per boundary and mode.
//!
//! No client, no async: the reconciler applies what this crate returns.

pub mod cel;
pub mod guard;
pub mod per_boundary;
pub mod render;
pub mod shared;

pub use cel::{PolicyCel, MATCH_CONDITIONS};
pub use guard::{
    boundary_label_guard, guard_message, guard_name, parameters_guard, parameters_guard_message,
    parameters_guard_name,
};
pub use per_boundary::{boundary_object_name, render_boundary, BoundaryObjects};
pub use render::{object_name, render, Rendered, FIELD_MANAGER};
pub use shared::{parameters, parameters_definition, shared_objects, Layout, SharedObjects};
