//! The policy editor: a form with one part per rule kind and a YAML view of the same document.
//! Both save through the application's `save_policy`, as the API does, so validation, normalisation and warnings are the
//! API's. A save error's JSON Pointer (`/rules/1/allowedRegistries/registries/0: ...`) is mapped
//! back to the form field it names. Deleting asks for confirmation first.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_api_types::document::{API_VERSION, KIND};
use palisade_api_types::view::PolicyView;
use palisade_api_types::{PolicyDocument, PolicySpec};
use palisade_app::caller::Access;
use palisade_app::policies::SaveCondition;
use palisade_app::AppError;
use palisade_app::{App, PageRequest};
use serde_json::{json, Value};

use super::{require_form_session, require_session};
use crate::form::FormData;
use crate::layout::{
    alert, csrf_field, error_response, html_response, page, see_other, CodeText, Ctx,
};
use crate::session::Session;

/// The four rule kinds, in the order the docs list them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Plans,
    Labels,
    Registries,
    Latest,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Plans, Kind::Labels, Kind::Registries, Kind::Latest];

    fn key(self) -> &'static str {
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

    fn title(self) -> &'static str {
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
pub enum Field {
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
pub struct EditorForm {
    pub name: String,
    pub audit: bool,
    /// `None`: every attached cluster.
    pub scope: Option<Vec<String>>,
    /// The rule kinds in the stored document's order (so a save keeps the order).
    pub order: Vec<Kind>,
    pub plans: String,
    pub labels: Vec<(String, String)>,
    pub registries: String,
    pub latest: bool,
}

/// The spec a form describes, and how its indices map back to the form.
#[derive(Debug)]
pub struct BuiltSpec {
    pub spec: Value,
    /// `rules[i]` is of kind `kinds[i]`.
    pub kinds: Vec<Kind>,
    /// `labels[j]` came from row `label_rows[j]`.
    pub label_rows: Vec<usize>,
    /// `plans[j]` / `registries[j]` came from line `..._lines[j]` (1-based).
    pub plan_lines: Vec<usize>,
    pub registry_lines: Vec<usize>,
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
    pub fn from_spec(name: &str, spec: &PolicySpec) -> EditorForm {
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

    pub fn from_form(name: &str, form: &FormData) -> EditorForm {
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

    fn included(&self, kind: Kind) -> bool {
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
    fn display_order(&self) -> Vec<Kind> {
        let mut kinds: Vec<Kind> = Vec::new();
        for kind in self.order.iter().copied().chain(Kind::ALL) {
            if !kinds.contains(&kind) {
                kinds.push(kind);
            }
        }
        kinds
    }

    /// The spec this form describes. Entries are passed on as typed, so the API judges them.
    pub fn build(&self) -> BuiltSpec {
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
pub fn split_pointer(message: &str) -> Option<(&str, &str)> {
    if !message.starts_with('/') {
        return None;
    }
    message.split_once(": ")
}

/// The form field a save error's pointer names, with a line hint for list entries.
pub fn field_of(pointer: &str, built: &BuiltSpec) -> (Field, Option<usize>) {
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
pub struct FieldError {
    pub field: Field,
    /// The API's message, as it answered.
    pub message: String,
    pub line: Option<usize>,
}

/// What the editor page shows besides the form.
#[derive(Debug, Default)]
struct Outcome {
    errors: Vec<FieldError>,
    saved: Option<(palisade_app::policies::WriteAction, Vec<String>)>,
    /// The YAML text to show instead of the form's document (after a YAML-view error).
    yaml_text: Option<String>,
}

struct EditorPage<'a> {
    boundary: &'a str,
    /// `None` for a new policy.
    existing: Option<&'a PolicyView>,
    form: EditorForm,
    attached: Vec<String>,
    outcome: Outcome,
    extra_label_rows: usize,
}

fn action_of(boundary: &str, existing: Option<&PolicyView>) -> String {
    match existing {
        Some(record) => format!("/boundaries/{boundary}/policies/{}/edit", record.name),
        None => format!("/boundaries/{boundary}/policies/new"),
    }
}

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
fn document_yaml(boundary: &str, form: &EditorForm, record: Option<&PolicyView>) -> String {
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

fn error_for<'e>(errors: &'e [FieldError], field: &Field) -> Vec<&'e FieldError> {
    errors.iter().filter(|e| &e.field == field).collect()
}

fn field_id(field: &Field) -> String {
    match field {
        Field::Name => "name".into(),
        Field::Mode => "mode-enforce".into(),
        Field::Scope => "scope-all".into(),
        Field::Rules => "rules".into(),
        Field::Plans => "plans".into(),
        Field::LabelRow(row) => format!("label-key-{row}"),
        Field::Registries => "registries".into(),
        Field::Latest => "disallow-latest-tag".into(),
        Field::Yaml => "yaml".into(),
        Field::General => "editor".into(),
    }
}

fn error_id(field: &Field) -> String {
    format!("error-{}", field_id(field))
}

fn field_errors(ctx: &Ctx, errors: &[FieldError], field: &Field) -> Markup {
    let list = error_for(errors, field);
    html! {
        @if !list.is_empty() {
            div class="field-error" id=(error_id(field)) {
                @for e in list {
                    p {
                        @if let Some(line) = e.line { (ctx.t("Line")) " " (line) ": " }
                        span lang="en" { (e.message) }
                    }
                }
            }
        }
    }
}

/// `aria-describedby`/`aria-invalid` for a control with errors.
fn described(errors: &[FieldError], field: &Field) -> Option<String> {
    (!error_for(errors, field).is_empty()).then(|| error_id(field))
}

fn render_editor(ctx: &Ctx, session: &Session, p: &EditorPage<'_>) -> Markup {
    let form = &p.form;
    let errors = &p.outcome.errors;
    let b = p.boundary;
    let action = action_of(b, p.existing);
    let title = match p.existing {
        Some(record) => format!("{} '{}'", ctx.t("Edit policy"), record.name),
        None => ctx.t("New policy").to_owned(),
    };
    let etag = p.existing.map(|r| r.etag.clone()).unwrap_or_default();
    let order = form
        .display_order()
        .into_iter()
        .filter(|k| form.included(*k))
        .map(Kind::key)
        .collect::<Vec<_>>()
        .join(",");
    let yaml = p
        .outcome
        .yaml_text
        .clone()
        .unwrap_or_else(|| document_yaml(b, form, p.existing));
    let mut cluster_choices = p.attached.clone();
    for c in form.scope.iter().flatten() {
        if !cluster_choices.contains(c) {
            cluster_choices.push(c.clone());
        }
    }
    let label_rows = form.labels.len().max(1) + p.extra_label_rows;
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (b) } { (b) } " / " (title)
        }
        h1 { (title) }
        @if let Some((written, warnings)) = &p.outcome.saved {
            (alert("success", html! {
                p { (ctx.t("Saved.")) " " span lang="en" { "(" (written.as_str()) ")" } }
                @if !warnings.is_empty() {
                    p { (ctx.t("Save warnings:")) }
                    ul id="save-warnings" { @for w in warnings { li lang="en" { (w) } } }
                }
            }))
        }
        @if !errors.is_empty() {
            (alert("error", html! {
                p { (ctx.t("The policy was not saved:")) }
                ul id="save-errors" {
                    @for e in errors {
                        li { a href={ "#" (field_id(&e.field)) } lang="en" { (e.message) } }
                    }
                }
            }))
        }
        (field_errors(ctx, errors, &Field::General))
        div class="editor" {
        section class="card" aria-labelledby="form-heading" {
            h2 id="form-heading" { (ctx.t("Form")) }
            form method="post" action=(action) id="policy-form" novalidate {
                // The first submit button is the one Enter presses: saving, not adding a row.
                button type="submit" name="action" value="save" class="visually-hidden" tabindex="-1" aria-hidden="true" { (ctx.t("Save")) }
                (csrf_field(session))
                input type="hidden" name="view" value="form";
                input type="hidden" name="etag" value=(etag);
                input type="hidden" name="order" value=(order);
                div class="field" {
                    label for="name" { (ctx.t("Policy name")) }
                    @if p.existing.is_some() {
                        input id="name" name="name" type="text" value=(form.name) readonly;
                    } @else {
                        input id="name" name="name" type="text" value=(form.name) required
                            autocomplete="off" aria-describedby=[described(errors, &Field::Name)];
                    }
                    (field_errors(ctx, errors, &Field::Name))
                }
                fieldset {
                    legend { (ctx.t("Mode")) }
                    div class="choice" {
                        input type="radio" id="mode-enforce" name="mode" value="enforce" checked[!form.audit];
                        label for="mode-enforce" { "enforce" span class="hint" { " — " (ctx.t("deny what the rules disallow")) } }
                    }
                    div class="choice" {
                        input type="radio" id="mode-audit" name="mode" value="audit" checked[form.audit];
                        label for="mode-audit" { "audit" span class="hint" { " — " (ctx.t("only warn and record")) } }
                    }
                    (field_errors(ctx, errors, &Field::Mode))
                }
                fieldset {
                    legend { (ctx.t("Scope")) }
                    div class="choice" {
                        input type="radio" id="scope-all" name="scope" value="all" checked[form.scope.is_none()];
                        label for="scope-all" { (ctx.t("Every cluster attached to the boundary")) }
                    }
                    div class="choice" {
                        input type="radio" id="scope-some" name="scope" value="some" checked[form.scope.is_some()];
                        label for="scope-some" { (ctx.t("Only these clusters:")) }
                    }
                    @if cluster_choices.is_empty() {
                        p class="hint" { (ctx.t("No cluster is attached to this boundary.")) }
                    }
                    div class="indent" {
                        @for (i, c) in cluster_choices.iter().enumerate() {
                            div class="choice" {
                                input type="checkbox" id={ "scope-cluster-" (i) } name="scope_cluster" value=(c)
                                    checked[form.scope.as_ref().is_some_and(|s| s.contains(c))];
                                label for={ "scope-cluster-" (i) } { (c) }
                            }
                        }
                    }
                    p class="hint" { (ctx.t("Compute plans are checked in the whole boundary whatever the scope.")) }
                    (field_errors(ctx, errors, &Field::Scope))
                }
                fieldset id="rules" {
                    legend { (ctx.t("Rules")) }
                    p class="hint" { (ctx.t("Fill in the rules this policy has; an empty rule is left out.")) }
                    (field_errors(ctx, errors, &Field::Rules))
                    @for kind in form.display_order() {
                        (rule_fieldset(ctx, kind, form, errors, label_rows))
                    }
                }
                div class="buttons" {
                    button type="submit" name="action" value="save" class="primary" { (ctx.t("Save")) }
                    @if let Some(record) = p.existing {
                        a class="button danger" href={ "/boundaries/" (b) "/policies/" (record.name) "/delete" } { (ctx.t("Delete…")) }
                    }
                }
            }
        }
        section class="card" aria-labelledby="yaml-heading" {
            h2 id="yaml-heading" { (ctx.t("YAML")) }
            form method="post" action=(action) id="yaml-form" {
                (csrf_field(session))
                input type="hidden" name="view" value="yaml";
                input type="hidden" name="etag" value=(etag);
                div class="field" {
                    label for="yaml" { (ctx.t("The same policy as a document (what palisade apply takes)")) }
                    textarea id="yaml" name="yaml" rows="18" spellcheck="false"
                        aria-describedby=[described(errors, &Field::Yaml)] { (yaml) }
                    (field_errors(ctx, errors, &Field::Yaml))
                    p class="hint" { (ctx.t("The portal saves the spec. Labels and annotations are kept as stored; change them with palisade apply.")) }
                }
                button type="submit" name="action" value="save" class="primary" { (ctx.t("Save YAML")) }
            }
        }
        }
    };
    page(ctx, Some(session), &title, body)
}

fn rule_fieldset(
    ctx: &Ctx,
    kind: Kind,
    form: &EditorForm,
    errors: &[FieldError],
    label_rows: usize,
) -> Markup {
    html! {
        fieldset class="rule" id={ "rule-" (kind.key()) } {
            legend { (ctx.t(kind.title())) " " code class="muted" { (kind.key()) } }
            @match kind {
                Kind::Plans => {
                    div class="field" {
                        label for="plans" { (ctx.t("Plans (one per line or separated by commas; typed entries such as valkey/small apply to one type)")) }
                        textarea id="plans" name="plans" rows="3" spellcheck="false"
                            aria-describedby=[described(errors, &Field::Plans)] { (form.plans) }
                        (field_errors(ctx, errors, &Field::Plans))
                    }
                }
                Kind::Labels => {
                    table class="rows" {
                        thead { tr { th scope="col" { (ctx.t("Key")) } th scope="col" { (ctx.t("Value (empty: any value)")) } } }
                        tbody {
                            @for row in 0..label_rows {
                                @let (key, value) = form.labels.get(row).cloned().unwrap_or_default();
                                @let field = Field::LabelRow(row);
                                tr {
                                    td {
                                        label for={ "label-key-" (row) } class="visually-hidden" { (ctx.t("Label key")) " " (row + 1) }
                                        input type="text" id={ "label-key-" (row) } name="label_key" value=(key)
                                            aria-describedby=[described(errors, &field)];
                                    }
                                    td {
                                        label for={ "label-value-" (row) } class="visually-hidden" { (ctx.t("Label value")) " " (row + 1) }
                                        input type="text" id={ "label-value-" (row) } name="label_value" value=(value);
                                        (field_errors(ctx, errors, &field))
                                    }
                                }
                            }
                        }
                    }
                    button type="submit" name="action" value="add-label" formnovalidate { (ctx.t("Add a label row")) }
                }
                Kind::Registries => {
                    div class="field" {
                        label for="registries" { (ctx.t("Registry prefixes (one per line, e.g. ghcr.io/acme)")) }
                        textarea id="registries" name="registries" rows="3" spellcheck="false"
                            aria-describedby=[described(errors, &Field::Registries)] { (form.registries) }
                        (field_errors(ctx, errors, &Field::Registries))
                        p class="hint" { (ctx.t("Comparisons are exact: nginx:1.27 is not under docker.io/library, and a prefix naming a repository does not admit its tagged images.")) }
                    }
                }
                Kind::Latest => {
                    div class="choice" {
                        input type="checkbox" id="disallow-latest-tag" name="disallow_latest_tag" value="on" checked[form.latest];
                        label for="disallow-latest-tag" { (ctx.t("Deny images tagged latest or carrying no tag (a digest is always allowed)")) }
                    }
                    (field_errors(ctx, errors, &Field::Latest))
                }
            }
        }
    }
}

async fn attached_clusters(state: &App, access: &Access) -> Result<Vec<String>, AppError> {
    let page = PageRequest {
        limit: Some(1000),
        continue_token: None,
    };
    Ok(state
        .attached_clusters(access, &page)
        .await?
        .items
        .into_iter()
        .map(|c| c.name)
        .collect())
}

fn spec_of_record(record: &PolicyView) -> Result<PolicySpec, AppError> {
    serde_json::from_value(record.spec.clone()).map_err(|e| {
        AppError::Internal(format!(
            "stored policy {}/{} cannot be decoded: {e}",
            record.boundary, record.name
        ))
    })
}

/// Session, visibility and role for the editor's pages.
async fn editor_access(
    state: &App,
    session: &Session,
    boundary: &str,
) -> Result<(Access, Vec<String>), AppError> {
    let access = state.open(&session.caller, boundary).await?;
    session.caller.require_boundary_admin()?;
    let attached = attached_clusters(state, &access).await?;
    Ok((access, attached))
}

pub async fn new_form(
    State(state): State<App>,
    Path(boundary): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_session(&state, &headers, &ctx).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let attached = match editor_access(&state, &session, &boundary).await {
        Ok((_, a)) => a,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let page = EditorPage {
        boundary: &boundary,
        existing: None,
        form: EditorForm::default(),
        attached,
        outcome: Outcome::default(),
        extra_label_rows: 0,
    };
    html_response(StatusCode::OK, render_editor(&ctx, &session, &page))
}

pub async fn edit_form(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_session(&state, &headers, &ctx).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let loaded = async {
        let (access, attached) = editor_access(&state, &session, &boundary).await?;
        let record = state.get_policy(&access, &name).await?;
        let spec = spec_of_record(&record)?;
        Ok::<_, AppError>((attached, record, spec))
    }
    .await;
    let (attached, record, spec) = match loaded {
        Ok(l) => l,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let page = EditorPage {
        boundary: &boundary,
        existing: Some(&record),
        form: EditorForm::from_spec(&name, &spec),
        attached,
        outcome: Outcome::default(),
        extra_label_rows: 0,
    };
    html_response(StatusCode::OK, render_editor(&ctx, &session, &page))
}

pub async fn new_submit(
    State(state): State<App>,
    Path(boundary): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    form: FormData,
) -> Response {
    submit(state, boundary, None, headers, uri, form).await
}

pub async fn edit_submit(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
    form: FormData,
) -> Response {
    submit(state, boundary, Some(name), headers, uri, form).await
}

/// Reads the YAML view: one `BoundaryPolicy` document of this boundary (and this policy, when
/// editing) whose labels and annotations are unchanged. Returns the name and the spec's JSON.
fn spec_from_yaml(
    text: &str,
    boundary: &str,
    existing: Option<&PolicyView>,
) -> Result<(String, Vec<u8>), String> {
    let mut documents = palisade_api_types::yaml::documents::<PolicyDocument>(text);
    if documents.len() != 1 {
        return Err(format!(
            "the YAML must hold exactly one BoundaryPolicy document, found {}",
            documents.len()
        ));
    }
    let (_, document) = documents.remove(0);
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

async fn submit(
    state: App,
    boundary: String,
    path_name: Option<String>,
    headers: HeaderMap,
    uri: Uri,
    data: FormData,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_form_session(&state, &headers, &ctx, &data).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (access, attached) = match editor_access(&state, &session, &boundary).await {
        Ok(a) => a,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let mut existing = match &path_name {
        None => None,
        Some(name) => match state.get_policy(&access, name).await {
            Ok(record) => Some(record),
            Err(e) => return error_response(&ctx, Some(&session), &e),
        },
    };
    let yaml_view = data.get("view") == "yaml";
    let typed_name = path_name
        .clone()
        .unwrap_or_else(|| data.get("name").trim().to_owned());
    let mut editor = EditorForm::from_form(&typed_name, &data);
    let mut outcome = Outcome::default();
    let mut status = StatusCode::OK;
    let mut extra_label_rows = 0;

    if data.get("action") == "add-label" && !yaml_view {
        extra_label_rows = 1;
    } else {
        let prepared: Result<(String, Vec<u8>, Option<BuiltSpec>), FieldError> = if yaml_view {
            spec_from_yaml(data.get("yaml"), &boundary, existing.as_ref())
                .map(|(name, spec)| (name, spec, None))
                .map_err(|message| FieldError {
                    field: Field::Yaml,
                    message,
                    line: None,
                })
        } else {
            let built = editor.build();
            let bytes = serde_json::to_vec(&built.spec).unwrap_or_default();
            Ok((typed_name.clone(), bytes, Some(built)))
        };
        let attempt = match prepared {
            Err(e) => Err((StatusCode::BAD_REQUEST, vec![e])),
            Ok((name, bytes, built)) => {
                let taken = existing.is_none()
                    && !name.is_empty()
                    && state.get_policy(&access, &name).await.is_ok();
                if taken {
                    Err((StatusCode::CONFLICT, vec![FieldError {
                        field: if yaml_view { Field::Yaml } else { Field::Name },
                        message: format!(
                            "/path/policy: policy '{name}' already exists in boundary '{boundary}'; edit it instead"
                        ),
                        line: None,
                    }]))
                } else {
                    let if_match = existing
                        .is_some()
                        .then(|| data.get("etag").to_owned())
                        .filter(|e| !e.is_empty());
                    let condition = SaveCondition {
                        if_match,
                        create_only: false,
                    };
                    match state.save_policy(&access, &name, &bytes, condition).await {
                        Ok(saved) => {
                            let mut view = saved.view;
                            let warnings = view.warnings.take().unwrap_or_default();
                            Ok((view, saved.action, warnings))
                        }
                        Err(error) => Err((
                            crate::layout::status_of(&error),
                            vec![save_error(&error, built.as_ref(), yaml_view)],
                        )),
                    }
                }
            }
        };
        match attempt {
            Ok((record, written, warnings)) => {
                if let Ok(spec) = spec_of_record(&record) {
                    editor = EditorForm::from_spec(&record.name, &spec);
                }
                existing = Some(record);
                outcome.saved = Some((written, warnings));
            }
            Err((error_status, errors)) => {
                status = error_status;
                if yaml_view {
                    outcome.yaml_text = Some(data.get("yaml").to_owned());
                    // The form keeps showing the stored policy.
                    editor = match existing.as_ref().map(spec_of_record) {
                        Some(Ok(spec)) => EditorForm::from_spec(&typed_name, &spec),
                        _ => EditorForm {
                            name: typed_name.clone(),
                            ..EditorForm::default()
                        },
                    };
                }
                outcome.errors = errors;
            }
        }
    }
    let page = EditorPage {
        boundary: &boundary,
        existing: existing.as_ref(),
        form: editor,
        attached,
        outcome,
        extra_label_rows,
    };
    html_response(status, render_editor(&ctx, &session, &page))
}

/// Places a failed save's message: 400s by their pointer, anything else at the top.
fn save_error(error: &AppError, built: Option<&BuiltSpec>, yaml_view: bool) -> FieldError {
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

pub async fn delete_form(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_session(&state, &headers, &ctx).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let record = match async {
        let (access, _) = editor_access(&state, &session, &boundary).await?;
        state.get_policy(&access, &name).await
    }
    .await
    {
        Ok(r) => r,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let title = format!("{} '{}'", ctx.t("Delete policy"), name);
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (boundary) } { (boundary) } " / " (title)
        }
        h1 { (title) }
        (alert("warning", html! {
            p { (ctx.t("Deleting a policy removes its rules from the boundary: plans it disallowed become allowed, and its admission rules are removed from the clusters. This cannot be undone; the history keeps the last version.")) }
        }))
        form method="post" action={ "/boundaries/" (boundary) "/policies/" (name) "/delete" } {
            (csrf_field(&session))
            input type="hidden" name="etag" value=(record.etag);
            div class="buttons" {
                button type="submit" class="danger" { (ctx.t("Delete the policy")) }
                a class="button" href={ "/boundaries/" (boundary) "/policies/" (name) "/edit" } { (ctx.t("Cancel")) }
            }
        }
    };
    html_response(StatusCode::OK, page(&ctx, Some(&session), &title, body))
}

pub async fn delete_submit(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
    data: FormData,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_form_session(&state, &headers, &ctx, &data).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let result = async {
        let access = state.open(&session.caller, &boundary).await?;
        let if_match = Some(data.get("etag")).filter(|e| !e.is_empty());
        state.delete_policy(&access, &name, if_match).await
    }
    .await;
    match result {
        Ok(()) => {
            let deleted = form_urlencoded::byte_serialize(name.as_bytes()).collect::<String>();
            see_other(&format!("/boundaries/{boundary}?deleted={deleted}"))
        }
        Err(e) => error_response(&ctx, Some(&session), &e),
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
