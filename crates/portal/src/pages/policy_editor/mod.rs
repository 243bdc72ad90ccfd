//! The policy editor: a form with one part per rule kind and a YAML view of the same document.
//! Both save through the application's `save_policy`, as the API does, so validation, normalisation and warnings are the
//! API's. A save error's JSON Pointer (`/rules/1/allowedRegistries/registries/0: ...`) is mapped
//! back to the form field it names. Deleting asks for confirmation first.

mod form;
mod preview;
mod render;
mod yaml;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use maud::html;
use palisade_api_types::view::{PolicyReport, PolicyView, Preview};
use palisade_api_types::PolicySpec;
use palisade_app::caller::Access;
use palisade_app::policies::{Policies, SaveCondition};
use palisade_app::App;
use palisade_app::AppError;

use self::form::{save_error, BuiltSpec, EditorForm, Field, FieldError};
use self::render::{render_editor, EditorPage, Outcome};
use self::yaml::spec_from_yaml;
use super::{Signed, SignedForm, ALL};
use crate::flash::{self, Notice};
use crate::layout::{alert, csrf_field, error_response, html_response, page, see_other};
use crate::session::Session;

async fn attached_clusters(state: &App, access: &Access) -> Result<Vec<String>, AppError> {
    Ok(state
        .attached_clusters(access, &ALL)
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
    Signed { ctx, session }: Signed,
) -> Response {
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
        report: None,
    };
    html_response(StatusCode::OK, render_editor(&ctx, &session, &page))
}

/// The policy's last audit, when it can be read (the page shows without it otherwise).
async fn report_of(state: &App, access: &Access, name: &str) -> Option<PolicyReport> {
    state.policy_report(access, name).await.ok()
}

pub async fn edit_form(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    headers: HeaderMap,
    uri: Uri,
    Signed { ctx, session }: Signed,
) -> Response {
    let loaded = async {
        let (access, attached) = editor_access(&state, &session, &boundary).await?;
        let record = state.document::<Policies>(&access, &name).await?;
        let spec = spec_of_record(&record)?;
        let report = report_of(&state, &access, &name).await;
        Ok::<_, AppError>((attached, record, spec, report))
    }
    .await;
    let (attached, record, spec, report) = match loaded {
        Ok(l) => l,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    // What the save that redirected here did, shown once.
    let flash = flash::for_page(&state, &headers, uri.path());
    let saved = flash.as_ref().and_then(|f| match &f.notice {
        Notice::PolicySaved { action } => Some((action.clone(), f.warnings.clone())),
        _ => None,
    });
    let page = EditorPage {
        boundary: &boundary,
        existing: Some(&record),
        form: EditorForm::from_spec(&name, &spec),
        attached,
        outcome: Outcome {
            saved,
            ..Outcome::default()
        },
        extra_label_rows: 0,
        report,
    };
    let mut response = html_response(StatusCode::OK, render_editor(&ctx, &session, &page));
    if flash.is_some() {
        flash::shown(&ctx, &mut response);
    }
    response
}

pub async fn new_submit(
    State(state): State<App>,
    Path(boundary): Path<String>,
    form: SignedForm,
) -> Response {
    submit(state, boundary, None, form).await
}

pub async fn edit_submit(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    form: SignedForm,
) -> Response {
    submit(state, boundary, Some(name), form).await
}

/// What a submission came to.
enum Attempt {
    Saved(
        Box<PolicyView>,
        palisade_app::policies::WriteAction,
        Vec<String>,
    ),
    /// Previewed and not saved; `true`: a save that must be confirmed (it newly denies
    /// objects).
    Held(Preview, bool),
    Failed(StatusCode, Vec<FieldError>),
}

async fn submit(
    state: App,
    boundary: String,
    path_name: Option<String>,
    SignedForm { ctx, session, data }: SignedForm,
) -> Response {
    let (access, attached) = match editor_access(&state, &session, &boundary).await {
        Ok(a) => a,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let existing = match &path_name {
        None => None,
        Some(name) => match state.document::<Policies>(&access, name).await {
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
            // Reading YAML is CPU work: off the async workers, like an apply.
            let (text, editing, stored) = (
                data.get("yaml").to_owned(),
                boundary.clone(),
                existing.clone(),
            );
            let memory = palisade_api_types::yaml::peak_bound(&text);
            let read = state
                .off_workers(memory, move |_| {
                    spec_from_yaml(&text, &editing, stored.as_ref())
                })
                .await;
            match read {
                Ok(read) => read
                    .map(|(name, spec)| (name, spec, None))
                    .map_err(|message| FieldError {
                        field: Field::Yaml,
                        message,
                        line: None,
                    }),
                Err(e) => return error_response(&ctx, Some(&session), &e),
            }
        } else {
            let built = editor.build();
            let bytes = serde_json::to_vec(&built.spec).unwrap_or_default();
            Ok((typed_name.clone(), bytes, Some(built)))
        };
        let action = data.get("action").to_owned();
        let attempt = match prepared {
            Err(e) => Attempt::Failed(StatusCode::BAD_REQUEST, vec![e]),
            Ok((name, bytes, built)) => {
                let taken = existing.is_none()
                    && !name.is_empty()
                    && state.document::<Policies>(&access, &name).await.is_ok();
                if taken {
                    Attempt::Failed(StatusCode::CONFLICT, vec![FieldError {
                        field: if yaml_view { Field::Yaml } else { Field::Name },
                        message: format!(
                            "/path/policy: policy '{name}' already exists in boundary '{boundary}'; edit it instead"
                        ),
                        line: None,
                    }])
                } else {
                    // A preview first: asked for, or before a save that was not confirmed.
                    let previewed = if action == "save-confirmed" {
                        None
                    } else {
                        Some(state.preview_policy(&access, &name, &bytes).await)
                    };
                    match previewed {
                        Some(Ok(preview)) if action == "preview" => Attempt::Held(preview, false),
                        Some(Ok(preview)) if preview::must_confirm(&preview) => {
                            Attempt::Held(preview, true)
                        }
                        Some(Err(error)) if action == "preview" => Attempt::Failed(
                            crate::layout::status_of(&error),
                            vec![save_error(&error, built.as_ref(), yaml_view)],
                        ),
                        // Nothing newly denied, or no preview could be made: the save
                        // itself says what is wrong, if anything.
                        _ => {
                            let if_match = existing
                                .is_some()
                                .then(|| data.get("etag").to_owned())
                                .filter(|e| !e.is_empty());
                            let condition = SaveCondition {
                                if_match,
                                create_only: false,
                                restores: None,
                                at_once: false,
                                rewrite_identical: false,
                            };
                            match state.save_policy(&access, &name, &bytes, condition).await {
                                Ok(saved) => {
                                    let warnings = saved
                                        .warnings
                                        .iter()
                                        .map(|w| crate::warnings::save_text(&ctx, w))
                                        .collect();
                                    Attempt::Saved(Box::new(saved.view), saved.action, warnings)
                                }
                                Err(error) => Attempt::Failed(
                                    crate::layout::status_of(&error),
                                    vec![save_error(&error, built.as_ref(), yaml_view)],
                                ),
                            }
                        }
                    }
                }
            }
        };
        match attempt {
            Attempt::Saved(record, written, warnings) => {
                // 303 to the policy's page, which says what the save did: a reload there
                // submits nothing.
                let path = format!("/boundaries/{boundary}/policies/{}/edit", record.name);
                let notice = Notice::PolicySaved {
                    action: written.as_str().to_owned(),
                };
                return flash::redirect(&state, &ctx, &path, notice, &warnings);
            }
            Attempt::Held(preview, confirm) => {
                // Nothing saved: the form (or the YAML) keeps what was typed.
                if yaml_view {
                    outcome.yaml_text = Some(data.get("yaml").to_owned());
                }
                outcome.preview = Some(preview);
                outcome.confirm = confirm.then_some(yaml_view);
            }
            Attempt::Failed(error_status, errors) => {
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
    let report = match &existing {
        Some(record) => report_of(&state, &access, &record.name).await,
        None => None,
    };
    let page = EditorPage {
        boundary: &boundary,
        existing: existing.as_ref(),
        form: editor,
        attached,
        outcome,
        extra_label_rows,
        report,
    };
    html_response(status, render_editor(&ctx, &session, &page))
}

pub async fn delete_form(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    Signed { ctx, session }: Signed,
) -> Response {
    let record = match async {
        let (access, _) = editor_access(&state, &session, &boundary).await?;
        state.document::<Policies>(&access, &name).await
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
    SignedForm { ctx, session, data }: SignedForm,
) -> Response {
    let result = async {
        let access = state.open(&session.caller, &boundary).await?;
        let if_match = data.if_match();
        state
            .delete_document::<Policies>(&access, &name, if_match)
            .await
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
