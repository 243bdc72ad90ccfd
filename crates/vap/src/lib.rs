//! Pure renderer: palisade's policies become `ValidatingAdmissionPolicy` objects and bindings
//! (admissionregistration.k8s.io/v1, SPEC 3.4) in one of three layouts ([`layout`]), plus the
//! installation's guards ([`guard`]). [`render`] holds what every layout shares.
//!
//! No client, no async: the reconciler applies what this crate returns.

pub mod cel;
pub mod guard;
pub mod layout;
pub mod render;

pub use cel::{PolicyCel, MATCH_CONDITIONS};
pub use guard::{
    boundary_label_guard, guard_message, guard_name, parameters_guard, parameters_guard_message,
    parameters_guard_name,
};
pub use layout::per_boundary::{
    boundary_object_name, render_boundary, render_boundary_excepted, BoundaryObjects,
};
pub use layout::per_policy::{object_name, render, render_excepted, Rendered};
pub use layout::shared::{
    parameters, parameters_definition, parameters_excepted, shared_objects, SharedObjects,
};
pub use layout::{choose, Choice, ClusterFacts, Layout, LayoutChoice, Thresholds};
pub use layout::{per_boundary, per_policy, shared};
pub use render::FIELD_MANAGER;
