//! What the user typed into a resource form, the API request body or merge patch it makes,
//! and where a create error's JSON Pointer puts the message back in the form.

use palisade_policy::ResourceType;
use serde_json::{json, Value};

use crate::form::FormData;

/// Where a create error belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Field {
    Name,
    Plan,
    Image,
    Source,
    Labels,
    Component(usize),
    Cluster,
    Namespace,
    Replicas,
    /// The uploaded code (`upload`, or the file of the upload form).
    Upload,
    General,
}

/// What the user typed, kept across a failed submission.
#[derive(Clone, Debug, Default)]
pub(super) struct Typed {
    pub(super) name: String,
    pub(super) plan: String,
    pub(super) image: String,
    pub(super) source: String,
    pub(super) labels: Vec<(String, String)>,
    pub(super) components: Vec<(String, String, String)>,
    pub(super) cluster: String,
    pub(super) namespace: String,
    /// As typed; sent as a JSON number when it reads as one (the API judges its range).
    pub(super) replicas: String,
    /// A stored resource's uploaded code (shown, never sent by the form).
    pub(super) upload: String,
}

impl Typed {
    pub(super) fn from_form(form: &FormData) -> Typed {
        let zip2 = |a: Vec<String>, b: Vec<String>| -> Vec<(String, String)> {
            a.into_iter()
                .enumerate()
                .map(|(i, x)| (x, b.get(i).cloned().unwrap_or_default()))
                .collect()
        };
        let names = form.all("component_name");
        let plans = form.all("component_plan");
        let images = form.all("component_image");
        Typed {
            name: form.get("name").trim().to_owned(),
            plan: form.get("plan").to_owned(),
            image: form.get("image").trim().to_owned(),
            source: form.get("source").trim().to_owned(),
            labels: zip2(form.all("label_key"), form.all("label_value")),
            components: names
                .into_iter()
                .enumerate()
                .map(|(i, n)| {
                    (
                        n,
                        plans.get(i).cloned().unwrap_or_default(),
                        images.get(i).cloned().unwrap_or_default(),
                    )
                })
                .collect(),
            cluster: form.get("cluster").trim().to_owned(),
            namespace: form.get("namespace").trim().to_owned(),
            replicas: form.get("replicas").trim().to_owned(),
            upload: String::new(),
        }
    }

    pub(super) fn from_body(body: &Value) -> Typed {
        let text = |key: &str| {
            body.get(key)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let labels = body
            .get("labels")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_owned()))
                    .collect()
            })
            .unwrap_or_default();
        let components = body
            .get("components")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .map(|c| {
                        let field =
                            |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                        (field("name"), field("plan"), field("image"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        Typed {
            name: text("name"),
            plan: text("plan"),
            image: text("image"),
            source: text("source"),
            labels,
            components,
            cluster: text("cluster"),
            namespace: text("namespace"),
            replicas: match body.get("replicas") {
                Some(Value::Number(n)) => n.to_string(),
                _ => String::new(),
            },
            upload: text("upload"),
        }
    }

    /// The JSON merge patch that turns `stored` into what the form says: changed fields, and
    /// `null` for fields and labels the form no longer has.
    pub(super) fn patch(&self, ty: ResourceType, stored: &Value) -> (Value, Vec<usize>) {
        let (mut body, rows) = self.body(ty);
        let Value::Object(wanted) = &mut body else {
            return (body, rows);
        };
        wanted.remove("type");
        wanted.remove("name");
        let mut patch = serde_json::Map::new();
        for key in [
            "plan",
            "components",
            "image",
            "source",
            "cluster",
            "namespace",
            "replicas",
        ] {
            match (wanted.remove(key), stored.get(key)) {
                (Some(new), Some(old)) if new == *old => {}
                (Some(new), _) => {
                    patch.insert(key.to_owned(), new);
                }
                (None, Some(_)) => {
                    patch.insert(key.to_owned(), Value::Null);
                }
                (None, None) => {}
            }
        }
        let old_labels = stored.get("labels").and_then(Value::as_object);
        match (wanted.remove("labels"), old_labels) {
            (Some(Value::Object(new)), old) => {
                let mut labels = serde_json::Map::new();
                for (key, value) in &new {
                    if old.and_then(|o| o.get(key)) != Some(value) {
                        labels.insert(key.clone(), value.clone());
                    }
                }
                for key in old.into_iter().flat_map(|o| o.keys()) {
                    if !new.contains_key(key) {
                        labels.insert(key.clone(), Value::Null);
                    }
                }
                if !labels.is_empty() {
                    patch.insert("labels".to_owned(), Value::Object(labels));
                }
            }
            (_, Some(_)) => {
                patch.insert("labels".to_owned(), Value::Null);
            }
            _ => {}
        }
        (Value::Object(patch), rows)
    }

    /// The API request body, and which form row each component came from.
    pub(super) fn body(&self, ty: ResourceType) -> (Value, Vec<usize>) {
        let mut body = json!({"type": ty.as_str(), "name": self.name});
        let mut rows = Vec::new();
        if ty == ResourceType::ContainerInstance {
            let mut components = Vec::new();
            for (row, (name, plan, image)) in self.components.iter().enumerate() {
                if name.trim().is_empty() && plan.is_empty() && image.trim().is_empty() {
                    continue;
                }
                rows.push(row);
                components.push(json!({"name": name.trim(), "plan": plan, "image": image.trim()}));
            }
            body["components"] = json!(components);
        } else if ty.has_plans() && !self.plan.is_empty() {
            body["plan"] = json!(self.plan);
        }
        let workload = ty.is_workload();
        if workload {
            for (key, value) in [("image", &self.image), ("source", &self.source)] {
                let accepts_image = !matches!(
                    ty,
                    ResourceType::StaticWebApp | ResourceType::ContainerInstance
                );
                let accepts = (key == "image" && accepts_image)
                    || (key == "source" && ty != ResourceType::ContainerInstance);
                if accepts && !value.is_empty() {
                    body[key] = json!(value);
                }
            }
            let labels: serde_json::Map<String, Value> = self
                .labels
                .iter()
                .filter(|(k, _)| !k.trim().is_empty())
                .map(|(k, v)| (k.trim().to_owned(), json!(v)))
                .collect();
            if !labels.is_empty() {
                body["labels"] = Value::Object(labels);
            }
            if !self.cluster.is_empty() {
                body["cluster"] = json!(self.cluster);
            }
            if !self.namespace.is_empty() {
                body["namespace"] = json!(self.namespace);
            }
            if let Some(replicas) = replicas_value(&self.replicas) {
                body["replicas"] = replicas;
            }
        }
        (body, rows)
    }
}

/// The `replicas` of a request body: nothing when left empty, a JSON number when the text
/// reads as one (`3`, `-1`, `1.5`), the text itself otherwise; the API answers anything but a
/// whole number in its range with a 400 at `/replicas`.
pub(super) fn replicas_value(text: &str) -> Option<Value> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(match serde_json::from_str::<serde_json::Number>(text) {
        Ok(number) => Value::Number(number),
        Err(_) => json!(text),
    })
}

pub(super) fn field_of(pointer: &str, component_rows: &[usize]) -> Field {
    let segments: Vec<&str> = pointer.split('/').skip(1).collect();
    match segments.as_slice() {
        ["name", ..] => Field::Name,
        ["plan", ..] => Field::Plan,
        ["image", ..] => Field::Image,
        ["source", ..] => Field::Source,
        ["labels", ..] => Field::Labels,
        ["cluster", ..] => Field::Cluster,
        ["namespace", ..] => Field::Namespace,
        ["replicas", ..] => Field::Replicas,
        ["upload", ..] => Field::Upload,
        ["components", index, ..] => match index.parse::<usize>() {
            Ok(i) => Field::Component(component_rows.get(i).copied().unwrap_or(i)),
            Err(_) => Field::Component(0),
        },
        ["components"] => Field::Component(0),
        _ => Field::General,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicas_go_as_numbers_when_they_read_as_one() {
        assert_eq!(replicas_value(""), None);
        assert_eq!(replicas_value("  "), None);
        assert_eq!(replicas_value("3"), Some(json!(3)));
        assert_eq!(replicas_value(" 0 "), Some(json!(0)));
        assert_eq!(replicas_value("-1"), Some(json!(-1)));
        assert_eq!(replicas_value("1.5"), Some(json!(1.5)));
        // Not a number: sent as typed, for the API to say what it expects.
        assert_eq!(replicas_value("three"), Some(json!("three")));
    }

    #[test]
    fn replicas_and_upload_errors_belong_to_their_fields() {
        assert_eq!(field_of("/replicas", &[]), Field::Replicas);
        assert_eq!(field_of("/upload", &[]), Field::Upload);
        assert_eq!(field_of("/cluster", &[]), Field::Cluster);
    }

    #[test]
    fn a_workload_body_carries_replicas_and_a_database_none() {
        let typed = Typed {
            name: "web".into(),
            plan: "small".into(),
            image: "ghcr.io/acme/web:1.0".into(),
            replicas: "2".into(),
            ..Typed::default()
        };
        assert_eq!(typed.body(ResourceType::App).0["replicas"], json!(2));
        assert!(typed
            .body(ResourceType::Postgresql)
            .0
            .get("replicas")
            .is_none());
        // Emptied in an edit form: removed by the patch.
        let stored = json!({"type": "app", "name": "web", "plan": "small",
            "image": "ghcr.io/acme/web:1.0", "replicas": 2});
        let emptied = Typed {
            replicas: String::new(),
            ..typed
        };
        assert_eq!(
            emptied.patch(ResourceType::App, &stored).0,
            json!({"replicas": null})
        );
    }
}
