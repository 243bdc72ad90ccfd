//! Tokens (admin, or boundary-admin for its boundary's developer tokens): the list (never the
//! secrets), the form that creates one, whose secret the page after the redirect shows once,
//! and revoking one.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_api_types::view::NewToken;
use palisade_app::caller::Role;
use palisade_app::{App, AppError};

use super::{done, get_page, post_page, Said};
use crate::flash::{self, Notice};
use crate::layout::{column_heads, csrf_field, page, Ctx};
use crate::pages::{SignedForm, ALL};
use crate::session::Session;

const HERE: &str = "/tokens";

pub async fn show(State(state): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    get_page(&state, &headers, &uri, async |ctx, session, said| {
        tokens_page(&state, ctx, session, said).await
    })
    .await
}

pub async fn create(State(state): State<App>, form: SignedForm) -> Response {
    post_page(
        &form,
        async |ctx, session| {
            let boundary = form.data.get("boundary").trim();
            let days = form.data.get("expires_in_days").trim();
            let new = NewToken {
                role: form.data.get("role").to_owned(),
                boundary: (!boundary.is_empty()).then(|| boundary.to_owned()),
                expires_in_days: match days.parse::<u32>() {
                    Ok(days) => Some(days),
                    Err(_) if days.is_empty() => None,
                    Err(_) => {
                        return Err(AppError::invalid(
                            "/expires_in_days",
                            "must be a whole number of days from 1 to 3650",
                        ))
                    }
                },
            };
            let created = state.create_token(&session.caller, new).await?;
            let text = format!(
                "{} {} ({})",
                ctx.t("Created token"),
                created.token.id,
                created.token.role
            );
            let notice = Notice::Done {
                text,
                secret: Some(created.secret),
            };
            Ok(flash::redirect(&state, ctx, HERE, notice, &[]))
        },
        async |ctx, session, said| tokens_page(&state, ctx, session, said).await,
    )
    .await
}

pub async fn revoke(
    State(state): State<App>,
    Path(id): Path<String>,
    form: SignedForm,
) -> Response {
    post_page(
        &form,
        async |ctx, session| {
            state.revoke_token(&session.caller, &id).await?;
            let text = format!("{} {id}", ctx.t("Revoked token"));
            Ok(done(&state, ctx, HERE, text))
        },
        async |ctx, session, said| tokens_page(&state, ctx, session, said).await,
    )
    .await
}

async fn tokens_page(
    state: &App,
    ctx: &Ctx,
    session: &Session,
    said: &Said,
) -> Result<Markup, AppError> {
    let tokens = state.list_tokens(&session.caller, &ALL).await?;
    let boundaries = state.boundaries(&session.caller).await?;
    // The roles this caller may give (the API refuses the others all the same).
    let roles: &[&str] = match &session.caller.role {
        Role::Admin => &["developer", "boundary-admin", "admin"],
        _ => &["developer"],
    };
    let title = ctx.t("Tokens");
    let body = html! {
        p class="crumbs" { a href="/" { (ctx.t("Boundaries")) } " / " (title) }
        h1 { (title) }
        (said.render(ctx))
        @if tokens.items.is_empty() {
            p { (ctx.t("No tokens.")) }
        } @else {
            table id="token-list" {
                caption class="visually-hidden" { (title) }
                (column_heads(&[ctx.t("Token"), ctx.t("Role"), ctx.t("Boundary"), ctx.t("Created"), ctx.t("Expires"), ctx.t("Actions")]))
                tbody {
                    @for t in &tokens.items {
                        tr data-token=(t.id) {
                            th scope="row" { code { (t.id) } }
                            td lang="en" { (t.role) }
                            td { (t.boundary.as_deref().unwrap_or("–")) }
                            td { (t.created_at) }
                            td { (t.expires_at.as_deref().unwrap_or(ctx.t("never"))) }
                            td {
                                @if t.id != session.caller.token_id {
                                    form method="post" action={ "/tokens/" (t.id) "/revoke" } class="inline" {
                                        (csrf_field(session))
                                        button type="submit" class="small danger" aria-label={ (ctx.t("Revoke")) " " (t.id) } { (ctx.t("Revoke")) }
                                    }
                                } @else {
                                    span class="muted" { (ctx.t("this session's")) }
                                }
                            }
                        }
                    }
                }
            }
        }
        section aria-labelledby="token-heading" {
            h2 id="token-heading" { (ctx.t("Create a token")) }
            form method="post" action="/tokens" id="token-form" {
                (csrf_field(session))
                div class="field" {
                    label for="token-role" { (ctx.t("Role")) }
                    select id="token-role" name="role" {
                        @for role in roles { option value=(role) { (role) } }
                    }
                }
                div class="field" {
                    label for="token-boundary" { (ctx.t("Boundary")) " " span class="muted" { (ctx.t("(none for admin)")) } }
                    select id="token-boundary" name="boundary" {
                        @if session.caller.require_admin().is_ok() { option value="" { "–" } }
                        @for b in &boundaries { option value=(b.name) { (b.name) } }
                    }
                }
                div class="field" {
                    label for="token-days" { (ctx.t("Expires in days")) " " span class="muted" { (ctx.t("(optional)")) } }
                    input id="token-days" name="expires_in_days" inputmode="numeric";
                }
                div class="buttons" { button type="submit" class="primary" { (ctx.t("Create the token")) } }
            }
        }
    };
    Ok(page(ctx, Some(session), title, body))
}
