//! Pure renderer: a platform resource (app, function, static web app, container instance)
//! becomes the Kubernetes objects the platform runs for it: an `apps/v1` Deployment and, for a
//! resource built from a source, the `batch/v1` Job that builds its image (SPEC 5).
//!
//! No I/O, no async, no clock, no randomness: the same input renders the same objects, as
//! `serde_json::Value`s in the shape the API server accepts. The reconciler applies them.

pub mod build;
pub mod config;
pub mod deployment;
pub mod error;
pub mod labels;
pub mod model;

pub use build::{build_hash, build_job_name, builder_image, built_image, render_build};
pub use config::{ConfigError, WorkloadConfig};
pub use deployment::{deployment_name, render_deployment, rendering_hash, rendering_of};
pub use error::RenderError;
pub use labels::{owned_selector, resource_labels, workload_selector};
pub use model::{Container, Fetch, Kind, Source, Workload};

#[cfg(test)]
mod tests;
