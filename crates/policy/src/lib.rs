//! The pure policy core of palisade: what the rule reference says, as values in and values out.
//!
//! Nothing here performs I/O, spawns tasks or reads a clock. Adapters (HTTP, storage,
//! Kubernetes, CLI, portal) parse their input into the validated types of this crate and ask
//! it for decisions and messages.

pub mod admission;
pub mod catalog;
pub mod compute_plan;
pub mod defaulting;
pub mod exception;
pub mod image_ref;
pub mod label;
pub mod labels;
pub mod message;
pub mod name;
pub mod namespace;
pub mod plan;
pub mod policy;
pub mod reason;
pub mod resource_type;
pub mod rollout;
pub mod scan;
pub mod warning;

pub use admission::{
    AdmissionObject, AdmissionRequest, AdmissionVerdict, Denial, Operation, Subresource,
};
pub use catalog::{Catalog, CatalogPlan};
pub use compute_plan::{PickerOption, PlanDecision, PlanError};
pub use exception::{Exception, ExceptionWarning, ObjectMatch, ResourceRef};
pub use image_ref::{ImageRef, RegistryPrefix};
pub use label::{LabelKey, LabelRequirement, LabelValue};
pub use name::Name;
pub use plan::{PlanEntry, PlanName};
pub use policy::{Mode, Policy, Rule, RuleKind, SaveWarning, Scope};
pub use resource_type::ResourceType;
pub use warning::{PlatformObject, Warning};
