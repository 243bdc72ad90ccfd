//! Resource forms for every type, with the plan picker: the catalog's plans of the type from
//! the application's `picker` (the API's own), disallowed ones disabled with their reason in text. Functions get the
//! same picker, and the page says the API does not enforce their plans. A submission goes
//! through the application's `create_resource`, as the API's do, so a disallowed plan (sent by a crafted request) gets
//! the API's exact 422 message, and unreadable policies its 503.

mod cluster;
pub(crate) mod delete;
mod picker;
mod render;
mod typed;
mod upload;

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::Response;
use maud::Markup;
use palisade_api_types::view::ResourceView;
use palisade_app::App;
use palisade_app::AppError;
use palisade_policy::ResourceType;
use serde_json::Value;

use self::picker::picker_for;
pub(crate) use self::render::type_name;
use self::render::{
    render_form, resource_page, resource_path, type_chooser, Existing, FormPage, Outcome,
};
use self::typed::{field_of, Field, Typed};
pub use self::upload::{upload_form, upload_submit};
use super::{query_param, Signed, SignedForm};
use crate::flash::{self, Notice};
use crate::form::FormData;
use crate::layout::{error_response, html_response, Ctx};
use crate::session::Session;

pub async fn form(
    State(state): State<App>,
    Path(boundary): Path<String>,
    uri: Uri,
    Signed { ctx, session }: Signed,
) -> Response {
    if let Err(e) = state.open(&session.caller, &boundary).await {
        return error_response(&ctx, Some(&session), &e);
    }
    let Some(type_text) = query_param(uri.query(), "type") else {
        return html_response(
            StatusCode::OK,
            type_chooser(&ctx, &session, &boundary, None),
        );
    };
    let ty = match parse_type(&ctx, &session, &boundary, &type_text) {
        Ok(ty) => ty,
        Err(chooser) => return html_response(StatusCode::BAD_REQUEST, chooser),
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

/// The resource type `text` names; otherwise the type chooser saying why (answered with 400).
fn parse_type(
    ctx: &Ctx,
    session: &Session,
    boundary: &str,
    text: &str,
) -> Result<ResourceType, Markup> {
    ResourceType::parse(text)
        .map_err(|e| type_chooser(ctx, session, boundary, Some(&format!("/type: {e}"))))
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
    uri: Uri,
    SignedForm { ctx, session, data }: SignedForm,
) -> Response {
    let access = match state.open(&session.caller, &boundary).await {
        Ok(access) => access,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let type_text = query_param(uri.query(), "type")
        .or_else(|| Some(data.get("type").to_owned()).filter(|t| !t.is_empty()))
        .unwrap_or_default();
    let ty = match parse_type(&ctx, &session, &boundary, &type_text) {
        Ok(ty) => ty,
        Err(chooser) => return html_response(StatusCode::BAD_REQUEST, chooser),
    };
    let typed = Typed::from_form(&data);
    if adds_a_row(&data) {
        return with_a_row(&state, &ctx, &session, (&boundary, ty), None, typed).await;
    }
    let (body, component_rows) = typed.body(ty);
    match state
        .create_resource(&access, &body, state.deadline())
        .await
    {
        Ok(written) => {
            let name = name_of(&written.view).to_owned();
            tracing::info!(%boundary, resource_type = %ty, %name,
                actor = %session.caller.actor(), "portal: resource created");
            created(&state, &ctx, &boundary, ty, &name, &written.warnings, false)
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

/// Whether the form's button asks for one more row of labels or components.
fn adds_a_row(data: &FormData) -> bool {
    matches!(data.get("action"), "add-label" | "add-component")
}

/// The form again as typed, with one more row of labels or components; nothing is saved.
async fn with_a_row(
    state: &App,
    ctx: &Ctx,
    session: &Session,
    (boundary, ty): (&str, ResourceType),
    existing: Option<Existing>,
    typed: Typed,
) -> Response {
    let picker = picker_for(state, &session.caller, boundary, ty).await;
    let page = FormPage {
        boundary,
        ty,
        existing,
        picker,
        typed,
        outcome: Outcome::default(),
        extra_rows: 1,
    };
    html_response(StatusCode::OK, render_form(ctx, session, &page))
}

/// The `name` of a resource's stored body ("" without one).
pub(super) fn name_of(view: &ResourceView) -> &str {
    view.body
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The answer to a successful create or update: 303 See Other to the resource's page, which
/// says what was done (once) with the API's warnings. A reload of that page repeats nothing.
pub(super) fn created(
    state: &App,
    ctx: &Ctx,
    boundary: &str,
    ty: ResourceType,
    name: &str,
    warnings: &[palisade_policy::Warning],
    updated: bool,
) -> Response {
    let notice = Notice::Resource {
        resource_type: ty.as_str().to_owned(),
        name: name.to_owned(),
        updated,
    };
    flash::redirect(
        state,
        ctx,
        &resource_path(boundary, ty, name),
        notice,
        &warnings
            .iter()
            .map(|w| crate::warnings::text(ctx, w))
            .collect::<Vec<_>>(),
    )
}

/// A resource's page: its stored fields and status, and the notice of the create or update
/// that redirected here.
pub async fn show(
    State(state): State<App>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    uri: Uri,
    Signed { ctx, session }: Signed,
) -> Response {
    let (ty, view, workload) =
        match load(&state, &session, &boundary, &resource_type, &name, None).await {
            Ok(found) => found,
            Err(e) => return error_response(&ctx, Some(&session), &e),
        };
    let flash = flash::for_page(&state, &headers, uri.path());
    let markup = resource_page(
        &ctx,
        &session,
        &boundary,
        ty,
        &view,
        flash.as_ref(),
        workload.as_ref(),
    );
    let mut response = html_response(StatusCode::OK, markup);
    if flash.is_some() {
        flash::shown(&ctx, &mut response);
    }
    response
}

/// A resource page's live region alone, for `/static/live.js`: answered as soon as the
/// resource's status differs from `?status=` (the one the page shows), or after
/// [`cluster::LIVE_WAIT`], so a page learns what Kubernetes decided the moment palisade
/// records it.
pub async fn live(
    State(state): State<App>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    uri: Uri,
    Signed { ctx, session }: Signed,
) -> Response {
    let seen = query_param(uri.query(), "status").unwrap_or_default();
    let (ty, view, workload) = match load(
        &state,
        &session,
        &boundary,
        &resource_type,
        &name,
        Some(&seen),
    )
    .await
    {
        Ok(found) => found,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let placed = !view.body["cluster"].is_null();
    let markup = cluster::live_region(
        &ctx,
        &cluster::LiveOf {
            boundary: &boundary,
            ty,
            name: &name,
        },
        view.status.as_ref(),
        placed,
        workload.as_ref(),
        false,
    );
    let mut response = html_response(StatusCode::OK, markup);
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// A resource, its type, and, for a placed workload, what its cluster holds, read now (a
/// cluster's failure is shown on the page, not instead of it). With `seen`, the resource is
/// read once its status differs from it, or after a short wait.
async fn load(
    state: &App,
    session: &Session,
    boundary: &str,
    resource_type: &str,
    name: &str,
    seen: Option<&str>,
) -> Result<Loaded, AppError> {
    let access = state.open(&session.caller, boundary).await?;
    let view = match seen {
        Some(seen) => {
            state
                .resource_after_change(&access, resource_type, name, seen, cluster::LIVE_WAIT)
                .await?
        }
        None => state.get_resource(&access, resource_type, name).await?,
    };
    let ty = ResourceType::parse(resource_type).map_err(|_| {
        AppError::NotFound(format!(
            "{resource_type} '{name}' not found in boundary '{boundary}'"
        ))
    })?;
    let workload =
        if palisade_app::workloads::kind_of(ty).is_some() && !view.body["cluster"].is_null() {
            Some(state.resource_workload(&access, resource_type, name).await)
        } else {
            None
        };
    Ok((ty, view, workload))
}

type Loaded = (
    ResourceType,
    palisade_api_types::view::ResourceView,
    Option<Result<palisade_api_types::view::WorkloadDetail, AppError>>,
);

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
    if let Err(other) = place_error(&mut page.outcome, error, component_rows) {
        return error_response(ctx, Some(session), &other);
    }
    page.picker = picker_for(state, &session.caller, page.boundary, page.ty).await;
    with_retry(html_response(status, render_form(ctx, session, &page)))
}

/// Puts a failed write's error on its form: a 400 at the field its pointer names (or above
/// the form), a 409 at the name, a 422, 412 or 503 above the form with the API's code and
/// exact message. Any other error is answered by its own page (`Err`).
fn place_error(
    outcome: &mut Outcome,
    error: AppError,
    component_rows: &[usize],
) -> Result<(), AppError> {
    match error {
        AppError::PlanNotAllowed(..)
        | AppError::PolicyUnavailable(_)
        | AppError::Unavailable(_)
        | AppError::PreconditionFailed => {
            outcome.plan_error = Some(error);
        }
        AppError::InvalidRequest(message) => {
            let field = match message.split_once(": ") {
                Some((pointer, _)) if pointer.starts_with('/') => field_of(pointer, component_rows),
                _ => Field::General,
            };
            outcome.field_error = Some((field, message));
        }
        AppError::Conflict(message) => {
            outcome.field_error = Some((Field::Name, message));
        }
        other => return Err(other),
    }
    Ok(())
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
    Signed { ctx, session }: Signed,
) -> Response {
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
    SignedForm { ctx, session, data }: SignedForm,
) -> Response {
    let (ty, existing) =
        match stored_resource(&state, &session, &boundary, &resource_type, &name).await {
            Ok(found) => found,
            Err(e) => return error_response(&ctx, Some(&session), &e),
        };
    let mut typed = Typed::from_form(&data);
    typed.name = name.clone();
    if adds_a_row(&data) {
        let existing = Some(existing);
        return with_a_row(&state, &ctx, &session, (&boundary, ty), existing, typed).await;
    }
    let (patch, component_rows) = typed.patch(ty, &existing.body);
    let if_match = data.if_match();
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
            created(&state, &ctx, &boundary, ty, &name, &warnings, true)
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
