//! The Deployment that runs a resource, and its rendering hash.

use palisade_policy::{Catalog, PlanName, ResourceType};
use serde_json::{json, Map, Value};
use sha2::{Digest, Sha256};

use crate::build::try_built_image;
use crate::config::WorkloadConfig;
use crate::error::RenderError;
use crate::labels::{resource_labels, selector_labels, to_json, RENDERING_ANNOTATION};
use crate::model::{Kind, Workload};

/// The hex characters of a rendering hash.
pub const RENDERING_HASH_LEN: usize = 16;
/// Where a static web app's built files are shared between the init container and the server.
pub const SITE_DIR: &str = "/srv";
/// Where the file server reads them (nginx's document root).
pub const FILE_SERVER_ROOT: &str = "/usr/share/nginx/html";

/// The Deployment's name: `<kind slug>-<name>` (`app-shop`, `container-instance-batch`).
pub fn deployment_name(w: &Workload) -> String {
    format!("{}-{}", w.kind.slug(), w.name)
}

/// A quantity of vCPU as Kubernetes writes it: whole cores as `"2"`, else millicores
/// (`0.5` -> `"500m"`), at least `"1m"`.
pub fn cpu_quantity(cpu: f64) -> String {
    // Saturating cast: the catalog and the configuration only hold positive, finite values.
    let millis = ((cpu * 1000.0).round() as u64).max(1);
    if millis.is_multiple_of(1000) {
        format!("{}", millis / 1000)
    } else {
        format!("{millis}m")
    }
}

/// A quantity of memory: `"<MiB>Mi"`.
pub fn memory_quantity(mib: u64) -> String {
    format!("{mib}Mi")
}

/// Requests equal to limits.
fn resources(cpu: f64, memory_mib: u64) -> Value {
    let amounts = json!({"cpu": cpu_quantity(cpu), "memory": memory_quantity(memory_mib)});
    json!({"requests": amounts, "limits": amounts})
}

/// The resources of plan `plan` of `ty`, or why there are none.
fn plan_resources(
    catalog: &Catalog,
    ty: ResourceType,
    plan: Option<&str>,
    what: impl Fn() -> String,
) -> Result<Value, RenderError> {
    let Some(plan) = plan else {
        return Err(RenderError::MissingPlan { what: what() });
    };
    let found = PlanName::parse(plan)
        .ok()
        .and_then(|name| catalog.plan(ty, &name));
    match found {
        Some(found) => Ok(resources(found.cpu, found.memory_mib)),
        None => {
            let known: Vec<&str> = catalog
                .plans(ty)
                .iter()
                .map(|plan| plan.name.as_str())
                .collect();
            Err(RenderError::UnknownPlan {
                what: what(),
                plan: plan.to_owned(),
                ty: ty.as_str(),
                known: if known.is_empty() {
                    "no plans".to_owned()
                } else {
                    known.join(", ")
                },
            })
        }
    }
}

fn not_applicable(w: &Workload, field: &'static str) -> RenderError {
    RenderError::NotApplicable {
        what: w.describe(),
        field,
    }
}

/// Renders the `apps/v1` Deployment that runs `w`, with its rendering hash in the
/// `palisade.dev/rendering` annotation (see [`rendering_of`]).
///
/// An app or function runs its image, or the image its build pushes ([`crate::built_image`]), with
/// its plan's resources. A container instance runs one container per component, in order. A
/// static web app runs the file server, fed by an init container `site` that runs the built
/// image with `TARGET=/srv`: the static-web-app builder makes images that copy the site into
/// `$TARGET` and exit.
pub fn render_deployment(
    w: &Workload,
    catalog: &Catalog,
    config: &WorkloadConfig,
) -> Result<Value, RenderError> {
    let what = || w.describe();
    let ty = w.kind.resource_type();
    if w.kind != Kind::ContainerInstance && !w.components.is_empty() {
        return Err(not_applicable(w, "components"));
    }
    let mut pod = Map::new();
    pod.insert("automountServiceAccountToken".to_owned(), false.into());
    match w.kind {
        Kind::App | Kind::Function => {
            let resources = plan_resources(catalog, ty, w.plan.as_deref(), what)?;
            let image = match (try_built_image(w, config)?, &w.image) {
                (Some(built), _) => built,
                (None, Some(image)) => image.clone(),
                // `try_built_image` refuses an app or function without image and source.
                (None, None) => return Err(nothing_to_run(w)),
            };
            pod.insert(
                "containers".to_owned(),
                json!([{
                    "name": w.kind.slug(),
                    "image": image,
                    "resources": resources,
                }]),
            );
        }
        Kind::ContainerInstance => {
            if w.plan.is_some() {
                return Err(not_applicable(w, "plan"));
            }
            // Refuses an image or a source.
            try_built_image(w, config)?;
            if w.components.is_empty() {
                return Err(RenderError::NoComponents { what: what() });
            }
            let containers = w
                .components
                .iter()
                .map(|component| {
                    let resources =
                        plan_resources(catalog, ty, Some(component.plan.as_str()), || {
                            format!("component '{}' of {}", component.name, what())
                        })?;
                    Ok(json!({
                        "name": component.name,
                        "image": component.image,
                        "resources": resources,
                    }))
                })
                .collect::<Result<Vec<Value>, RenderError>>()?;
            pod.insert("containers".to_owned(), Value::Array(containers));
        }
        Kind::StaticWebApp => {
            if w.plan.is_some() {
                return Err(not_applicable(w, "plan"));
            }
            // `try_built_image` refuses a static web app without a source.
            let Some(image) = try_built_image(w, config)? else {
                return Err(nothing_to_run(w));
            };
            let resources = resources(config.static_web_app_cpu, config.static_web_app_memory_mib);
            pod.insert(
                "initContainers".to_owned(),
                json!([{
                    "name": "site",
                    "image": image,
                    "env": [{"name": "TARGET", "value": SITE_DIR}],
                    "resources": resources,
                    "volumeMounts": [{"name": "site", "mountPath": SITE_DIR}],
                }]),
            );
            pod.insert(
                "containers".to_owned(),
                json!([{
                    "name": "file-server",
                    "image": config.file_server,
                    "resources": resources,
                    "volumeMounts": [{
                        "name": "site",
                        "mountPath": FILE_SERVER_ROOT,
                        "readOnly": true,
                    }],
                }]),
            );
            pod.insert(
                "volumes".to_owned(),
                json!([{"name": "site", "emptyDir": {}}]),
            );
        }
    }
    let labels = to_json(resource_labels(w));
    let mut deployment = json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": deployment_name(w),
            "namespace": w.namespace,
            "labels": labels,
        },
        "spec": {
            "replicas": w.replicas,
            "selector": {"matchLabels": selector_labels(w)},
            "template": {
                "metadata": {"labels": labels},
                "spec": Value::Object(pod),
            },
        },
    });
    let hash = rendering_hash(&deployment);
    if let Some(metadata) = deployment
        .get_mut("metadata")
        .and_then(Value::as_object_mut)
    {
        metadata.insert(
            "annotations".to_owned(),
            json!({ RENDERING_ANNOTATION: hash }),
        );
    }
    Ok(deployment)
}

fn nothing_to_run(w: &Workload) -> RenderError {
    RenderError::NothingToRun {
        what: w.describe(),
        needs: if w.kind == Kind::StaticWebApp {
            "a source"
        } else {
            "an image or a source"
        },
    }
}

/// The rendering hash of a Deployment: the first 16 hex characters of the SHA-256 of its
/// canonical JSON (object keys sorted), without `spec.replicas` and without the rendering
/// annotation. Two renderings with the same hash differ at most in their replicas.
pub fn rendering_hash(deployment: &Value) -> String {
    let mut copy = deployment.clone();
    if let Some(spec) = copy.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("replicas");
    }
    if let Some(metadata) = copy.get_mut("metadata").and_then(Value::as_object_mut) {
        let empty = match metadata
            .get_mut("annotations")
            .and_then(Value::as_object_mut)
        {
            Some(annotations) => {
                annotations.remove(RENDERING_ANNOTATION);
                annotations.is_empty()
            }
            None => false,
        };
        if empty {
            metadata.remove("annotations");
        }
    }
    let mut text = String::new();
    canonical(&copy, &mut text);
    let mut hex = hex::encode(Sha256::digest(text.as_bytes()));
    hex.truncate(RENDERING_HASH_LEN);
    hex
}

/// Writes `value` as JSON with every object's keys sorted, whatever their insertion order.
fn canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (index, key) in keys.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(item) = map.get(key) {
                    canonical(item, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The rendering hash a rendered Deployment carries in its `palisade.dev/rendering` annotation;
/// `None` when it has none (not rendered by this crate).
pub fn rendering_of(deployment: &Value) -> Option<&str> {
    deployment
        .get("metadata")?
        .get("annotations")?
        .get(RENDERING_ANNOTATION)?
        .as_str()
}
