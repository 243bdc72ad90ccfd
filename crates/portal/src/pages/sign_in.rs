//! Sign-in with an API token, sign-out, and the language switch.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::Response;
use maud::html;
use palisade_app::caller_from_token;
use palisade_app::App;
use palisade_app::AppError;

use super::{csrf_rejected, query_param, safe_next};
use crate::form::FormData;
use crate::i18n::Lang;
use crate::layout::{alert, error_response, html_response, page, see_other, Ctx};
use crate::session::{
    cookie, end, random_token, seal_session, session, set_cookie, tokens_match, CSRF_FIELD,
    LANG_COOKIE, SESSION_COOKIE, SIGN_IN_COOKIE,
};

const SIGN_IN_COOKIE_AGE: u64 = 60 * 60;
const LANG_COOKIE_AGE: u64 = 365 * 24 * 60 * 60;

fn sign_in_page(ctx: &Ctx, csrf: &str, next: &str, error: Option<&str>) -> maud::Markup {
    let title = ctx.t("Sign in");
    page(
        ctx,
        None,
        title,
        html! {
            h1 { (title) }
            p { (ctx.t("Sign in with a palisade API token. The portal shows and allows what the token's role allows in the API.")) }
            @if let Some(message) = error {
                (alert("error", html! { p id="token-error" { span lang="en" { (message) } } }))
            }
            form method="post" action="/sign-in" class="card narrow" {
                input type="hidden" name=(CSRF_FIELD) value=(csrf);
                input type="hidden" name="next" value=(next);
                div class="field" {
                    label for="token" { (ctx.t("Token")) }
                    @if error.is_some() {
                        input id="token" name="token" type="password" autocomplete="off" required
                            aria-invalid="true" aria-describedby="token-error";
                    } @else {
                        input id="token" name="token" type="password" autocomplete="off" required;
                    }
                }
                button type="submit" class="primary" { (ctx.t("Sign in")) }
            }
        },
    )
}

pub async fn form(State(state): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let next = query_param(uri.query(), "next").unwrap_or_else(|| "/".to_owned());
    let next = safe_next(&next).to_owned();
    if let Ok(Some(_)) = session(&state, &headers).await {
        return see_other(&next);
    }
    let csrf = random_token();
    let mut response = html_response(StatusCode::OK, sign_in_page(&ctx, &csrf, &next, None));
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(SIGN_IN_COOKIE, &csrf, ctx.secure, Some(SIGN_IN_COOKIE_AGE)),
    );
    response
}

pub async fn submit(
    State(state): State<App>,
    headers: HeaderMap,
    uri: Uri,
    form: FormData,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let expected = cookie(&headers, SIGN_IN_COOKIE).unwrap_or("");
    if !tokens_match(expected, form.get(CSRF_FIELD)) {
        return csrf_rejected(&ctx, None);
    }
    let next = safe_next(form.get("next")).to_owned();
    let token = form.get("token").trim();
    let signed_in = match caller_from_token(&state, token).await {
        Ok(caller) => seal_session(&state, token).map(|sealed| (caller, sealed)),
        Err(error) => Err(error),
    };
    match signed_in {
        Ok((caller, (value, _csrf))) => {
            tracing::info!(token = %caller.token_id, role = caller.role.name(), "portal sign-in");
            let mut response = see_other(&next);
            let headers = response.headers_mut();
            headers.append(
                header::SET_COOKIE,
                set_cookie(SESSION_COOKIE, &value, ctx.secure, None),
            );
            headers.append(
                header::SET_COOKIE,
                set_cookie(SIGN_IN_COOKIE, "", ctx.secure, Some(0)),
            );
            response
        }
        Err(AppError::Unauthorized(message)) => html_response(
            StatusCode::UNAUTHORIZED,
            sign_in_page(&ctx, expected, &next, Some(&message)),
        ),
        Err(other) => error_response(&ctx, None, &other),
    }
}

pub async fn sign_out(
    State(state): State<App>,
    headers: HeaderMap,
    uri: Uri,
    form: FormData,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    match session(&state, &headers).await {
        Ok(Some(session)) => {
            if !tokens_match(&session.csrf, form.get(CSRF_FIELD)) {
                return csrf_rejected(&ctx, Some(&session));
            }
            // Ended in the store, not only forgotten by this browser: the cookie, if kept
            // (copied, or in a browser that ignores the deletion), signs no one in again.
            if let Err(error) = end(&state, &headers).await {
                return error_response(&ctx, Some(&session), &error);
            }
            tracing::info!(token = %session.caller.token_id, "portal sign-out");
        }
        // No session to end (none, ended already, or its token revoked).
        Ok(None) => {}
        Err(error) => return error_response(&ctx, None, &error),
    }
    let mut response = see_other("/sign-in");
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(SESSION_COOKIE, "", ctx.secure, Some(0)),
    );
    response
}

/// `GET /lang/{en|sv}?next=/path`: sets the `lang` cookie and goes back. A link, so it works
/// from every page (signed in or not) with the keyboard alone.
pub async fn set_lang(Path(code): Path<String>, headers: HeaderMap, uri: Uri) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let Some(lang) = Lang::from_code(&code) else {
        return error_response(
            &ctx,
            None,
            &AppError::NotFound(format!("language '{code}' not found; use en or sv")),
        );
    };
    let next = query_param(uri.query(), "next").unwrap_or_else(|| "/".to_owned());
    let mut response = see_other(safe_next(&next));
    response.headers_mut().append(
        header::SET_COOKIE,
        set_cookie(LANG_COOKIE, lang.code(), ctx.secure, Some(LANG_COOKIE_AGE)),
    );
    response
}
