//! Platform resources on the wire (SPEC 4.1, 5): the request bodies of create and merge-patch,
//! their validation into a `Resource` with JSON-Pointer errors, and the plans they carry.

use std::collections::BTreeMap;

use palisade_policy::compute_plan::Plans;
use palisade_policy::image_ref::ImageRef;
use palisade_policy::label::{LabelKey, LabelValue};
use palisade_policy::{Catalog, Name, PlanName, ResourceType};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::document::DocumentError;
use crate::source::validate_source;

/// A validated resource body, as stored and returned (without server-added fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    #[serde(rename = "type")]
    pub resource_type: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Component>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Functions and static web apps: the id of code uploaded for the build
    /// (`POST /v1/boundaries/{b}/uploads`), instead of a git `source`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upload: Option<String>,
    /// Workloads: how many pods run it (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<u32>,
}

/// The most replicas a workload may ask for.
pub const MAX_REPLICAS: u32 = 1000;

/// One container-instance component: its own plan and image.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Component {
    pub name: String,
    pub plan: String,
    pub image: String,
}

fn error(pointer: impl Into<String>, message: impl ToString) -> DocumentError {
    DocumentError {
        pointer: pointer.into(),
        message: message.to_string(),
    }
}

/// The fields each type accepts besides `type` and `name`.
fn allowed_fields(ty: ResourceType) -> &'static [&'static str] {
    match ty {
        ResourceType::App => &[
            "plan",
            "image",
            "source",
            "labels",
            "cluster",
            "namespace",
            "replicas",
        ],
        ResourceType::Function => &[
            "plan",
            "image",
            "source",
            "upload",
            "labels",
            "cluster",
            "namespace",
            "replicas",
        ],
        ResourceType::ContainerInstance => {
            &["components", "labels", "cluster", "namespace", "replicas"]
        }
        ResourceType::StaticWebApp => &[
            "source",
            "upload",
            "labels",
            "cluster",
            "namespace",
            "replicas",
        ],
        ResourceType::Postgresql
        | ResourceType::Sqlserver
        | ResourceType::Qdrant
        | ResourceType::Valkey => &["plan"],
    }
}

fn string_field(
    object: &serde_json::Map<String, Value>,
    key: &str,
) -> Result<Option<String>, DocumentError> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(error(
            format!("/{key}"),
            format!("must be a string, got {}", json_kind(other)),
        )),
    }
}

/// The JSON type name of a value, for messages.
pub fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn plan_in_catalog(
    catalog: &Catalog,
    ty: ResourceType,
    pointer: &str,
    text: &str,
) -> Result<PlanName, DocumentError> {
    let listing = || {
        catalog
            .plans(ty)
            .iter()
            .map(|p| p.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let plan = PlanName::parse(text).map_err(|e| error(pointer, e))?;
    if !catalog.contains(ty, &plan) {
        return Err(error(
            pointer,
            format!(
                "plan '{text}' is not in the catalog of {ty}; its plans are {}",
                listing()
            ),
        ));
    }
    Ok(plan)
}

impl Resource {
    /// Validates a request body (already parsed as JSON) into a resource. Errors name the
    /// field by its JSON Pointer. `catalog` decides which plans exist (checked before any
    /// policy is read). `previous` is the stored resource on an update: a plan it already has
    /// is kept even if the catalog no longer lists it.
    pub fn from_value(
        value: &Value,
        catalog: &Catalog,
        previous: Option<&Resource>,
    ) -> Result<(Resource, ResourceType), DocumentError> {
        let Value::Object(object) = value else {
            return Err(error(
                "",
                format!("must be a JSON object, got {}", json_kind(value)),
            ));
        };
        let type_text = match object.get("type") {
            None | Some(Value::Null) => return Err(error("/type", "is required")),
            Some(Value::String(text)) => text.clone(),
            Some(other) => {
                return Err(error(
                    "/type",
                    format!("must be a string, got {}", json_kind(other)),
                ))
            }
        };
        let ty = ResourceType::parse(&type_text).map_err(|e| error("/type", e))?;
        let name = match string_field(object, "name")? {
            None => return Err(error("/name", "is required")),
            Some(name) => name,
        };
        Name::parse(&name).map_err(|e| error("/name", e))?;
        let allowed = allowed_fields(ty);
        for key in object.keys() {
            if key == "type" || key == "name" || allowed.contains(&key.as_str()) {
                continue;
            }
            let message = if key == "plan" && ty == ResourceType::StaticWebApp {
                "static web apps take no plan".to_owned()
            } else {
                format!(
                    "unknown field for {ty}; expected one of type, name, {}",
                    allowed.join(", ")
                )
            };
            return Err(error(format!("/{}", crate::pointer::escape(key)), message));
        }
        let mut resource = Resource {
            resource_type: type_text,
            name,
            plan: None,
            components: None,
            image: string_field(object, "image")?,
            source: string_field(object, "source")?,
            labels: None,
            cluster: string_field(object, "cluster")?,
            namespace: string_field(object, "namespace")?,
            upload: string_field(object, "upload")?,
            replicas: replicas(object.get("replicas"))?,
        };
        if allowed.contains(&"plan") {
            let plan =
                string_field(object, "plan")?.ok_or_else(|| error("/plan", "is required"))?;
            if previous.and_then(|p| p.plan.as_deref()) != Some(plan.as_str()) {
                plan_in_catalog(catalog, ty, "/plan", &plan)?;
            }
            resource.plan = Some(plan);
        }
        // Checked before anything pulls or builds from them.
        if let Some(image) = &resource.image {
            ImageRef::parse(image).map_err(|e| error("/image", e))?;
        }
        if let Some(source) = &resource.source {
            validate_source(source).map_err(|e| error("/source", e))?;
        }
        if let Some(upload) = &resource.upload {
            if !is_upload_id(upload) {
                return Err(error(
                    "/upload",
                    "must be the id of an upload (as POST .../uploads answered it)",
                ));
            }
        }
        let runs_from = [
            resource.image.is_some(),
            resource.source.is_some(),
            resource.upload.is_some(),
        ];
        let given = runs_from.iter().filter(|given| **given).count();
        match ty {
            ResourceType::App if given != 1 => {
                return Err(error(
                    "/image",
                    format!("a {ty} runs from exactly one of image or source"),
                ));
            }
            ResourceType::Function if given != 1 => {
                return Err(error(
                    "/image",
                    format!("a {ty} runs from exactly one of image, source or upload"),
                ));
            }
            ResourceType::StaticWebApp if given > 1 => {
                return Err(error(
                    "/upload",
                    format!("a {ty} is built from one of source or upload, not both"),
                ));
            }
            _ => {}
        }
        for key in ["cluster", "namespace"] {
            if let Some(text) = object.get(key).and_then(Value::as_str) {
                Name::parse(text).map_err(|e| error(format!("/{key}"), e))?;
            }
        }
        if let Some(labels) = object.get("labels").filter(|v| !v.is_null()) {
            let Value::Object(labels) = labels else {
                return Err(error(
                    "/labels",
                    format!("must be an object, got {}", json_kind(labels)),
                ));
            };
            let mut out = BTreeMap::new();
            for (key, value) in labels {
                let at = format!("/labels/{}", crate::pointer::escape(key));
                LabelKey::parse(key).map_err(|e| error(&at, e))?;
                let Value::String(value) = value else {
                    return Err(error(
                        at,
                        format!("must be a string, got {}", json_kind(value)),
                    ));
                };
                LabelValue::parse(value).map_err(|e| error(&at, e))?;
                out.insert(key.clone(), value.clone());
            }
            resource.labels = Some(out);
        }
        if ty == ResourceType::ContainerInstance {
            let kept = previous
                .and_then(|p| p.components.as_deref())
                .unwrap_or(&[]);
            resource.components = Some(components(object.get("components"), catalog, kept)?);
        }
        Ok((resource, ty))
    }

    /// The plans this resource has, for plan-change detection.
    pub fn plans(&self) -> Plans {
        if let Some(components) = &self.components {
            return Plans::Components(
                components
                    .iter()
                    .filter_map(|c| {
                        Some((Name::parse(&c.name).ok()?, PlanName::parse(&c.plan).ok()?))
                    })
                    .collect(),
            );
        }
        match self.plan.as_deref().map(PlanName::parse) {
            Some(Ok(plan)) => Plans::Single(plan),
            _ => Plans::None,
        }
    }
}

/// An upload id as the application makes them: `u-` and 20 lowercase hex digits.
pub fn is_upload_id(text: &str) -> bool {
    text.strip_prefix("u-").is_some_and(|hex| {
        hex.len() == 20 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

fn replicas(value: Option<&Value>) -> Result<Option<u32>, DocumentError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    match value.as_u64() {
        Some(n) if n <= u64::from(MAX_REPLICAS) => Ok(u32::try_from(n).ok()),
        _ => Err(error(
            "/replicas",
            format!(
                "must be a whole number from 0 to {MAX_REPLICAS}, got {}",
                match value {
                    Value::Number(n) => n.to_string(),
                    other => json_kind(other).to_owned(),
                }
            ),
        )),
    }
}

fn components(
    value: Option<&Value>,
    catalog: &Catalog,
    kept: &[Component],
) -> Result<Vec<Component>, DocumentError> {
    let list = match value {
        None | Some(Value::Null) => return Err(error("/components", "is required")),
        Some(Value::Array(list)) => list,
        Some(other) => {
            return Err(error(
                "/components",
                format!("must be an array, got {}", json_kind(other)),
            ))
        }
    };
    if list.is_empty() {
        return Err(error("/components", "must list at least one component"));
    }
    if list.len() > 64 {
        return Err(error(
            "/components",
            format!("must list at most 64 components, got {}", list.len()),
        ));
    }
    let mut out: Vec<Component> = Vec::with_capacity(list.len());
    for (i, item) in list.iter().enumerate() {
        let at = format!("/components/{i}");
        let component: Component = crate::json::typed(item).map_err(|e| DocumentError {
            pointer: format!("{at}{}", e.pointer),
            message: e.message,
        })?;
        Name::parse(&component.name).map_err(|e| error(format!("{at}/name"), e))?;
        if let Some(first) = out.iter().position(|c| c.name == component.name) {
            return Err(error(
                format!("{at}/name"),
                format!(
                    "component '{}' is already listed at /components/{first}",
                    component.name
                ),
            ));
        }
        let unchanged = kept
            .iter()
            .any(|k| k.name == component.name && k.plan == component.plan);
        if !unchanged {
            plan_in_catalog(
                catalog,
                ResourceType::ContainerInstance,
                &format!("{at}/plan"),
                &component.plan,
            )?;
        }
        ImageRef::parse(&component.image).map_err(|e| error(format!("{at}/image"), e))?;
        out.push(component);
    }
    Ok(out)
}

/// Applies a JSON merge patch (RFC 7396) to `target`.
pub fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(object) = target {
        for (key, value) in patch {
            if value.is_null() {
                object.remove(key);
            } else {
                merge_patch(object.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}
