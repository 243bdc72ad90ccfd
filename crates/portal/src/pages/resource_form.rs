//! Resource forms for every type, with the plan picker: the catalog's plans of the type from
//! the application's `picker` (the API's own), disallowed ones disabled with their reason in text. Functions get the
//! same picker, and the page says the API does not enforce their plans. A submission goes
//! through the application's `create_resource`, as the API's do, so a disallowed plan (sent by a crafted request) gets
//! the API's exact 422 message, and unreadable policies its 503.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_api_types::view::{Picker, PickerPlan};
use palisade_app::AppError;
use palisade_app::{App, Caller};
use palisade_policy::ResourceType;
use serde_json::{json, Value};

use super::{query_param, require_form_session, require_session};
use crate::form::FormData;
use crate::i18n::Lang;
use crate::layout::{
    alert, csrf_field, error_response, html_response, page, warning_text, CodeText, Ctx,
};
use crate::session::Session;

/// Where a create error belongs.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Field {
    Name,
    Plan,
    Image,
    Source,
    Labels,
    Component(usize),
    Cluster,
    Namespace,
    General,
}

/// What the user typed, kept across a failed submission.
#[derive(Clone, Debug, Default)]
struct Typed {
    name: String,
    plan: String,
    image: String,
    source: String,
    labels: Vec<(String, String)>,
    components: Vec<(String, String, String)>,
    cluster: String,
    namespace: String,
}

impl Typed {
    fn from_form(form: &FormData) -> Typed {
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
        }
    }

    fn from_body(body: &Value) -> Typed {
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
        }
    }

    /// The JSON merge patch that turns `stored` into what the form says: changed fields, and
    /// `null` for fields and labels the form no longer has.
    fn patch(&self, ty: ResourceType, stored: &Value) -> (Value, Vec<usize>) {
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
    fn body(&self, ty: ResourceType) -> (Value, Vec<usize>) {
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
        let workload = is_workload(ty);
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
        }
        (body, rows)
    }
}

/// Types that run in a cluster: they take labels and placement.
fn is_workload(ty: ResourceType) -> bool {
    matches!(
        ty,
        ResourceType::App
            | ResourceType::Function
            | ResourceType::ContainerInstance
            | ResourceType::StaticWebApp
    )
}

fn field_of(pointer: &str, component_rows: &[usize]) -> Field {
    let segments: Vec<&str> = pointer.split('/').skip(1).collect();
    match segments.as_slice() {
        ["name", ..] => Field::Name,
        ["plan", ..] => Field::Plan,
        ["image", ..] => Field::Image,
        ["source", ..] => Field::Source,
        ["labels", ..] => Field::Labels,
        ["cluster", ..] => Field::Cluster,
        ["namespace", ..] => Field::Namespace,
        ["components", index, ..] => match index.parse::<usize>() {
            Ok(i) => Field::Component(component_rows.get(i).copied().unwrap_or(i)),
            Err(_) => Field::Component(0),
        },
        ["components"] => Field::Component(0),
        _ => Field::General,
    }
}

/// The outcome of a submission, shown with the form.
#[derive(Debug, Default)]
struct Outcome {
    /// A 400 or 409 placed at its field.
    field_error: Option<(Field, String)>,
    /// A 422 or 503: the API's code and exact message.
    plan_error: Option<AppError>,
}

fn type_name(ctx: &Ctx, ty: ResourceType) -> &'static str {
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

fn plan_text(plan: &PickerPlan) -> String {
    format!("{} ({} vCPU, {})", plan.name, plan.cpu, plan.memory)
}

/// The disallowed reason as the page shows it: the API's English text, introduced in the
/// page's language when that is not English.
fn reason_markup(ctx: &Ctx, reason: &str) -> Markup {
    html! {
        @if ctx.lang != Lang::En { (ctx.t("Not allowed")) ": " }
        span lang="en" { (reason) }
    }
}

/// The plan picker: radio buttons in catalog order, disallowed ones disabled with the reason
/// next to them in text.
fn plan_picker(
    ctx: &Ctx,
    picker: &Picker,
    selected: &str,
    kept: Option<&str>,
    error: Option<&str>,
) -> Markup {
    html! {
        fieldset class="picker" id="plan-picker" aria-describedby=[error.map(|_| "error-plan")] {
            legend { (ctx.t("Plan")) }
            @if !picker.enforced {
                p class="note" id="not-enforced" { (ctx.t("The API does not enforce plans of functions: plans that a policy disallows are greyed out here, but the API accepts them (with a warning).")) }
            }
            @for plan in &picker.plans {
                @let id = format!("plan-{}", plan.name);
                @let is_kept = kept == Some(plan.name.as_str());
                div class={ "choice" @if !plan.allowed && !is_kept { " disallowed" } } {
                    @if plan.allowed || is_kept {
                        input type="radio" name="plan" id=(id) value=(plan.name) checked[selected == plan.name]
                            aria-describedby=[(!plan.allowed).then(|| format!("reason-{}", plan.name))];
                    } @else {
                        input type="radio" name="plan" id=(id) value=(plan.name) disabled
                            aria-describedby={ "reason-" (plan.name) };
                    }
                    label for=(id) { (plan_text(plan)) }
                    @if let Some(reason) = &plan.reason {
                        " "
                        span class="reason" id={ "reason-" (plan.name) } {
                            (reason_markup(ctx, reason))
                            @if is_kept { " " span class="kept" { (ctx.t("(the current plan: keeping it is allowed, moving back to it later is not)")) } }
                        }
                    }
                    @if let Some(warning) = &plan.audit_warning {
                        " "
                        span class="audit" lang="en" { (warning) }
                    }
                }
            }
            @if let Some(message) = error {
                div class="field-error" id="error-plan" { p lang="en" { (message) } }
            }
        }
    }
}

fn plan_select(ctx: &Ctx, picker: &Picker, id: &str, selected: &str, kept: Option<&str>) -> Markup {
    html! {
        select id=(id) name="component_plan" {
            option value="" selected[selected.is_empty()] { (ctx.t("— choose a plan —")) }
            @for plan in &picker.plans {
                @if plan.allowed {
                    option value=(plan.name) selected[selected == plan.name] { (plan_text(plan)) }
                } @else if kept == Some(plan.name.as_str()) {
                    option value=(plan.name) selected[selected == plan.name] {
                        (plan_text(plan)) " — " (ctx.t("current plan, kept")) "; "
                        (plan.reason.as_deref().unwrap_or(""))
                    }
                } @else {
                    option value=(plan.name) disabled {
                        (plan_text(plan)) " — "
                        @if ctx.lang != Lang::En { (ctx.t("Not allowed")) ": " }
                        (plan.reason.as_deref().unwrap_or(""))
                    }
                }
            }
        }
    }
}

fn error_box(field: &Field, outcome: &Outcome, id: &str) -> Markup {
    html! {
        @if let Some((f, message)) = &outcome.field_error {
            @if f == field {
                div class="field-error" id={ "error-" (id) } { p lang="en" { (message) } }
            }
        }
    }
}

fn describedby(field: &Field, outcome: &Outcome, id: &str) -> Option<String> {
    outcome
        .field_error
        .as_ref()
        .filter(|(f, _)| f == field)
        .map(|_| format!("error-{id}"))
}

fn text_field(
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

/// The stored resource an edit form changes.
#[derive(Clone, Debug)]
struct Existing {
    etag: String,
    /// The stored body (what the merge patch is computed against).
    body: Value,
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

struct FormPage<'a> {
    boundary: &'a str,
    ty: ResourceType,
    /// `Some` when editing a stored resource.
    existing: Option<Existing>,
    picker: Option<Result<Picker, AppError>>,
    typed: Typed,
    outcome: Outcome,
    extra_rows: usize,
}

fn render_form(ctx: &Ctx, session: &Session, p: &FormPage<'_>) -> Markup {
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
            (alert("error", html! {
                p id="api-error" {
                    code { (error.code_text()) } " "
                    span lang="en" class="api-message" { (error.body().error.message) }
                }
                @if crate::layout::status_of(error) == StatusCode::SERVICE_UNAVAILABLE {
                    p { (ctx.t("Nothing was changed. Please try again in a few seconds.")) }
                }
            }))
        }
        @if let Some((Field::General, message)) = &outcome.field_error {
            (alert("error", html! { p lang="en" { (message) } }))
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
            @if is_workload(ty) {
                (labels_table(ctx, p))
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
                thead { tr {
                    th scope="col" { (ctx.t("Component name")) }
                    th scope="col" { (ctx.t("Plan")) }
                    th scope="col" { (ctx.t("Image")) }
                } }
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
                thead { tr { th scope="col" { (ctx.t("Key")) } th scope="col" { (ctx.t("Value")) } } }
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

fn type_chooser(ctx: &Ctx, session: &Session, boundary: &str, error: Option<&str>) -> Markup {
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

async fn picker_for(
    state: &App,
    caller: &Caller,
    boundary: &str,
    ty: ResourceType,
) -> Option<Result<Picker, AppError>> {
    if !ty.has_plans() {
        return None;
    }
    Some(match state.open(caller, boundary).await {
        Ok(access) => state.picker(&access, Some(ty.as_str())).await,
        Err(error) => Err(error),
    })
}

pub async fn form(
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
    if let Err(e) = state.open(&session.caller, &boundary).await {
        return error_response(&ctx, Some(&session), &e);
    }
    let Some(type_text) = query_param(uri.query(), "type") else {
        return html_response(
            StatusCode::OK,
            type_chooser(&ctx, &session, &boundary, None),
        );
    };
    let ty = match ResourceType::parse(&type_text) {
        Ok(ty) => ty,
        Err(e) => {
            let message = format!("/type: {e}");
            return html_response(
                StatusCode::BAD_REQUEST,
                type_chooser(&ctx, &session, &boundary, Some(&message)),
            );
        }
    };
    let picker = picker_for(&state, &session.caller, &boundary, ty).await;
    let unavailable = matches!(&picker, Some(Err(e)) if crate::layout::status_of(e) == StatusCode::SERVICE_UNAVAILABLE);
    let page = FormPage {
        boundary: &boundary,
        ty,
        existing: None,
        picker,
        typed: Typed::default(),
        outcome: Outcome::default(),
        extra_rows: 0,
    };
    let status = if unavailable {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    with_retry(html_response(status, render_form(&ctx, &session, &page)))
}

fn with_retry(mut response: Response) -> Response {
    if response.status() == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    response
}

pub async fn submit(
    State(state): State<App>,
    Path(boundary): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    data: FormData,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_form_session(&state, &headers, &ctx, &data).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let access = match state.open(&session.caller, &boundary).await {
        Ok(access) => access,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let type_text = query_param(uri.query(), "type")
        .or_else(|| Some(data.get("type").to_owned()).filter(|t| !t.is_empty()))
        .unwrap_or_default();
    let ty = match ResourceType::parse(&type_text) {
        Ok(ty) => ty,
        Err(e) => {
            let message = format!("/type: {e}");
            return html_response(
                StatusCode::BAD_REQUEST,
                type_chooser(&ctx, &session, &boundary, Some(&message)),
            );
        }
    };
    let typed = Typed::from_form(&data);
    let action = data.get("action");
    if action == "add-label" || action == "add-component" {
        let picker = picker_for(&state, &session.caller, &boundary, ty).await;
        let page = FormPage {
            boundary: &boundary,
            ty,
            existing: None,
            picker,
            typed,
            outcome: Outcome::default(),
            extra_rows: 1,
        };
        return html_response(StatusCode::OK, render_form(&ctx, &session, &page));
    }
    let (body, component_rows) = typed.body(ty);
    match state
        .create_resource(&access, &body, state.deadline())
        .await
    {
        Ok(written) => {
            let name = written
                .view
                .body
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            tracing::info!(%boundary, resource_type = %ty, %name,
                actor = %session.caller.actor(), "portal: resource created");
            done_page(
                &ctx,
                &session,
                &boundary,
                ty,
                &name,
                &written.warnings,
                false,
            )
        }
        Err(error) => {
            let page = FormPage {
                boundary: &boundary,
                ty,
                existing: None,
                picker: None,
                typed,
                outcome: Outcome::default(),
                extra_rows: 0,
            };
            failed(&state, &ctx, &session, page, error, &component_rows).await
        }
    }
}

/// The answer to a successful create (201) or update (200), with the API's warnings.
fn done_page(
    ctx: &Ctx,
    session: &Session,
    boundary: &str,
    ty: ResourceType,
    name: &str,
    warnings: &[String],
    updated: bool,
) -> Response {
    let verb = if updated {
        ctx.t("Updated")
    } else {
        ctx.t("Created")
    };
    let title = format!("{verb} {} '{name}'", ty.as_str());
    let markup = page(
        ctx,
        Some(session),
        &title,
        html! {
            p class="crumbs" {
                a href="/" { (ctx.t("Boundaries")) } " / "
                a href={ "/boundaries/" (boundary) } { (boundary) }
            }
            h1 { (title) }
            (alert("success", html! {
                p id="created" { (verb) " " code { (ty.as_str()) } " " strong { (name) } "." }
            }))
            @if !warnings.is_empty() {
                (alert("warning", html! {
                    p { (ctx.t("The API answered with warnings:")) }
                    ul id="warnings" { @for w in warnings { li lang="en" { (warning_text(w)) } } }
                }))
            }
            p {
                a class="button" href={ "/boundaries/" (boundary) } { (ctx.t("Back to the boundary")) }
                " "
                a class="button" href={ "/boundaries/" (boundary) "/resources/" (ty.as_str()) "/" (name) "/edit" } { (ctx.t("Edit")) }
                " "
                a class="button" href={ "/boundaries/" (boundary) "/resources/new?type=" (ty.as_str()) } { (ctx.t("Create another")) }
            }
        },
    );
    let status = if updated {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    html_response(status, markup)
}

/// The form again after a failed create or update: a 400 or 409 at its field, a 422 or 503
/// with the API's code and exact message (a 503 asks to retry).
async fn failed(
    state: &App,
    ctx: &Ctx,
    session: &Session,
    mut page: FormPage<'_>,
    error: AppError,
    component_rows: &[usize],
) -> Response {
    let status = crate::layout::status_of(&error);
    match &error {
        AppError::PlanNotAllowed(..)
        | AppError::PolicyUnavailable(_)
        | AppError::Unavailable(_)
        | AppError::PreconditionFailed => {
            page.outcome.plan_error = Some(error);
        }
        AppError::InvalidRequest(message) => {
            let field = match message.split_once(": ") {
                Some((pointer, _)) if pointer.starts_with('/') => field_of(pointer, component_rows),
                _ => Field::General,
            };
            page.outcome.field_error = Some((field, message.clone()));
        }
        AppError::Conflict(message) => {
            page.outcome.field_error = Some((Field::Name, message.clone()));
        }
        other => return error_response(ctx, Some(session), other),
    }
    page.picker = picker_for(state, &session.caller, page.boundary, page.ty).await;
    with_retry(html_response(status, render_form(ctx, session, &page)))
}

/// Reads a stored resource the caller may see: its type and what the edit form needs.
async fn stored_resource(
    state: &App,
    session: &Session,
    boundary: &str,
    resource_type: &str,
    name: &str,
) -> Result<(ResourceType, Existing), AppError> {
    let access = state.open(&session.caller, boundary).await?;
    let view = state.get_resource(&access, resource_type, name).await?;
    let ty = ResourceType::parse(resource_type).map_err(|_| {
        AppError::NotFound(format!(
            "{resource_type} '{name}' not found in boundary '{boundary}'"
        ))
    })?;
    Ok((
        ty,
        Existing {
            etag: view.etag,
            body: view.body,
        },
    ))
}

pub async fn edit_form(
    State(state): State<App>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_session(&state, &headers, &ctx).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (ty, existing) =
        match stored_resource(&state, &session, &boundary, &resource_type, &name).await {
            Ok(found) => found,
            Err(e) => return error_response(&ctx, Some(&session), &e),
        };
    let picker = picker_for(&state, &session.caller, &boundary, ty).await;
    let page = FormPage {
        boundary: &boundary,
        ty,
        typed: Typed::from_body(&existing.body),
        existing: Some(existing),
        picker,
        outcome: Outcome::default(),
        extra_rows: 0,
    };
    with_retry(html_response(
        StatusCode::OK,
        render_form(&ctx, &session, &page),
    ))
}

pub async fn edit_submit(
    State(state): State<App>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    uri: Uri,
    data: FormData,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_form_session(&state, &headers, &ctx, &data).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (ty, existing) =
        match stored_resource(&state, &session, &boundary, &resource_type, &name).await {
            Ok(found) => found,
            Err(e) => return error_response(&ctx, Some(&session), &e),
        };
    let mut typed = Typed::from_form(&data);
    typed.name = name.clone();
    let action = data.get("action");
    if action == "add-label" || action == "add-component" {
        let picker = picker_for(&state, &session.caller, &boundary, ty).await;
        let page = FormPage {
            boundary: &boundary,
            ty,
            existing: Some(existing),
            picker,
            typed,
            outcome: Outcome::default(),
            extra_rows: 1,
        };
        return html_response(StatusCode::OK, render_form(&ctx, &session, &page));
    }
    let (patch, component_rows) = typed.patch(ty, &existing.body);
    let if_match = Some(data.get("etag")).filter(|e| !e.is_empty());
    let patched = match state.open(&session.caller, &boundary).await {
        Ok(access) => {
            state
                .patch_resource(
                    &access,
                    ty.as_str(),
                    &name,
                    if_match,
                    patch,
                    state.deadline(),
                )
                .await
        }
        Err(error) => Err(error),
    };
    match patched {
        Ok(palisade_app::resources::Written { warnings, .. }) => {
            tracing::info!(%boundary, resource_type = %ty, %name,
                actor = %session.caller.actor(), "portal: resource updated");
            done_page(&ctx, &session, &boundary, ty, &name, &warnings, true)
        }
        Err(error) => {
            let page = FormPage {
                boundary: &boundary,
                ty,
                existing: Some(existing),
                picker: None,
                typed,
                outcome: Outcome::default(),
                extra_rows: 0,
            };
            failed(&state, &ctx, &session, page, error, &component_rows).await
        }
    }
}
