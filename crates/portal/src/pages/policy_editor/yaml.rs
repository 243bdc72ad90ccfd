//! The YAML view: the whole `BoundaryPolicy` document the form describes, and reading one back.

use palisade_api_types::document::{API_VERSION, KIND};
use palisade_api_types::view::PolicyView;
use palisade_api_types::PolicyDocument;
use serde_json::{json, Value};

use super::form::EditorForm;

fn metadata_of(record: Option<&PolicyView>) -> Value {
    let stored: Value = record
        .map(|r| r.metadata.clone())
        .unwrap_or_else(|| json!({}));
    let mut out = serde_json::Map::new();
    for key in ["labels", "annotations"] {
        if let Some(map) = stored
            .get(key)
            .filter(|m| m.as_object().is_some_and(|o| !o.is_empty()))
        {
            out.insert(key.to_owned(), map.clone());
        }
    }
    Value::Object(out)
}

/// The whole document as YAML: what `palisade apply` takes.
pub(super) fn document_yaml(
    boundary: &str,
    form: &EditorForm,
    record: Option<&PolicyView>,
) -> String {
    let mut metadata = json!({"name": form.name, "boundary": boundary});
    if let (Value::Object(out), Value::Object(stored)) = (&mut metadata, metadata_of(record)) {
        out.extend(stored);
    }
    let document = json!({
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": form.build().spec,
    });
    serde_yaml_ng::to_string(&document).unwrap_or_default()
}

/// Reads the YAML view: one `BoundaryPolicy` document of this boundary (and this policy, when
/// editing) whose labels and annotations are unchanged. Returns the name and the spec's JSON.
pub(super) fn spec_from_yaml(
    text: &str,
    boundary: &str,
    existing: Option<&PolicyView>,
) -> Result<(String, Vec<u8>), String> {
    // One document at a time: the others are only counted.
    let mut documents = palisade_api_types::yaml::each_document::<PolicyDocument>(text);
    let first = documents.next();
    let found = usize::from(first.is_some()) + documents.count();
    let Some((_, document)) = first.filter(|_| found == 1) else {
        return Err(format!(
            "the YAML must hold exactly one BoundaryPolicy document, found {found}"
        ));
    };
    let document = document.map_err(|e| e.to_string())?;
    if document.api_version != API_VERSION {
        return Err(format!(
            "/apiVersion: must be {API_VERSION}, got '{}'",
            document.api_version
        ));
    }
    if document.kind != KIND {
        return Err(format!("/kind: must be {KIND}, got '{}'", document.kind));
    }
    if document.metadata.boundary != boundary {
        return Err(format!(
            "/metadata/boundary: this editor saves policies of boundary '{boundary}', got '{}'",
            document.metadata.boundary
        ));
    }
    if let Some(record) = existing {
        if document.metadata.name != record.name {
            return Err(format!(
                "/metadata/name: this editor saves policy '{}'; to rename, create a new policy, got '{}'",
                record.name, document.metadata.name
            ));
        }
    }
    let stored = metadata_of(existing);
    let empty = json!({});
    let same = |key: &str, map: &std::collections::BTreeMap<String, String>| {
        let stored = stored.get(key).unwrap_or(&empty);
        serde_json::to_value(map).unwrap_or_default() == *stored
    };
    if !same("labels", &document.metadata.labels) {
        return Err(
            "/metadata/labels: the portal saves the spec only; change labels with palisade apply"
                .into(),
        );
    }
    if !same("annotations", &document.metadata.annotations) {
        return Err("/metadata/annotations: the portal saves the spec only; change annotations with palisade apply".into());
    }
    let spec = serde_json::to_vec(&document.spec).map_err(|e| e.to_string())?;
    Ok((document.metadata.name, spec))
}
