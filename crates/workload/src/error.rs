//! Why a workload cannot be rendered.

/// Why a workload cannot be rendered. `what` names the resource the way the API writes it,
/// e.g. `app 'shop'` or `component 'web' of container_instance 'batch'`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RenderError {
    /// An app or function without a plan.
    #[error("{what} has no plan")]
    MissingPlan {
        /// The resource (or component) without a plan.
        what: String,
    },
    /// A plan the catalog does not list for the resource's type.
    #[error(
        "{what} has plan '{plan}', which the catalog does not list for {ty}; it lists {known}"
    )]
    UnknownPlan {
        /// The resource (or component) with the plan.
        what: String,
        /// The plan as given.
        plan: String,
        /// The resource type whose catalog was searched.
        ty: &'static str,
        /// The plans the catalog lists for that type, comma-separated (or `no plans`).
        known: String,
    },
    /// A field given to a kind that does not take it (a plan on a static web app, an image on
    /// a container instance, components on an app...).
    #[error("{what} takes no {field}")]
    NotApplicable {
        /// The resource.
        what: String,
        /// The field, as the API writes it.
        field: &'static str,
    },
    /// An app or function with neither an image nor a source, or a static web app without a
    /// source.
    #[error("{what} has nothing to run: it needs {needs}")]
    NothingToRun {
        /// The resource.
        what: String,
        /// What it needs, e.g. `an image or a source`.
        needs: &'static str,
    },
    /// An app or function with both an image and a source.
    #[error("{what} has both an image and a source; it runs from one of them")]
    ImageAndSource {
        /// The resource.
        what: String,
    },
    /// A container instance without components.
    #[error("{what} has no components")]
    NoComponents {
        /// The resource.
        what: String,
    },
    /// A kind that cannot be built from an upload (apps build from git only).
    #[error("{what} cannot be built from an upload, only from git")]
    UploadNotSupported {
        /// The resource.
        what: String,
    },
    /// An upload source, but the caller gave no [`crate::Fetch`] for it.
    #[error("{what} is built from upload '{id}', but no fetch URL and token were given for it")]
    MissingFetch {
        /// The resource.
        what: String,
        /// The upload's id.
        id: String,
    },
}
