//! palisade's wire formats: policy documents (YAML and JSON), catalog files and error bodies,
//! shared by the server, the CLI and the portal. Parsing here turns text into the validated
//! types of `palisade-policy`, and every error names the field by its JSON Pointer.

pub mod catalog_file;
pub mod document;
pub mod error;
pub mod exception;
pub mod json;
pub mod kubeconfig;
pub mod nesting;
pub mod pointer;
pub mod policy_test;
pub mod resource;
pub mod schema;
pub mod source;
pub mod view;
pub mod yaml;

pub use document::{DocumentError, PolicyDocument, PolicySpec, ValidPolicy};
pub use error::{ErrorBody, ErrorCode};
pub use exception::{ExceptionDocument, ExceptionSpec};
