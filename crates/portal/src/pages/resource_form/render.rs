//! The resource pages: the type chooser, the form for one type, and a resource's page, where a
//! successful create or update redirects to.

use axum::http::StatusCode;
use maud::{html, Markup};
use palisade_api_types::view::{Picker, ResourceView};
use palisade_app::AppError;
use palisade_policy::ResourceType;
use serde_json::Value;

use super::name_of;

use super::picker::{plan_picker, plan_select};
use super::typed::{Field, Typed};
use crate::flash::{Flash, Notice};
use crate::layout::{alert, column_heads, csrf_field, page, CodeText, Ctx};
use crate::session::Session;

/// The outcome of a submission, shown with the form.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// A 400 or 409 placed at its field.
    pub(super) field_error: Option<(Field, String)>,
    /// A 422 or 503: the API's code and exact message.
    pub(super) plan_error: Option<AppError>,
}

pub(crate) fn type_name(ctx: &Ctx, ty: ResourceType) -> &'static str {
    ctx.t(match ty {
        ResourceType::App => "App",
        ResourceType::ContainerInstance => "Container instance",
        ResourceType::Postgresql => "PostgreSQL database",
        ResourceType::Sqlserver => "SQL Server database",
        ResourceType::Qdrant => "Qdrant vector store",
        ResourceType::Valkey => "Valkey cache",
        ResourceType::Function => "Function",
        ResourceType::StaticWebApp => "Static web app",
    })
}

pub(super) fn error_box(field: &Field, outcome: &Outcome, id: &str) -> Markup {
    html! {
        @if let Some((f, message)) = &outcome.field_error {
            @if f == field {
                div class="field-error" id={ "error-" (id) } { p lang="en" { (message) } }
            }
        }
    }
}

pub(super) fn describedby(field: &Field, outcome: &Outcome, id: &str) -> Option<String> {
    outcome
        .field_error
        .as_ref()
        .filter(|(f, _)| f == field)
        .map(|_| format!("error-{id}"))
}

pub(super) fn text_field(
    ctx: &Ctx,
    field: Field,
    id: &str,
    label: &'static str,
    value: &str,
    outcome: &Outcome,
    hint: Option<&'static str>,
) -> Markup {
    html! {
        div class="field" {
            label for=(id) { (ctx.t(label)) }
            input type="text" id=(id) name=(id) value=(value) autocomplete="off"
                aria-describedby=[describedby(&field, outcome, id)];
            @if let Some(hint) = hint { p class="hint" { (ctx.t(hint)) } }
            (error_box(&field, outcome, id))
        }
    }
}

/// A 422, 412 or 503 above a form: the API's code and exact message.
pub(super) fn api_error(ctx: &Ctx, error: &AppError) -> Markup {
    alert(
        "error",
        html! {
            p id="api-error" {
                code { (error.code_text()) } " "
                span lang="en" class="api-message" { (error.body().error.message) }
            }
            @if crate::layout::status_of(error) == StatusCode::SERVICE_UNAVAILABLE {
                p { (ctx.t("Nothing was changed. Please try again in a few seconds.")) }
            }
        },
    )
}

/// How many pods run a workload: optional, a whole number (the API says which).
pub(super) fn replicas_field(ctx: &Ctx, value: &str, outcome: &Outcome) -> Markup {
    let field = Field::Replicas;
    html! {
        div class="field" {
            label for="replicas" { (ctx.t("Replicas (optional)")) }
            input type="number" id="replicas" name="replicas" value=(value) min="0" max="1000"
                step="1" inputmode="numeric" autocomplete="off"
                aria-describedby=[describedby(&field, outcome, "replicas")];
            p class="hint" { (ctx.t("How many pods run it; 1 when left empty.")) }
            (error_box(&field, outcome, "replicas"))
        }
    }
}

/// The stored resource an edit form changes.
#[derive(Clone, Debug)]
pub(super) struct Existing {
    pub(super) etag: String,
    /// The stored body (what the merge patch is computed against).
    pub(super) body: Value,
}

impl Existing {
    fn plan(&self) -> Option<&str> {
        self.body.get("plan").and_then(Value::as_str)
    }

    /// The plan component `name` has now.
    fn component_plan(&self, name: &str) -> Option<&str> {
        self.body
            .get("components")
            .and_then(Value::as_array)?
            .iter()
            .find(|c| c.get("name").and_then(Value::as_str) == Some(name))
            .and_then(|c| c.get("plan").and_then(Value::as_str))
    }
}

pub(super) struct FormPage<'a> {
    pub(super) boundary: &'a str,
    pub(super) ty: ResourceType,
    /// `Some` when editing a stored resource.
    pub(super) existing: Option<Existing>,
    pub(super) picker: Option<Result<Picker, AppError>>,
    pub(super) typed: Typed,
    pub(super) outcome: Outcome,
    pub(super) extra_rows: usize,
}

pub(super) fn render_form(ctx: &Ctx, session: &Session, p: &FormPage<'_>) -> Markup {
    let b = p.boundary;
    let ty = p.ty;
    let editing = p.existing.is_some();
    let title = if editing {
        format!(
            "{}: {} '{}'",
            ctx.t("Edit resource"),
            type_name(ctx, ty),
            p.typed.name
        )
    } else {
        format!("{}: {}", ctx.t("New resource"), type_name(ctx, ty))
    };
    let action = if editing {
        format!(
            "/boundaries/{b}/resources/{}/{}/edit",
            ty.as_str(),
            p.typed.name
        )
    } else {
        format!("/boundaries/{b}/resources/new?type={}", ty.as_str())
    };
    let submit_text = if editing {
        ctx.t("Save")
    } else {
        ctx.t("Create")
    };
    let kept_plan = p.existing.as_ref().and_then(Existing::plan);
    let typed = &p.typed;
    let outcome = &p.outcome;
    let picker_ok = match &p.picker {
        Some(Ok(picker)) => Some(picker),
        _ => None,
    };
    let selected_plan = if typed.plan.is_empty() {
        picker_ok
            .and_then(|pk| pk.plans.iter().find(|pl| pl.allowed))
            .map(|pl| pl.name.clone())
            .unwrap_or_default()
    } else {
        typed.plan.clone()
    };
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (b) } { (b) } " / " (title)
        }
        h1 { (title) " " code class="muted" { (ty.as_str()) } }
        @if editing {
            p class="hint" { (ctx.t("Only a move to another plan is checked against the policies; other changes succeed even on a plan that a policy now disallows.")) }
        }
        @if let Some(error) = &outcome.plan_error {
            (api_error(ctx, error))
        }
        @if let Some((field, message)) = &outcome.field_error {
            @if *field == Field::General || (*field == Field::Upload && typed.upload.is_empty()) {
                (alert("error", html! { p lang="en" { (message) } }))
            }
        }
        @if !editing && super::upload::from_upload(ty) {
            p id="upload-link" {
                a href={ "/boundaries/" (b) "/uploads/new?type=" (ty.as_str()) } {
                    (super::upload::upload_link_text(ctx, ty))
                }
            }
        }
        form method="post" action=(action) id="resource-form" novalidate {
            button type="submit" name="action" value="create" class="visually-hidden" tabindex="-1" aria-hidden="true" { (submit_text) }
            (csrf_field(session))
            @if let Some(existing) = &p.existing {
                input type="hidden" name="etag" value=(existing.etag);
                div class="field" {
                    label for="name" { (ctx.t("Name")) }
                    input type="text" id="name" name="name" value=(typed.name) readonly;
                }
            } @else {
                (text_field(ctx, Field::Name, "name", "Name", &typed.name, outcome, Some("Lowercase letters, digits and '-', at most 63 characters.")))
            }
            @if ty.has_plans() && ty != ResourceType::ContainerInstance {
                @match &p.picker {
                    Some(Ok(picker)) => {
                        @let plan_error = outcome.field_error.as_ref()
                            .filter(|(f, _)| *f == Field::Plan).map(|(_, m)| m.as_str());
                        (plan_picker(ctx, picker, &selected_plan, kept_plan, plan_error))
                    }
                    Some(Err(error)) => {
                        fieldset class="picker" id="plan-picker" {
                            legend { (ctx.t("Plan")) }
                            (alert("error", html! {
                                p { code { (error.code_text()) } " " span lang="en" { (error.body().error.message) } }
                                p { (ctx.t("The plans cannot be shown now. Please try again in a few seconds.")) }
                            }))
                        }
                    }
                    None => {}
                }
            }
            @if ty == ResourceType::ContainerInstance {
                (components_table(ctx, p, picker_ok))
            }
            @if matches!(ty, ResourceType::App | ResourceType::Function) {
                (text_field(ctx, Field::Image, "image", "Image", &typed.image, outcome, Some("Either an image or a source.")))
                (text_field(ctx, Field::Source, "source", "Source (git URL)", &typed.source, outcome, None))
            }
            @if ty == ResourceType::StaticWebApp {
                p class="hint" { (ctx.t("Static web apps have no plan.")) }
                (text_field(ctx, Field::Source, "source", "Source (git URL)", &typed.source, outcome, None))
            }
            @if !typed.upload.is_empty() {
                div class="field" {
                    label for="upload" { (ctx.t("Uploaded code")) }
                    input type="text" id="upload" value=(typed.upload) readonly
                        aria-describedby=[describedby(&Field::Upload, outcome, "upload")];
                    (error_box(&Field::Upload, outcome, "upload"))
                }
            }
            @if ty.is_workload() {
                (labels_table(ctx, p))
                (replicas_field(ctx, &typed.replicas, outcome))
                (text_field(ctx, Field::Cluster, "cluster", "Cluster (optional)", &typed.cluster, outcome, None))
                (text_field(ctx, Field::Namespace, "namespace", "Namespace (optional)", &typed.namespace, outcome, None))
            }
            div class="buttons" {
                button type="submit" name="action" value="create" class="primary" { (submit_text) }
                a class="button" href={ "/boundaries/" (b) } { (ctx.t("Cancel")) }
            }
        }
    };
    page(ctx, Some(session), &title, body)
}

fn components_table(ctx: &Ctx, p: &FormPage<'_>, picker: Option<&Picker>) -> Markup {
    let rows = p.typed.components.len().max(1) + p.extra_rows;
    html! {
        fieldset id="components" {
            legend { (ctx.t("Components")) }
            p class="hint" { (ctx.t("Each component has its own plan and image.")) }
            @if let Some(Err(error)) = &p.picker {
                (alert("error", html! {
                    p { code { (error.code_text()) } " " span lang="en" { (error.body().error.message) } }
                    p { (ctx.t("The plans cannot be shown now. Please try again in a few seconds.")) }
                }))
            }
            table class="rows" {
                (column_heads(&[ctx.t("Component name"), ctx.t("Plan"), ctx.t("Image")]))
                tbody {
                    @for row in 0..rows {
                        @let (name, plan, image) = p.typed.components.get(row).cloned().unwrap_or_default();
                        @let field = Field::Component(row);
                        tr {
                            td {
                                label class="visually-hidden" for={ "component-name-" (row) } { (ctx.t("Component name")) " " (row + 1) }
                                input type="text" id={ "component-name-" (row) } name="component_name" value=(name)
                                    aria-describedby=[describedby(&field, &p.outcome, &format!("component-{row}"))];
                            }
                            td {
                                label class="visually-hidden" for={ "component-plan-" (row) } { (ctx.t("Plan of component")) " " (row + 1) }
                                @match picker {
                                    Some(picker) => (plan_select(ctx, picker, &format!("component-plan-{row}"), &plan,
                                        p.existing.as_ref().and_then(|e| e.component_plan(&name)))),
                                    None => input type="text" id={ "component-plan-" (row) } name="component_plan" value=(plan);,
                                }
                            }
                            td {
                                label class="visually-hidden" for={ "component-image-" (row) } { (ctx.t("Image of component")) " " (row + 1) }
                                input type="text" id={ "component-image-" (row) } name="component_image" value=(image);
                                (error_box(&field, &p.outcome, &format!("component-{row}")))
                            }
                        }
                    }
                }
            }
            button type="submit" name="action" value="add-component" { (ctx.t("Add a component row")) }
        }
    }
}

fn labels_table(ctx: &Ctx, p: &FormPage<'_>) -> Markup {
    let rows = p.typed.labels.len().max(1) + p.extra_rows;
    html! {
        fieldset id="labels" {
            legend { (ctx.t("Labels")) }
            p class="hint" { (ctx.t("Labels go on the workload and its pods, where required-label rules check them.")) }
            table class="rows" {
                (column_heads(&[ctx.t("Key"), ctx.t("Value")]))
                tbody {
                    @for row in 0..rows {
                        @let (key, value) = p.typed.labels.get(row).cloned().unwrap_or_default();
                        tr {
                            td {
                                label class="visually-hidden" for={ "label-key-" (row) } { (ctx.t("Label key")) " " (row + 1) }
                                input type="text" id={ "label-key-" (row) } name="label_key" value=(key);
                            }
                            td {
                                label class="visually-hidden" for={ "label-value-" (row) } { (ctx.t("Label value")) " " (row + 1) }
                                input type="text" id={ "label-value-" (row) } name="label_value" value=(value);
                            }
                        }
                    }
                }
            }
            (error_box(&Field::Labels, &p.outcome, "labels"))
            button type="submit" name="action" value="add-label" { (ctx.t("Add a label row")) }
        }
    }
}

pub(super) fn type_chooser(
    ctx: &Ctx,
    session: &Session,
    boundary: &str,
    error: Option<&str>,
) -> Markup {
    let title = ctx.t("New resource");
    page(
        ctx,
        Some(session),
        title,
        html! {
            p class="crumbs" {
                a href="/" { (ctx.t("Boundaries")) } " / "
                a href={ "/boundaries/" (boundary) } { (boundary) } " / " (title)
            }
            h1 { (title) }
            @if let Some(message) = error { (alert("error", html! { p lang="en" { (message) } })) }
            p { (ctx.t("Choose the type of resource:")) }
            ul class="types" {
                @for ty in ResourceType::ALL {
                    li { a href={ "/boundaries/" (boundary) "/resources/new?type=" (ty.as_str()) } { (type_name(ctx, ty)) } " " code class="muted" { (ty.as_str()) } }
                }
            }
        },
    )
}

/// Where a resource's page is.
pub(super) fn resource_path(boundary: &str, ty: ResourceType, name: &str) -> String {
    format!("/boundaries/{boundary}/resources/{}/{name}", ty.as_str())
}

/// A stored value as the page shows it: a string as it is, anything else as compact JSON.
fn value_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// A resource's page: its stored fields and status, and what the create or update that
/// redirected here did (the flash notice, shown once).
pub(super) fn resource_page(
    ctx: &Ctx,
    session: &Session,
    boundary: &str,
    ty: ResourceType,
    view: &ResourceView,
    flash: Option<&Flash>,
    workload: Option<&Result<palisade_api_types::view::WorkloadDetail, palisade_app::AppError>>,
) -> Markup {
    let name = name_of(view);
    let title = format!("{} '{name}'", type_name(ctx, ty));
    let fields: Vec<(&String, &Value)> = view
        .body
        .as_object()
        .map(|o| o.iter().collect())
        .unwrap_or_default();
    page(
        ctx,
        Some(session),
        &title,
        html! {
            p class="crumbs" {
                a href="/" { (ctx.t("Boundaries")) } " / "
                a href={ "/boundaries/" (boundary) } { (boundary) } " / " (name)
            }
            h1 { (title) }
            @if let Some(flash) = flash {
                @if let Notice::Resource { resource_type, name, updated } = &flash.notice {
                    @let verb = if *updated { ctx.t("Updated") } else { ctx.t("Created") };
                    (alert("success", html! {
                        p id="created" { (verb) " " code { (resource_type) } " " strong { (name) } "." }
                    }))
                }
                @if !flash.warnings.is_empty() || flash.more_warnings > 0 {
                    (alert("warning", html! {
                        p { (ctx.t("The API answered with warnings:")) }
                        // In the page's language (the portal's words for palisade's warnings).
                        ul id="warnings" { @for w in &flash.warnings { li { (w) } } }
                        @if flash.more_warnings > 0 {
                            p { (flash.more_warnings) " " (ctx.t("more warnings are not shown here.")) }
                        }
                    }))
                }
            }
            dl id="resource" class="facts" {
                @for (key, value) in &fields {
                    dt { code { (key) } }
                    dd lang="en" { (value_text(value)) }
                }
            }
            @if palisade_app::workloads::kind_of(ty).is_some() {
                (super::cluster::live_region(ctx, &super::cluster::LiveOf { boundary, ty, name }, view.status.as_ref(), !view.body["cluster"].is_null(), workload, flash.is_some_and(|f| matches!(f.notice, Notice::Resource { .. }))))
            }
            p {
                a class="button" href={ "/boundaries/" (boundary) } { (ctx.t("Back to the boundary")) }
                " "
                a class="button" href={ (resource_path(boundary, ty, name)) "/edit" } { (ctx.t("Edit")) }
                " "
                a class="button" href={ "/boundaries/" (boundary) "/resources/new?type=" (ty.as_str()) } { (ctx.t("Create another")) }
                " "
                a class="button danger" href={ (resource_path(boundary, ty, name)) "/delete" } { (ctx.t("Delete")) }
            }
        },
    )
}
