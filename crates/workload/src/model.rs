//! The input of the renderer: one platform resource that runs as a workload.

use std::collections::BTreeMap;

use palisade_policy::ResourceType;

/// The kinds of platform resource that run as a Kubernetes workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// A long-running app, from an image or built from git.
    App,
    /// A function, from an image or built from git or an upload.
    Function,
    /// A static web app, built from git or an upload and served by the file server.
    StaticWebApp,
    /// A container instance: one or more containers, each with its own image and plan.
    ContainerInstance,
}

impl Kind {
    /// Every kind.
    pub const ALL: [Kind; 4] = [
        Kind::App,
        Kind::Function,
        Kind::StaticWebApp,
        Kind::ContainerInstance,
    ];

    /// The resource type of this kind, whose plans the catalog lists.
    pub fn resource_type(self) -> ResourceType {
        match self {
            Kind::App => ResourceType::App,
            Kind::Function => ResourceType::Function,
            Kind::StaticWebApp => ResourceType::StaticWebApp,
            Kind::ContainerInstance => ResourceType::ContainerInstance,
        }
    }

    /// The type as the API writes it: `app`, `function`, `static_web_app`,
    /// `container_instance` (the value of the `palisade.dev/resource-type` label).
    pub fn as_str(self) -> &'static str {
        self.resource_type().as_str()
    }

    /// The kind in object names: `app`, `function`, `static-web-app`, `container-instance`.
    pub fn slug(self) -> &'static str {
        match self {
            Kind::App => "app",
            Kind::Function => "function",
            Kind::StaticWebApp => "static-web-app",
            Kind::ContainerInstance => "container-instance",
        }
    }

    /// The kind in build Job names: `app`, `fn`, `swa` (`ci` for container instances, which
    /// are never built).
    pub fn short(self) -> &'static str {
        match self {
            Kind::App => "app",
            Kind::Function => "fn",
            Kind::StaticWebApp => "swa",
            Kind::ContainerInstance => "ci",
        }
    }
}

/// Where a built resource's code comes from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Source {
    /// A git repository, by its `https` URL.
    Git(String),
    /// An uploaded archive.
    Upload {
        /// The upload's opaque id (`[a-z0-9-]`).
        id: String,
        /// The lowercase hex SHA-256 of the uploaded archive.
        sha256: String,
    },
}

impl Source {
    /// `git` or `upload`, the value of the build's `SOURCE_KIND`.
    pub fn kind(&self) -> &'static str {
        match self {
            Source::Git(_) => "git",
            Source::Upload { .. } => "upload",
        }
    }
}

/// One container of a container instance.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Container {
    /// The container's name (a DNS-1123 label, unique in its instance).
    pub name: String,
    /// The image it runs.
    pub image: String,
    /// Its plan, in the `container_instance` catalog.
    pub plan: String,
}

/// A platform resource that runs as a workload, as the API validated it.
///
/// The renderer trusts the API's validation of each field (names are DNS-1123 labels, labels
/// follow Kubernetes' syntax, images are image references); it only refuses combinations it
/// cannot render (see [`crate::RenderError`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Workload {
    /// The boundary the resource belongs to.
    pub boundary: String,
    /// The id of the palisade installation that owns the rendered objects.
    pub installation: String,
    /// What kind of resource this is.
    pub kind: Kind,
    /// The resource's name.
    pub name: String,
    /// The namespace the objects are placed in.
    pub namespace: String,
    /// The user's labels, copied onto every object (palisade's own labels win).
    pub labels: BTreeMap<String, String>,
    /// The Deployment's replicas.
    pub replicas: i32,
    /// App and function: the plan, in the catalog of that type. Others: `None`.
    pub plan: Option<String>,
    /// App or function running from an image.
    pub image: Option<String>,
    /// App, function or static web app built from a source.
    pub source: Option<Source>,
    /// Container instance only: its containers, in order.
    pub components: Vec<Container>,
}

impl Workload {
    /// `app 'shop'`: how errors name this resource.
    pub(crate) fn describe(&self) -> String {
        format!("{} '{}'", self.kind.as_str(), self.name)
    }
}

/// How the build fetches an uploaded source: given by the caller for [`Source::Upload`].
#[derive(Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The URL the build downloads the archive from (`SOURCE_URL`).
    pub url: String,
    /// The bearer token for that URL (`SOURCE_TOKEN`).
    pub token: String,
}

impl std::fmt::Debug for Fetch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fetch")
            .field("url", &self.url)
            .field("token", &"<redacted>")
            .finish()
    }
}
