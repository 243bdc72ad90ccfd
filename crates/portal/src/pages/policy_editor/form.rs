//! The editor's form: its state, the spec it builds, and where a save error's JSON Pointer
//! puts the message back in the form.

use palisade_api_types::PolicySpec;
use palisade_app::AppError;
use serde_json::{json, Value};

use crate::form::FormData;
use crate::layout::CodeText;

/// The four rule kinds, in the order the docs list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Plans,
    Labels,
    Registries,
    Latest,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Plans, Kind::Labels, Kind::Registries, Kind::Latest];

    pub(super) fn key(self) -> &'static str {
        match self {
            Kind::Plans => "allowedComputePlans",
            Kind::Labels => "requiredLabels",
            Kind::Registries => "allowedRegistries",
            Kind::Latest => "disallowLatestTag",
        }
    }

    fn from_key(key: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.key() == key)
    }

    pub(super) fn title(self) -> &'static str {
        match self {
            Kind::Plans => "Allowed compute plans",
            Kind::Labels => "Required labels",
            Kind::Registries => "Allowed registries",
            Kind::Latest => "Disallow the latest tag",
        }
    }
}

/// Where a save error belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Field {
    Name,
    Mode,
    Scope,
    Rules,
    Plans,
    /// A row of the labels table.
    LabelRow(usize),
    Registries,
    Latest,
    Yaml,
    General,
}

/// The editor's state: what the form shows and sends.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct EditorForm {
    pub(super) name: String,
    pub(super) audit: bool,
    /// `None`: every attached cluster.
    pub(super) scope: Option<Vec<String>>,
    /// The rule kinds in the stored document's order (so a save keeps the order).
    pub(super) order: Vec<Kind>,
    pub(super) plans: String,
    pub(super) labels: Vec<(String, String)>,
    pub(super) registries: String,
    pub(super) latest: bool,
}

/// The spec a form describes, and how its indices map back to the form.
#[derive(Debug)]
pub(super) struct BuiltSpec {
    pub(super) spec: Value,
    /// `rules[i]` is of kind `kinds[i]`.
    kinds: Vec<Kind>,
    /// `labels[j]` came from row `label_rows[j]`.
    label_rows: Vec<usize>,
    /// `plans[j]` / `registries[j]` came from line `..._lines[j]` (1-based).
    plan_lines: Vec<usize>,
    registry_lines: Vec<usize>,
}

fn entries(text: &str, split_commas: bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (line_index, line) in text.lines().enumerate() {
        let parts: Vec<&str> = if split_commas {
            line.split(',').collect()
        } else {
            vec![line]
        };
        for part in parts {
            let part = part.trim();
            if !part.is_empty() {
                out.push((line_index + 1, part.to_owned()));
            }
        }
    }
    out
}

impl EditorForm {
    pub(super) fn from_spec(name: &str, spec: &PolicySpec) -> EditorForm {
        let mut form = EditorForm {
            name: name.to_owned(),
            audit: matches!(
                spec.mode,
                Some(palisade_api_types::document::ModeDoc::Audit)
            ),
            scope: spec.scope.as_ref().map(|s| s.clusters.clone()),
            ..EditorForm::default()
        };
        for rule in &spec.rules {
            if let Some(plans) = &rule.allowed_compute_plans {
                form.order.push(Kind::Plans);
                form.plans = plans.plans.join("\n");
            }
            if let Some(labels) = &rule.required_labels {
                form.order.push(Kind::Labels);
                form.labels = labels
                    .labels
                    .iter()
                    .map(|l| (l.key.clone(), l.value.clone().unwrap_or_default()))
                    .collect();
            }
            if let Some(registries) = &rule.allowed_registries {
                form.order.push(Kind::Registries);
                form.registries = registries.registries.join("\n");
            }
            if rule.disallow_latest_tag.is_some() {
                form.order.push(Kind::Latest);
                form.latest = true;
            }
        }
        form
    }

    pub(super) fn from_form(name: &str, form: &FormData) -> EditorForm {
        let keys = form.all("label_key");
        let values = form.all("label_value");
        let labels = keys
            .into_iter()
            .enumerate()
            .map(|(i, k)| (k, values.get(i).cloned().unwrap_or_default()))
            .collect();
        EditorForm {
            name: name.to_owned(),
            audit: form.get("mode") == "audit",
            scope: (form.get("scope") == "some").then(|| form.all("scope_cluster")),
            order: form
                .get("order")
                .split(',')
                .filter_map(Kind::from_key)
                .collect(),
            plans: form.get("plans").to_owned(),
            labels,
            registries: form.get("registries").to_owned(),
            latest: form.has("disallow_latest_tag"),
        }
    }

    pub(super) fn included(&self, kind: Kind) -> bool {
        match kind {
            Kind::Plans => !self.plans.trim().is_empty(),
            Kind::Labels => self
                .labels
                .iter()
                .any(|(k, v)| !k.trim().is_empty() || !v.trim().is_empty()),
            Kind::Registries => !self.registries.trim().is_empty(),
            Kind::Latest => self.latest,
        }
    }

    /// Kinds in display and save order: the stored order, then the others.
    pub(super) fn display_order(&self) -> Vec<Kind> {
        let mut kinds: Vec<Kind> = Vec::new();
        for kind in self.order.iter().copied().chain(Kind::ALL) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// The spec this form describes. Entries are passed on as typed, so the API judges them.
    pub(super) fn build(&self) -> BuiltSpec {
        let mut rules = Vec::new();
        let mut kinds = Vec::new();
        let mut label_rows = Vec::new();
        let mut plan_lines = Vec::new();
        let mut registry_lines = Vec::new();
        for kind in self.display_order() {
            if !self.included(kind) {
                continue;
            }
            kinds.push(kind);
            rules.push(match kind {
                Kind::Plans => {
                    let list = entries(&self.plans, true);
                    plan_lines = list.iter().map(|(line, _)| *line).collect();
                    let plans: Vec<String> = list.into_iter().map(|(_, e)| e).collect();
                    json!({"allowedComputePlans": {"plans": plans}})
                }
                Kind::Labels => {
                    let mut labels = Vec::new();
                    for (row, (key, value)) in self.labels.iter().enumerate() {
                        if key.trim().is_empty() && value.trim().is_empty() {
                            continue;
                        }
                        label_rows.push(row);
                        let mut label = json!({"key": key.trim()});
                        if !value.is_empty() {
                            label["value"] = json!(value);
                        }
                        labels.push(label);
                    }
                    json!({"requiredLabels": {"labels": labels}})
                }
                Kind::Registries => {
                    let list = entries(&self.registries, false);
                    registry_lines = list.iter().map(|(line, _)| *line).collect();
                    let registries: Vec<String> = list.into_iter().map(|(_, e)| e).collect();
                    json!({"allowedRegistries": {"registries": registries}})
                }
                Kind::Latest => json!({"disallowLatestTag": {}}),
            });
        }
        let mut spec = json!({"mode": if self.audit { "audit" } else { "enforce" }});
        if let Some(clusters) = &self.scope {
            spec["scope"] = json!({"clusters": clusters});
        }
        spec["rules"] = json!(rules);
        BuiltSpec {
            spec,
            kinds,
            label_rows,
            plan_lines,
            registry_lines,
        }
    }
}

/// Splits an API 400 message into its JSON Pointer and the rest.
fn split_pointer(message: &str) -> Option<(&str, &str)> {
    if !message.starts_with('/') {
        return None;
    }
    message.split_once(": ")
}

/// The form field a save error's pointer names, with a line hint for list entries.
fn field_of(pointer: &str, built: &BuiltSpec) -> (Field, Option<usize>) {
    let segments: Vec<&str> = pointer.split('/').skip(1).collect();
    match segments.as_slice() {
        ["path", "policy", ..] => (Field::Name, None),
        ["mode", ..] => (Field::Mode, None),
        ["scope", ..] => (Field::Scope, None),
        ["rules"] => (Field::Rules, None),
        ["rules", index, rest @ ..] => {
            let Some(kind) = index.parse::<usize>().ok().and_then(|i| built.kinds.get(i)) else {
                return (Field::Rules, None);
            };
            let entry = rest.get(2).and_then(|e| e.parse::<usize>().ok());
            match kind {
                Kind::Plans => (
                    Field::Plans,
                    entry.and_then(|e| built.plan_lines.get(e).copied()),
                ),
                Kind::Registries => (
                    Field::Registries,
                    entry.and_then(|e| built.registry_lines.get(e).copied()),
                ),
                Kind::Labels => match entry.and_then(|e| built.label_rows.get(e)) {
                    Some(row) => (Field::LabelRow(*row), None),
                    None => (Field::LabelRow(0), None),
                },
                Kind::Latest => (Field::Latest, None),
            }
        }
        _ => (Field::General, None),
    }
}

/// One error shown next to its field.
#[derive(Clone, Debug)]
pub(super) struct FieldError {
    pub(super) field: Field,
    /// The API's message, as it answered.
    pub(super) message: String,
    pub(super) line: Option<usize>,
}

/// Places a failed save's message: 400s by their pointer, anything else at the top.
pub(super) fn save_error(
    error: &AppError,
    built: Option<&BuiltSpec>,
    yaml_view: bool,
) -> FieldError {
    let message = error.body().error.message;
    let general = |message: String| FieldError {
        field: if yaml_view {
            Field::Yaml
        } else {
            Field::General
        },
        message,
        line: None,
    };
    match error {
        AppError::InvalidRequest(_) => {
            let Some((pointer, _)) = split_pointer(&message) else {
                return general(message);
            };
            if yaml_view {
                // Pointers of the spec, shown in the document's terms.
                let message = if pointer.starts_with("/path/") {
                    message.clone()
                } else {
                    format!("/spec{message}")
                };
                return general(message);
            }
            match built {
                Some(built) => {
                    let (field, line) = field_of(pointer, built);
                    FieldError {
                        field,
                        message,
                        line,
                    }
                }
                None => general(message),
            }
        }
        other => general(format!("{}: {message}", other.code_text())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pointers_map_back_to_their_fields() {
        let form = EditorForm {
            name: "p".into(),
            plans: "small, medium\nvalky/small".into(),
            labels: vec![
                ("".into(), "".into()),
                ("team".into(), "web".into()),
                ("Bad Key".into(), "".into()),
            ],
            registries: "ghcr.io/acme\n\nnot a registry".into(),
            latest: true,
            ..EditorForm::default()
        };
        let built = form.build();
        assert_eq!(
            built.kinds,
            vec![Kind::Plans, Kind::Labels, Kind::Registries, Kind::Latest]
        );
        assert_eq!(
            field_of("/rules/0/allowedComputePlans/plans/2", &built),
            (Field::Plans, Some(2))
        );
        assert_eq!(
            field_of("/rules/1/requiredLabels/labels/1/key", &built),
            (Field::LabelRow(2), None)
        );
        assert_eq!(
            field_of("/rules/2/allowedRegistries/registries/1", &built),
            (Field::Registries, Some(3))
        );
        assert_eq!(field_of("/rules/3", &built), (Field::Latest, None));
        assert_eq!(field_of("/scope/clusters/0", &built), (Field::Scope, None));
        assert_eq!(field_of("/path/policy", &built), (Field::Name, None));
        assert_eq!(field_of("/rules", &built), (Field::Rules, None));
    }

    #[test]
    fn the_stored_rule_order_is_kept() {
        let form = EditorForm {
            order: vec![Kind::Latest, Kind::Registries],
            registries: "ghcr.io/acme".into(),
            latest: true,
            plans: "small".into(),
            ..EditorForm::default()
        };
        let built = form.build();
        assert_eq!(
            built.kinds,
            vec![Kind::Latest, Kind::Registries, Kind::Plans]
        );
        assert_eq!(built.spec["rules"][0], json!({"disallowLatestTag": {}}));
    }
}
