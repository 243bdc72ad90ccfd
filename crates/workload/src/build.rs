//! Building a resource from its source: the build hash, the built image and the build Job.

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::config::WorkloadConfig;
use crate::error::RenderError;
use crate::labels::{resource_labels, to_json, BUILD_LABEL};
use crate::model::{Fetch, Kind, Source, Workload};

/// The hex characters of a build hash.
pub const BUILD_HASH_LEN: usize = 10;
/// The longest Kubernetes object name that is a DNS-1123 label (Job names become pod labels).
pub const MAX_JOB_NAME_LEN: usize = 63;
/// The build container's cpu, requested and limited.
pub const BUILD_CPU: &str = "1";
/// The build container's memory, requested and limited.
pub const BUILD_MEMORY: &str = "2Gi";

/// A resource's build, when it has one.
#[derive(Debug)]
struct Build<'a> {
    source: &'a Source,
    builder: String,
    hash: String,
}

/// Checks that `w` has a consistent image/source for its kind, and returns its build: `None`
/// when it runs from an image or is a container instance.
fn build_of<'a>(
    w: &'a Workload,
    config: &WorkloadConfig,
) -> Result<Option<Build<'a>>, RenderError> {
    let what = || w.describe();
    let source = match w.kind {
        Kind::App | Kind::Function => match (&w.image, &w.source) {
            (Some(_), Some(_)) => return Err(RenderError::ImageAndSource { what: what() }),
            (None, None) => {
                return Err(RenderError::NothingToRun {
                    what: what(),
                    needs: "an image or a source",
                })
            }
            (Some(_), None) => return Ok(None),
            (None, Some(source)) => source,
        },
        Kind::StaticWebApp => {
            if w.image.is_some() {
                return Err(RenderError::NotApplicable {
                    what: what(),
                    field: "image",
                });
            }
            match &w.source {
                Some(source) => source,
                None => {
                    return Err(RenderError::NothingToRun {
                        what: what(),
                        needs: "a source",
                    })
                }
            }
        }
        Kind::ContainerInstance => {
            if w.image.is_some() {
                return Err(RenderError::NotApplicable {
                    what: what(),
                    field: "image",
                });
            }
            if w.source.is_some() {
                return Err(RenderError::NotApplicable {
                    what: what(),
                    field: "source",
                });
            }
            return Ok(None);
        }
    };
    let builder = match (w.kind, source) {
        (Kind::App, Source::Git(_)) => config.app_builder.clone(),
        (Kind::App, Source::Upload { .. }) => {
            return Err(RenderError::UploadNotSupported { what: what() })
        }
        (Kind::Function, Source::Git(_)) => config.function_builder.clone(),
        (Kind::Function, Source::Upload { .. }) => {
            format!("{}:latest", config.function_upload_builder)
        }
        // Container instances returned above; static web apps build either source.
        (Kind::StaticWebApp | Kind::ContainerInstance, _) => config.static_web_app_builder.clone(),
    };
    let hash = hash_of(w, source, &builder, config);
    Ok(Some(Build {
        source,
        builder,
        hash,
    }))
}

/// The first [`BUILD_HASH_LEN`] hex characters of the SHA-256 of a JSON array of strings: what
/// is built (type, boundary, name), from what (source), by what (builder image) and where it is
/// pushed (build registry). A JSON array keeps the parts apart whatever they contain.
fn hash_of(w: &Workload, source: &Source, builder: &str, config: &WorkloadConfig) -> String {
    let (origin, digest) = match source {
        Source::Git(url) => (url.as_str(), ""),
        Source::Upload { id, sha256 } => (id.as_str(), sha256.as_str()),
    };
    let canonical = Value::from(vec![
        "palisade-build/1",
        w.kind.as_str(),
        w.boundary.as_str(),
        w.name.as_str(),
        source.kind(),
        origin,
        digest,
        builder,
        config.build_registry.as_str(),
    ])
    .to_string();
    let mut hex = hex::encode(Sha256::digest(canonical.as_bytes()));
    hex.truncate(BUILD_HASH_LEN);
    hex
}

/// The build hash of `w` (10 hex characters, deterministic), `None` when nothing is built: the
/// resource runs from an image, is a container instance, or cannot be built (see
/// [`render_build`] for why).
pub fn build_hash(w: &Workload, config: &WorkloadConfig) -> Option<String> {
    build_of(w, config).ok().flatten().map(|build| build.hash)
}

/// The image a build pushes and the Deployment runs:
/// `<buildRegistry>/<boundary>/<kind slug>-<name>:<build hash>`; `None` when nothing is built.
pub fn built_image(w: &Workload, config: &WorkloadConfig) -> Option<String> {
    try_built_image(w, config).ok().flatten()
}

/// [`built_image`], or why `w`'s image and source do not fit its kind.
pub(crate) fn try_built_image(
    w: &Workload,
    config: &WorkloadConfig,
) -> Result<Option<String>, RenderError> {
    Ok(build_of(w, config)?.map(|build| image_of(w, config, &build)))
}

fn image_of(w: &Workload, config: &WorkloadConfig, build: &Build<'_>) -> String {
    format!(
        "{}/{}/{}-{}:{}",
        config.build_registry,
        w.boundary,
        w.kind.slug(),
        w.name,
        build.hash
    )
}

/// The builder image: app from git, `appBuilder`; function from git, `functionBuilder`; function
/// from an upload, `<functionUploadBuilder>:latest`; static web app, `staticWebAppBuilder`.
/// `None` when nothing is built.
pub fn builder_image(w: &Workload, config: &WorkloadConfig) -> Option<String> {
    build_of(w, config)
        .ok()
        .flatten()
        .map(|build| build.builder)
}

/// The build Job's name, `<app|fn|swa>-<name>-<build hash>`, the name cut so that the whole is
/// at most 63 characters and the cut does not end with `-`; `None` when nothing is built.
pub fn build_job_name(w: &Workload, config: &WorkloadConfig) -> Option<String> {
    build_of(w, config)
        .ok()
        .flatten()
        .map(|build| job_name_of(w, &build))
}

fn job_name_of(w: &Workload, build: &Build<'_>) -> String {
    let short = w.kind.short();
    let room = MAX_JOB_NAME_LEN.saturating_sub(short.len() + build.hash.len() + 2);
    // Names are ASCII (DNS-1123 labels); `char_indices` keeps a non-ASCII name from splitting a
    // character all the same.
    let end = w
        .name
        .char_indices()
        .nth(room)
        .map_or(w.name.len(), |(index, _)| index);
    let name = w.name[..end].trim_end_matches('-');
    format!("{short}-{name}-{}", build.hash)
}

/// Renders the `batch/v1` Job that builds `w` from its source and pushes [`built_image`];
/// `Ok(None)` when `w` runs from an image or is a container instance.
///
/// `fetch` says how the build downloads an upload; it is required for an upload source and
/// ignored for git. Its token is put in the pod's environment as `SOURCE_TOKEN`, so it should
/// be short-lived and scoped to that one upload.
pub fn render_build(
    w: &Workload,
    config: &WorkloadConfig,
    fetch: Option<&Fetch>,
) -> Result<Option<Value>, RenderError> {
    let Some(build) = build_of(w, config)? else {
        return Ok(None);
    };
    let image = image_of(w, config, &build);
    let mut env = vec![];
    match build.source {
        Source::Git(url) => {
            env.push(env_var("SOURCE_URL", url));
            env.push(env_var("SOURCE_KIND", "git"));
            env.push(env_var("IMAGE", &image));
        }
        Source::Upload { id, .. } => {
            let Some(fetch) = fetch else {
                return Err(RenderError::MissingFetch {
                    what: w.describe(),
                    id: id.clone(),
                });
            };
            env.push(env_var("SOURCE_URL", &fetch.url));
            env.push(env_var("SOURCE_KIND", "upload"));
            env.push(env_var("IMAGE", &image));
            env.push(env_var("SOURCE_TOKEN", &fetch.token));
        }
    }
    let mut labels = resource_labels(w);
    labels.insert(BUILD_LABEL.to_owned(), build.hash.clone());
    let labels = to_json(labels);
    let resources = json!({"cpu": BUILD_CPU, "memory": BUILD_MEMORY});
    Ok(Some(json!({
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name_of(w, &build),
            "namespace": w.namespace,
            "labels": labels,
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": false,
                    "containers": [{
                        "name": "build",
                        "image": build.builder,
                        "env": env,
                        "resources": {"requests": resources, "limits": resources},
                    }],
                },
            },
        },
    })))
}

fn env_var(name: &str, value: &str) -> Value {
    json!({"name": name, "value": value})
}
