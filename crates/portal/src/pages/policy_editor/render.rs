//! The editor page: the form with one part per rule kind, the YAML view, and each error next
//! to its field.

use maud::{html, Markup};
use palisade_api_types::view::{PolicyReport, PolicyView, Preview};

use super::form::{EditorForm, Field, FieldError, Kind};
use super::preview::{confirm_label, render_confirmation, render_preview, render_report};
use super::yaml::document_yaml;
use crate::layout::{alert, column_heads, csrf_field, page, Ctx};
use crate::session::Session;

/// What the editor page shows besides the form.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    pub(super) errors: Vec<FieldError>,
    /// What the save that redirected here did (`created`, `configured`, `unchanged`) and its
    /// warnings (from the flash notice).
    pub(super) saved: Option<(String, Vec<String>)>,
    /// The YAML text to show instead of the form's document (after a YAML-view error).
    pub(super) yaml_text: Option<String>,
    /// What the policy as typed would deny (a preview, or a save held for confirmation).
    pub(super) preview: Option<Preview>,
    /// A save held for confirmation: `Some(true)` from the YAML view, `Some(false)` from the
    /// form.
    pub(super) confirm: Option<bool>,
}

pub(super) struct EditorPage<'a> {
    pub(super) boundary: &'a str,
    /// `None` for a new policy.
    pub(super) existing: Option<&'a PolicyView>,
    pub(super) form: EditorForm,
    pub(super) attached: Vec<String>,
    pub(super) outcome: Outcome,
    pub(super) extra_label_rows: usize,
    /// The stored policy's last audit.
    pub(super) report: Option<PolicyReport>,
}

fn action_of(boundary: &str, existing: Option<&PolicyView>) -> String {
    match existing {
        Some(record) => format!("/boundaries/{boundary}/policies/{}/edit", record.name),
        None => format!("/boundaries/{boundary}/policies/new"),
    }
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

pub(super) fn render_editor(ctx: &Ctx, session: &Session, p: &EditorPage<'_>) -> Markup {
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
                p { (ctx.t("Saved.")) " (" (action_words(ctx, written)) ")" }
                @if !warnings.is_empty() {
                    p { (ctx.t("Save warnings:")) }
                    ul id="save-warnings" { @for w in warnings { li { (w) } } }
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
        @if let (Some(preview), Some(_)) = (&p.outcome.preview, p.outcome.confirm) {
            (render_confirmation(ctx, preview))
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
                    // To the result: the browser keeps the fragment of the form's answer.
                    button type="submit" name="action" value="preview" formaction={ (action) "#preview" } { (ctx.t("Preview")) }
                    @if let (Some(preview), Some(false)) = (&p.outcome.preview, p.outcome.confirm) {
                        button type="submit" name="action" value="save-confirmed" class="danger" id="save-anyway" { (confirm_label(ctx, preview)) }
                    }
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
                div class="buttons" {
                    button type="submit" name="action" value="save" class="primary" { (ctx.t("Save YAML")) }
                    button type="submit" name="action" value="preview" formaction={ (action) "#preview" } { (ctx.t("Preview YAML")) }
                    @if let (Some(preview), Some(true)) = (&p.outcome.preview, p.outcome.confirm) {
                        button type="submit" name="action" value="save-confirmed" class="danger" id="save-anyway" { (confirm_label(ctx, preview)) }
                    }
                }
            }
        }
        }
        @if let Some(preview) = &p.outcome.preview {
            (render_preview(ctx, preview))
        }
        @if let Some(report) = &p.report {
            (render_report(ctx, report))
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
                        (column_heads(&[ctx.t("Key"), ctx.t("Value (empty: any value)")]))
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

/// What a save did (`created`, `configured`, `unchanged`) in the page's words.
fn action_words(ctx: &Ctx, written: &str) -> &'static str {
    match written {
        "created" => ctx.t("created"),
        "configured" => ctx.t("configured"),
        _ => ctx.t("unchanged"),
    }
}
