//! A function or static web app from uploaded code (SPEC 5): a `multipart/form-data` form with
//! the file, sent to the application's `create_upload`, then to `create_resource` with the
//! upload's id, as the API's clients do. The function form shows beforehand the policies that
//! will deny the build of uploaded code (the application's `upload_form_warnings`), and the page
//! after the create shows the create's own warnings.
//!
//! The CSRF token travels as the form's first field and is checked before anything is stored:
//! the form is read field by field, and its file is stored as it arrives (never held whole),
//! once the token before it has been checked; a file before the token is refused.
//! After a failed create the upload is kept: the form carries its id, so the user need not
//! choose the file again (the API checks that the id names an upload of the boundary).

use axum::extract::multipart::{Field as FormField, Multipart, MultipartError, MultipartRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use futures::StreamExt;
use maud::{html, Markup};
use palisade_api_types::view::{Picker, UploadView};
use palisade_app::caller::Access;
use palisade_app::{App, AppError};
use palisade_policy::ResourceType;
use serde_json::{json, Value};

use super::picker::{picker_for, plan_picker};
use super::place_error;
use super::render::{api_error, describedby, error_box, replicas_field, text_field, Outcome};
use super::typed::{replicas_value, Field};
use super::{created, name_of, with_retry};
use crate::layout::{alert, csrf_field, error_response, html_response, page, status_of, Ctx};
use crate::pages::{csrf_rejected, query_param, require_session, Signed};
use crate::session::{tokens_match, Session, CSRF_FIELD};

/// The field that carries the file.
const FILE_FIELD: &str = "file";

/// The types that can be built from uploaded code.
pub(crate) fn from_upload(ty: ResourceType) -> bool {
    matches!(ty, ResourceType::Function | ResourceType::StaticWebApp)
}

/// The name of the upload page of `ty` (also its links' text).
pub(super) fn upload_link_text(ctx: &Ctx, ty: ResourceType) -> &'static str {
    if ty == ResourceType::Function {
        ctx.t("Function from uploaded code")
    } else {
        ctx.t("Static web app from uploaded code")
    }
}

/// What the user typed, kept across a failed submission (a file input cannot be refilled; the
/// upload made from it is kept instead).
#[derive(Clone, Debug, Default)]
struct UploadTyped {
    name: String,
    plan: String,
    replicas: String,
    cluster: String,
    namespace: String,
    /// The id of the upload made by an earlier attempt.
    upload: String,
}

impl UploadTyped {
    fn from_fields(fields: &[(String, String)]) -> UploadTyped {
        let get = |name: &str| {
            fields
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.trim().to_owned())
                .unwrap_or_default()
        };
        UploadTyped {
            name: get("name"),
            plan: get("plan"),
            replicas: get("replicas"),
            cluster: get("cluster"),
            namespace: get("namespace"),
            upload: get("upload"),
        }
    }

    /// The create request: the type, the name, the upload, and what else was filled in.
    fn body(&self, ty: ResourceType, upload: &str) -> Value {
        let mut body = json!({"type": ty.as_str(), "name": self.name, "upload": upload});
        if ty == ResourceType::Function && !self.plan.is_empty() {
            body["plan"] = json!(self.plan);
        }
        if let Some(replicas) = replicas_value(&self.replicas) {
            body["replicas"] = replicas;
        }
        if !self.cluster.is_empty() {
            body["cluster"] = json!(self.cluster);
        }
        if !self.namespace.is_empty() {
            body["namespace"] = json!(self.namespace);
        }
        body
    }
}

struct UploadPage<'a> {
    boundary: &'a str,
    ty: ResourceType,
    typed: UploadTyped,
    picker: Option<Result<Picker, AppError>>,
    /// Functions: the policies that will deny a build of uploaded code.
    warnings: Result<Vec<palisade_policy::Warning>, AppError>,
    outcome: Outcome,
    /// The submitted form could not be read whole (the client stopped sending it).
    unreadable: bool,
}

/// Whether the upload form has `field` (an error anywhere else is shown above the form).
fn shows(ty: ResourceType, field: &Field) -> bool {
    match field {
        Field::Name | Field::Upload | Field::Replicas | Field::Cluster | Field::Namespace => true,
        Field::Plan => ty == ResourceType::Function,
        _ => false,
    }
}

/// `?type=`: a function or a static web app; `None` for anything else.
fn upload_type(uri: &Uri) -> Option<ResourceType> {
    let text = query_param(uri.query(), "type")?;
    ResourceType::parse(&text)
        .ok()
        .filter(|ty| from_upload(*ty))
}

/// The page for a missing or other type: the two types that can be built from uploads.
fn type_refused(ctx: &Ctx, session: &Session, boundary: &str) -> Response {
    let title = ctx.t("Create from uploaded code");
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (boundary) } { (boundary) } " / " (title)
        }
        h1 { (title) }
        (alert("error", html! {
            p { (ctx.t("Only functions and static web apps can be created from uploaded code.")) }
        }))
        ul class="types" {
            @for ty in [ResourceType::Function, ResourceType::StaticWebApp] {
                li { a href={ "/boundaries/" (boundary) "/uploads/new?type=" (ty.as_str()) } { (upload_link_text(ctx, ty)) } }
            }
        }
    };
    html_response(
        StatusCode::BAD_REQUEST,
        page(ctx, Some(session), title, body),
    )
}

/// The form, with the page's status: 503 when the plans cannot be shown.
fn form_response(ctx: &Ctx, session: &Session, p: &UploadPage<'_>, status: StatusCode) -> Response {
    let unavailable =
        matches!(&p.picker, Some(Err(e)) if status_of(e) == StatusCode::SERVICE_UNAVAILABLE);
    let status = if status == StatusCode::OK && unavailable {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        status
    };
    with_retry(html_response(status, render_upload_form(ctx, session, p)))
}

/// What the page needs besides the typed values: the plans and, for functions, the warnings.
async fn upload_page<'a>(
    state: &App,
    session: &Session,
    access: &Access,
    boundary: &'a str,
    ty: ResourceType,
    typed: UploadTyped,
    outcome: Outcome,
) -> UploadPage<'a> {
    let picker = picker_for(state, &session.caller, boundary, ty).await;
    let warnings = if ty == ResourceType::Function {
        state.upload_form_warnings(access).await
    } else {
        Ok(Vec::new())
    };
    UploadPage {
        boundary,
        ty,
        typed,
        picker,
        warnings,
        outcome,
        unreadable: false,
    }
}

pub async fn upload_form(
    State(state): State<App>,
    Path(boundary): Path<String>,
    uri: Uri,
    Signed { ctx, session }: Signed,
) -> Response {
    let access = match state.open(&session.caller, &boundary).await {
        Ok(access) => access,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let Some(ty) = upload_type(&uri) else {
        return type_refused(&ctx, &session, &boundary);
    };
    let page = upload_page(
        &state,
        &session,
        &access,
        &boundary,
        ty,
        UploadTyped::default(),
        Outcome::default(),
    )
    .await;
    form_response(&ctx, &session, &page, StatusCode::OK)
}

/// A multipart form as read: its text fields in order, what became of its file, and why
/// reading stopped early, if it did.
#[derive(Default)]
struct Submitted {
    fields: Vec<(String, String)>,
    /// The file, stored as it arrived (after the session's token); `None` when no file, or an
    /// empty one, was sent.
    stored: Option<Result<UploadView, AppError>>,
    /// A file came before the session's token: it was passed over, not stored.
    file_before_token: bool,
    failure: Option<MultipartError>,
}

impl Submitted {
    fn get(&self, name: &str) -> &str {
        self.fields
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    }

    fn has(&self, name: &str) -> bool {
        self.fields.iter().any(|(k, _)| k == name)
    }
}

/// Stores the file as it arrives (the application reads it a chunk at a time); `None` when
/// no file was chosen (an empty part).
async fn store_file(
    state: &App,
    access: &Access,
    mut field: FormField<'_>,
) -> Option<Result<UploadView, AppError>> {
    let first = loop {
        match field.chunk().await {
            Ok(Some(bytes)) if bytes.is_empty() => {}
            Ok(Some(bytes)) => break bytes,
            Ok(None) => return None,
            Err(error) => {
                tracing::debug!(%error, "an uploaded file could not be read");
                return Some(Err(AppError::InvalidRequest(
                    "the upload could not be read whole: the client stopped sending it".into(),
                )));
            }
        }
    };
    let content = futures::stream::once(std::future::ready(Ok(first))).chain(field);
    Some(state.create_upload(access, None, content).await)
}

/// The boundary, opened for the session's caller, and the type asked for; the page to answer
/// instead when either cannot be had.
async fn open_for_upload(
    state: &App,
    ctx: &Ctx,
    session: &Session,
    boundary: &str,
    uri: &Uri,
) -> Result<(Access, ResourceType), Response> {
    let access = match state.open(&session.caller, boundary).await {
        Ok(access) => access,
        Err(e) => return Err(error_response(ctx, Some(session), &e)),
    };
    match upload_type(uri) {
        Some(ty) => Ok((access, ty)),
        None => Err(type_refused(ctx, session, boundary)),
    }
}

/// A form over the route's body limit: the API's 413 for an upload that is too large.
fn too_large() -> AppError {
    palisade_app::uploads::upload_too_large()
}

pub async fn upload_submit(
    State(state): State<App>,
    Path(boundary): Path<String>,
    headers: HeaderMap,
    uri: Uri,
    multipart: Result<Multipart, MultipartRejection>,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_session(&state, &headers, &ctx).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    // A body that is not multipart carries no token this page can read.
    let Ok(mut multipart) = multipart else {
        return csrf_rejected(&ctx, Some(&session));
    };
    // The form is read field by field; its file is stored as it arrives, and only after the
    // session's token (the form's first field) has been checked.
    let mut submitted = Submitted::default();
    let mut opened: Option<(Access, ResourceType)> = None;
    loop {
        let field = match multipart.next_field().await {
            Ok(Some(field)) => field,
            Ok(None) => break,
            Err(error) => {
                submitted.failure = Some(error);
                break;
            }
        };
        let name = field.name().unwrap_or("").to_owned();
        if name != FILE_FIELD {
            match field.text().await {
                Ok(text) => submitted.fields.push((name, text)),
                Err(error) => {
                    submitted.failure = Some(error);
                    break;
                }
            }
            continue;
        }
        if submitted.stored.is_some() || submitted.file_before_token {
            continue;
        }
        if !submitted.has(CSRF_FIELD) {
            submitted.file_before_token = true;
            continue;
        }
        if !tokens_match(&session.csrf, submitted.get(CSRF_FIELD)) {
            return csrf_rejected(&ctx, Some(&session));
        }
        let (access, ty) = match open_for_upload(&state, &ctx, &session, &boundary, &uri).await {
            Ok(opened) => opened,
            Err(response) => return response,
        };
        submitted.stored = store_file(&state, &access, field).await;
        opened = Some((access, ty));
    }
    // Nothing is stored without the session's token. A form cut short before its token (the
    // first field) arrived is only shown again, with why it was cut short.
    let cut_before_token = submitted.failure.is_some() && !submitted.has(CSRF_FIELD);
    if !cut_before_token
        && (submitted.file_before_token || !tokens_match(&session.csrf, submitted.get(CSRF_FIELD)))
    {
        return csrf_rejected(&ctx, Some(&session));
    }
    let (access, ty) = match opened {
        Some(opened) => opened,
        None => match open_for_upload(&state, &ctx, &session, &boundary, &uri).await {
            Ok(opened) => opened,
            Err(response) => return response,
        },
    };
    let mut typed = UploadTyped::from_fields(&submitted.fields);
    let mut outcome = Outcome::default();

    let failed = |typed: UploadTyped, outcome: Outcome, status: StatusCode| {
        let (state, session, access, boundary, ctx) = (&state, &session, &access, &boundary, &ctx);
        async move {
            let page = upload_page(state, session, access, boundary, ty, typed, outcome).await;
            form_response(ctx, session, &page, status)
        }
    };

    // The file chosen now (stored already), or the upload an earlier attempt made.
    let upload = match submitted.stored {
        Some(Ok(view)) => {
            tracing::info!(%boundary, upload = %view.id, size = view.size,
                actor = %session.caller.actor(), "portal: code uploaded");
            view.id
        }
        Some(Err(_)) | None if submitted.failure.is_some() => String::new(),
        Some(Err(error)) => {
            let status = status_of(&error);
            match error {
                AppError::InvalidRequest(message)
                | AppError::LimitExceeded(message)
                | AppError::TooManyRequests(message)
                | AppError::Busy(message) => {
                    // The whole upload is the field.
                    outcome.field_error = Some((Field::Upload, message));
                }
                other => {
                    if let Err(other) = place_error(&mut outcome, other, &[]) {
                        return error_response(&ctx, Some(&session), &other);
                    }
                }
            }
            return failed(typed, outcome, status).await;
        }
        None if !typed.upload.is_empty() => typed.upload.clone(),
        None => {
            let error = palisade_app::uploads::upload_empty();
            let status = status_of(&error);
            outcome.field_error = Some((Field::Upload, error.body().error.message));
            return failed(typed, outcome, status).await;
        }
    };

    if let Some(error) = &submitted.failure {
        // A file stored before the form was cut short is kept for the retry.
        if !upload.is_empty() {
            typed.upload = upload;
        }
        if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
            let error = too_large();
            outcome.field_error = Some((Field::Upload, error.body().error.message));
            return failed(typed, outcome, status_of(&error)).await;
        }
        let mut page = upload_page(&state, &session, &access, &boundary, ty, typed, outcome).await;
        page.unreadable = true;
        return form_response(&ctx, &session, &page, StatusCode::BAD_REQUEST);
    }
    typed.upload = upload.clone();

    let body = typed.body(ty, &upload);
    match state
        .create_resource(&access, &body, state.deadline())
        .await
    {
        Ok(written) => {
            let name = name_of(&written.view).to_owned();
            tracing::info!(%boundary, resource_type = %ty, %name, %upload,
                actor = %session.caller.actor(), "portal: resource created from uploaded code");
            created(&state, &ctx, &boundary, ty, &name, &written.warnings, false)
        }
        Err(error) => {
            let status = status_of(&error);
            if let Err(other) = place_error(&mut outcome, error, &[]) {
                return error_response(&ctx, Some(&session), &other);
            }
            if let Some((field, _)) = &mut outcome.field_error {
                if *field == Field::Upload {
                    // The kept upload is what the API refused: a file must be chosen again.
                    typed.upload.clear();
                }
                if !shows(ty, field) {
                    *field = Field::General;
                }
            }
            failed(typed, outcome, status).await
        }
    }
}

fn warnings_notice(
    ctx: &Ctx,
    warnings: &Result<Vec<palisade_policy::Warning>, AppError>,
) -> Markup {
    html! {
        @match warnings {
            Ok(list) if list.is_empty() => {}
            Ok(list) => {
                div class="notice warning" role="status" id="upload-warnings" {
                    p { (ctx.t("A policy of this boundary denies builds of uploaded function code, so the function will not be deployed:")) }
                    ul { @for warning in list { li { (crate::warnings::text(ctx, warning)) } } }
                }
            }
            Err(error) => {
                (alert("warning", html! {
                    p { (ctx.t("The policies cannot be read now, so this page cannot say whether they deny the build.")) }
                    p { code { (crate::layout::CodeText::code_text(error)) } " " span lang="en" { (error.body().error.message) } }
                }))
            }
        }
    }
}

fn render_upload_form(ctx: &Ctx, session: &Session, p: &UploadPage<'_>) -> Markup {
    let b = p.boundary;
    let ty = p.ty;
    let title = upload_link_text(ctx, ty);
    let typed = &p.typed;
    let outcome = &p.outcome;
    let selected_plan = match (&p.picker, typed.plan.is_empty()) {
        (Some(Ok(picker)), true) => picker
            .plans
            .iter()
            .find(|plan| plan.allowed)
            .map(|plan| plan.name.clone())
            .unwrap_or_default(),
        _ => typed.plan.clone(),
    };
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (b) } { (b) } " / " (title)
        }
        h1 { (title) " " code class="muted" { (ty.as_str()) } }
        (warnings_notice(ctx, &p.warnings))
        @if let Some(error) = &outcome.plan_error {
            (api_error(ctx, error))
        }
        @if let Some((Field::General, message)) = &outcome.field_error {
            (alert("error", html! { p lang="en" { (message) } }))
        }
        @if p.unreadable {
            (alert("error", html! {
                p { (ctx.t("The form could not be read whole: the browser stopped sending it. Nothing was changed.")) }
            }))
        }
        form method="post" action={ "/boundaries/" (b) "/uploads/new?type=" (ty.as_str()) }
            enctype="multipart/form-data" id="upload-form" novalidate {
            (csrf_field(session))
            (text_field(ctx, Field::Name, "name", "Name", &typed.name, outcome, Some("Lowercase letters, digits and '-', at most 63 characters.")))
            @if ty == ResourceType::Function {
                @match &p.picker {
                    Some(Ok(picker)) => {
                        @let plan_error = outcome.field_error.as_ref()
                            .filter(|(f, _)| *f == Field::Plan).map(|(_, m)| m.as_str());
                        (plan_picker(ctx, picker, &selected_plan, None, plan_error))
                    }
                    Some(Err(error)) => {
                        fieldset class="picker" id="plan-picker" {
                            legend { (ctx.t("Plan")) }
                            (alert("error", html! {
                                p { code { (crate::layout::CodeText::code_text(error)) } " " span lang="en" { (error.body().error.message) } }
                                p { (ctx.t("The plans cannot be shown now. Please try again in a few seconds.")) }
                            }))
                        }
                    }
                    None => {}
                }
            } @else {
                p class="hint" { (ctx.t("Static web apps have no plan.")) }
            }
            div class="field" {
                label for="file" { (ctx.t("Code")) }
                @if !typed.upload.is_empty() {
                    input type="hidden" name="upload" value=(typed.upload);
                    p class="hint" id="upload-kept" {
                        (ctx.t("The code uploaded before is kept; choose a file only to replace it.")) " "
                        code { (typed.upload) }
                    }
                }
                input type="file" id="file" name=(FILE_FIELD)
                    aria-describedby=[describedby(&Field::Upload, outcome, "file")];
                p class="hint" { (ctx.t("An archive (.tar.gz) of a directory, or a single file; at most 8 MiB.")) }
                (error_box(&Field::Upload, outcome, "file"))
            }
            (replicas_field(ctx, &typed.replicas, outcome))
            (text_field(ctx, Field::Cluster, "cluster", "Cluster (optional)", &typed.cluster, outcome, None))
            (text_field(ctx, Field::Namespace, "namespace", "Namespace (optional)", &typed.namespace, outcome, None))
            div class="buttons" {
                button type="submit" class="primary" { (ctx.t("Create")) }
                a class="button" href={ "/boundaries/" (b) } { (ctx.t("Cancel")) }
            }
        }
    };
    page(ctx, Some(session), title, body)
}
