//! Exceptions in the portal (SPEC 7): a form to request one (a developer's save is a request; an
//! admin's or boundary-admin's is active at once, as in the API), and the approval of a
//! request from the boundary page. Both save through the application's functions, so roles,
//! validation and messages are the API's; every POST redirects (post/redirect/get).

use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_app::policies::Policies;
use palisade_app::{App, AppError};
use serde_json::{json, Map, Value};

use super::{query_param, Signed, SignedForm, ALL};
use crate::flash::{self, Notice};
use crate::form::FormData;
use crate::layout::{alert, csrf_field, error_response, html_response, page, Ctx};
use crate::session::Session;

/// The rule kinds an exception may name.
const RULE_KINDS: [&str; 4] = [
    "RequiredLabels",
    "AllowedRegistries",
    "DisallowLatestTag",
    "AllowedComputePlans",
];

/// What the form holds, as typed.
#[derive(Debug, Default)]
struct ExceptionForm {
    name: String,
    policy: String,
    rules: Vec<String>,
    namespaces: String,
    labels: String,
    images: String,
    clusters: String,
    resources: String,
    plans: String,
    expires_at: String,
    reason: String,
}

/// Words separated by commas, spaces or lines.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

impl ExceptionForm {
    fn from_data(data: &FormData) -> ExceptionForm {
        ExceptionForm {
            name: data.get("name").trim().to_owned(),
            policy: data.get("policy").trim().to_owned(),
            rules: data.all("rules"),
            namespaces: data.get("namespaces").to_owned(),
            labels: data.get("labels").to_owned(),
            images: data.get("images").to_owned(),
            clusters: data.get("clusters").to_owned(),
            resources: data.get("resources").to_owned(),
            plans: data.get("plans").to_owned(),
            expires_at: data.get("expiresAt").trim().to_owned(),
            reason: data.get("reason").to_owned(),
        }
    }

    /// The spec the API takes; `Err` names a label that is not `key=value`.
    fn spec(&self) -> Result<Value, String> {
        let mut spec = Map::new();
        spec.insert("policy".into(), json!(self.policy));
        if !self.rules.is_empty() {
            spec.insert("rules".into(), json!(self.rules));
        }
        let mut object_match = Map::new();
        for (field, text) in [
            ("clusters", &self.clusters),
            ("namespaces", &self.namespaces),
            ("images", &self.images),
        ] {
            let list = words(text);
            if !list.is_empty() {
                object_match.insert(field.into(), json!(list));
            }
        }
        let mut labels = Map::new();
        for pair in words(&self.labels) {
            let Some((key, value)) = pair.split_once('=') else {
                return Err(format!("'{pair}' is not key=value"));
            };
            labels.insert(key.to_owned(), json!(value));
        }
        if !labels.is_empty() {
            object_match.insert("labels".into(), Value::Object(labels));
        }
        if !object_match.is_empty() {
            spec.insert("match".into(), Value::Object(object_match));
        }
        for (field, text) in [("resources", &self.resources), ("plans", &self.plans)] {
            let list = words(text);
            if !list.is_empty() {
                spec.insert(field.into(), json!(list));
            }
        }
        spec.insert("expiresAt".into(), json!(self.expires_at));
        spec.insert("reason".into(), json!(self.reason.trim()));
        Ok(Value::Object(spec))
    }
}

/// The form field a save error's pointer names (`/match/labels/app: ...` → `labels`).
fn field_of(message: &str) -> &'static str {
    let pointer = message.split(':').next().unwrap_or_default();
    let mut parts = pointer.trim_start_matches('/').split('/');
    match (parts.next(), parts.next()) {
        (Some("match"), Some("labels")) => "labels",
        (Some("match"), Some("images")) => "images",
        (Some("match"), Some("clusters")) => "clusters",
        (Some("match"), _) => "namespaces",
        (Some("policy"), _) => "policy",
        (Some("rules"), _) => "rules",
        (Some("resources"), _) => "resources",
        (Some("plans"), _) => "plans",
        (Some("expiresAt"), _) => "expiresAt",
        (Some("reason"), _) => "reason",
        _ => "name",
    }
}

pub async fn new_form(
    State(state): State<App>,
    Path(boundary): Path<String>,
    uri: Uri,
    Signed { ctx, session }: Signed,
) -> Response {
    let policies = match policy_names(&state, &session, &boundary).await {
        Ok(p) => p,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let in_30_days = (chrono::Utc::now() + chrono::Duration::days(30))
        .format("%Y-%m-%dT00:00:00Z")
        .to_string();
    let form = ExceptionForm {
        policy: query_param(uri.query(), "policy").unwrap_or_default(),
        expires_at: in_30_days,
        ..ExceptionForm::default()
    };
    html_response(
        StatusCode::OK,
        render_form(&ctx, &session, &boundary, &policies, &form, None),
    )
}

async fn policy_names(
    state: &App,
    session: &Session,
    boundary: &str,
) -> Result<Vec<String>, AppError> {
    let access = state.open(&session.caller, boundary).await?;
    Ok(state
        .list_documents::<Policies>(&access, &ALL)
        .await?
        .items
        .into_iter()
        .map(|p| p.name)
        .collect())
}

pub async fn new_submit(
    State(state): State<App>,
    Path(boundary): Path<String>,
    SignedForm { ctx, session, data }: SignedForm,
) -> Response {
    let form = ExceptionForm::from_data(&data);
    let result = async {
        let access = state.open(&session.caller, &boundary).await?;
        let spec = form
            .spec()
            .map_err(|why| AppError::InvalidRequest(format!("/match/labels: {why}")))?;
        let body = serde_json::to_vec(&spec)
            .map_err(|e| AppError::Internal(format!("cannot encode the spec: {e}")))?;
        // The form makes a new exception: one of that name is a 409, never replaced.
        let create = palisade_app::policies::SaveCondition {
            if_match: None,
            create_only: true,
            restores: None,
            at_once: false,
            rewrite_identical: false,
        };
        state
            .save_exception(&access, &form.name, &body, create)
            .await
    }
    .await;
    match result {
        Ok(saved) => {
            let notice = Notice::ExceptionSaved {
                name: saved.view.name.clone(),
                status: saved.view.status.clone(),
            };
            let warnings: Vec<String> = saved
                .warnings
                .iter()
                .map(|w| crate::warnings::exception_text(&ctx, w))
                .collect();
            flash::redirect(
                &state,
                &ctx,
                &format!("/boundaries/{boundary}"),
                notice,
                &warnings,
            )
        }
        Err(AppError::Unauthorized(_)) => crate::layout::to_sign_in(&ctx),
        Err(
            error @ (AppError::InvalidRequest(_) | AppError::Conflict(_) | AppError::NotFound(_)),
        ) => {
            let policies = policy_names(&state, &session, &boundary)
                .await
                .unwrap_or_default();
            html_response(
                crate::layout::status_of(&error),
                render_form(&ctx, &session, &boundary, &policies, &form, Some(&error)),
            )
        }
        Err(error) => error_response(&ctx, Some(&session), &error),
    }
}

pub async fn approve_submit(
    State(state): State<App>,
    Path((boundary, name)): Path<(String, String)>,
    SignedForm { ctx, session, data }: SignedForm,
) -> Response {
    let result = async {
        let access = state.open(&session.caller, &boundary).await?;
        let if_match = data.if_match().map(str::to_owned);
        state.approve_exception(&access, &name, if_match).await
    }
    .await;
    match result {
        Ok(view) => flash::redirect(
            &state,
            &ctx,
            &format!("/boundaries/{boundary}"),
            Notice::ExceptionApproved {
                name: view.name,
                until: view.expires_at,
            },
            &[],
        ),
        Err(error) => error_response(&ctx, Some(&session), &error),
    }
}

fn render_form(
    ctx: &Ctx,
    session: &Session,
    boundary: &str,
    policies: &[String],
    form: &ExceptionForm,
    error: Option<&AppError>,
) -> Markup {
    let developer = session.caller.require_boundary_admin().is_err();
    let title = ctx.t("Request an exception");
    let message = error.map(|e| e.body().error.message);
    let invalid = |field: &str| {
        message
            .as_deref()
            .is_some_and(|m| field_of(m) == field)
            .then_some("true")
    };
    let text_field = |id: &'static str, label: &'static str, hint: &'static str, value: &str| {
        html! {
            div class="field" {
                label for=(id) { (ctx.t(label)) }
                @if !hint.is_empty() { p class="hint" id={ (id) "-hint" } { (ctx.t(hint)) } }
                input type="text" id=(id) name=(id) value=(value)
                    aria-describedby=[(!hint.is_empty()).then(|| format!("{id}-hint"))]
                    aria-invalid=[invalid(id)];
            }
        }
    };
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (boundary) } { (boundary) } " / " (title)
        }
        h1 { (title) }
        @if let Some(message) = &message {
            (alert("error", html! { p { span lang="en" { (message) } } p { (ctx.t("Nothing was saved.")) } }))
        }
        p {
            @if developer {
                (ctx.t("Your request lets nothing past until an admin or boundary-admin of the boundary approves it."))
            } @else {
                (ctx.t("Saved by you, the exception is active at once."))
            }
            " " (ctx.t("It lets the objects or resources it names past one policy until the time given, and then ends by itself."))
        }
        form method="post" action={ "/boundaries/" (boundary) "/exceptions/new" } id="exception-form" {
            (csrf_field(session))
            (text_field("name", "Exception name", "", &form.name))
            div class="field" {
                label for="policy" { (ctx.t("Policy")) }
                select id="policy" name="policy" aria-invalid=[invalid("policy")] {
                    @for p in policies {
                        option value=(p) selected[*p == form.policy] { (p) }
                    }
                }
            }
            fieldset aria-invalid=[invalid("rules")] {
                legend { (ctx.t("Rules excepted (none checked: every rule of the policy)")) }
                @for kind in RULE_KINDS {
                    div class="check" {
                        input type="checkbox" id={ "rule-" (kind) } name="rules" value=(kind)
                            checked[form.rules.iter().any(|r| r == kind)];
                        label for={ "rule-" (kind) } lang="en" { (kind) }
                    }
                }
            }
            fieldset {
                legend { (ctx.t("Objects let past admission rules (every field given must match)")) }
                (text_field("namespaces", "Namespaces", "Names of the boundary's namespaces, separated by commas.", &form.namespaces))
                (text_field("labels", "Labels", "key=value pairs the object carries, separated by commas.", &form.labels))
                (text_field("images", "Images", "Exact image names; only these are let past. Empty: every image of a matched object.", &form.images))
                (text_field("clusters", "Clusters", "Empty: every cluster of the policy's scope.", &form.clusters))
            }
            fieldset {
                legend { (ctx.t("Resources let past compute plan rules")) }
                (text_field("resources", "Resources", "type/name, e.g. app/reports, separated by commas.", &form.resources))
                (text_field("plans", "Plans", "The plans those resources may use.", &form.plans))
            }
            (text_field("expiresAt", "Ends at", "RFC 3339 in UTC, e.g. 2027-01-31T00:00:00Z.", &form.expires_at))
            div class="field" {
                label for="reason" { (ctx.t("Reason")) }
                textarea id="reason" name="reason" rows="3" aria-invalid=[invalid("reason")] { (form.reason) }
            }
            div class="buttons" {
                button type="submit" class="primary" {
                    @if developer { (ctx.t("Request the exception")) } @else { (ctx.t("Save the exception")) }
                }
                a class="button" href={ "/boundaries/" (boundary) } { (ctx.t("Cancel")) }
            }
        }
    };
    page(ctx, Some(session), title, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_becomes_the_api_s_spec() {
        let form = ExceptionForm {
            name: "legacy".into(),
            policy: "trusted".into(),
            rules: vec!["AllowedRegistries".into()],
            namespaces: "web, api".into(),
            labels: "app=legacy tier=old".into(),
            images: "docker.io/library/nginx:1.27\nredis:7".into(),
            expires_at: "2027-01-31T00:00:00Z".into(),
            reason: " OPS-1234 ".into(),
            ..ExceptionForm::default()
        };
        assert_eq!(
            form.spec().unwrap(),
            json!({"policy": "trusted", "rules": ["AllowedRegistries"],
                "match": {"namespaces": ["web", "api"], "images": ["docker.io/library/nginx:1.27", "redis:7"],
                    "labels": {"app": "legacy", "tier": "old"}},
                "expiresAt": "2027-01-31T00:00:00Z", "reason": "OPS-1234"})
        );
        let broken = ExceptionForm {
            labels: "app".into(),
            ..ExceptionForm::default()
        };
        assert_eq!(broken.spec().unwrap_err(), "'app' is not key=value");
        assert_eq!(field_of("/match/images/0: must be ..."), "images");
        assert_eq!(field_of("/match: must name namespaces"), "namespaces");
        assert_eq!(field_of("/expiresAt: must be in the future"), "expiresAt");
    }
}
