//! The page shell (header, language switch, sign-out), the HTML answers and error pages, and
//! the security headers every portal answer carries.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup, DOCTYPE};
use palisade_app::AppError;
use palisade_app::Role;

use crate::i18n::Lang;
use crate::session::{is_secure, Session, CSRF_FIELD};

/// What every page needs to know about the request.
#[derive(Clone, Debug)]
pub struct Ctx {
    pub lang: Lang,
    pub secure: bool,
    /// Path and query of this page (the target of the language switch).
    pub here: String,
}

impl Ctx {
    /// A page's context in `lang`, for unit tests of what a page says.
    #[cfg(test)]
    pub fn in_lang(lang: Lang) -> Ctx {
        Ctx {
            lang,
            secure: false,
            here: "/".into(),
        }
    }

    pub fn new(headers: &HeaderMap, uri: &Uri) -> Ctx {
        Ctx {
            lang: Lang::from_headers(headers),
            secure: is_secure(headers),
            here: uri
                .path_and_query()
                .map(|p| p.as_str().to_owned())
                .unwrap_or_else(|| "/".to_owned()),
        }
    }

    /// The portal's own text in the page's language.
    pub fn t(&self, english: &'static str) -> &'static str {
        self.lang.t(english)
    }
}

/// A whole page.
pub fn page(ctx: &Ctx, session: Option<&Session>, title: &str, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang=(ctx.lang.code()) {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · palisade" }
                link rel="stylesheet" href=(crate::assets::css_href());
                script src=(crate::assets::live_js_href()) defer {}
            }
            body {
                a class="skip" href="#main" { (ctx.t("Skip to content")) }
                header class="top" {
                    a class="brand" href="/" { "palisade" }
                    @if let Some(session) = session {
                        nav aria-label=(ctx.t("Main")) {
                            a href="/" { (ctx.t("Boundaries")) }
                            @if session.caller.require_admin().is_ok() {
                                " " a href="/clusters" { (ctx.t("Clusters")) }
                            }
                            @if session.caller.require_boundary_admin().is_ok() {
                                " " a href="/tokens" { (ctx.t("Tokens")) }
                            }
                        }
                    }
                    div class="spacer" {}
                    @if let Some(session) = session {
                        span class="who" {
                            (ctx.t("Signed in as")) " "
                            strong { (role_text(ctx, &session.caller.role)) }
                        }
                    }
                    (language_switch(ctx))
                    @if let Some(session) = session {
                        form method="post" action="/sign-out" class="inline" {
                            (csrf_field(session))
                            button type="submit" { (ctx.t("Sign out")) }
                        }
                    }
                }
                main id="main" tabindex="-1" { (body) }
            }
        }
    }
}

fn role_text(ctx: &Ctx, role: &Role) -> String {
    match role {
        Role::Admin => ctx.t("admin").to_owned(),
        Role::BoundaryAdmin(b) => format!("{} ({b})", ctx.t("boundary-admin")),
        Role::Developer(b) => format!("{} ({b})", ctx.t("developer")),
    }
}

fn language_switch(ctx: &Ctx) -> Markup {
    let next = form_urlencoded::byte_serialize(ctx.here.as_bytes()).collect::<String>();
    html! {
        nav class="lang" aria-label=(ctx.t("Language")) {
            @for lang in [Lang::En, Lang::Sv] {
                @if lang == ctx.lang {
                    a href={ "/lang/" (lang.code()) "?next=" (next) } lang=(lang.code())
                        hreflang=(lang.code()) aria-current="true" { (lang.name()) }
                } @else {
                    a href={ "/lang/" (lang.code()) "?next=" (next) } lang=(lang.code())
                        hreflang=(lang.code()) { (lang.name()) }
                }
            }
        }
    }
}

/// The hidden CSRF field every form carries.
pub fn csrf_field(session: &Session) -> Markup {
    html! { input type="hidden" name=(CSRF_FIELD) value=(session.csrf); }
}

/// An HTML answer.
pub fn html_response(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        markup.into_string(),
    )
        .into_response()
}

/// 303 See Other to `location` (after a POST, or to the sign-in page).
pub fn see_other(location: &str) -> Response {
    let value = HeaderValue::from_str(location).unwrap_or_else(|_| HeaderValue::from_static("/"));
    (StatusCode::SEE_OTHER, [(header::LOCATION, value)]).into_response()
}

/// To the sign-in page, coming back to `ctx.here` afterwards.
pub fn to_sign_in(ctx: &Ctx) -> Response {
    let next = form_urlencoded::byte_serialize(ctx.here.as_bytes()).collect::<String>();
    see_other(&format!("/sign-in?next={next}"))
}

/// A message box. `role=alert` for errors so screen readers announce them.
/// A table's head: one row of column headers, `heads` in order (texts already translated).
pub fn column_heads(heads: &[&str]) -> Markup {
    html! {
        thead { tr {
            @for head in heads {
                th scope="col" { (head) }
            }
        } }
    }
}

pub fn alert(kind: &str, content: Markup) -> Markup {
    let role = if kind == "error" { "alert" } else { "status" };
    html! { div class={ "notice " (kind) } role=(role) { (content) } }
}

/// The API's message of a 503, with the portal's request to try again.
pub fn unavailable_notice(ctx: &Ctx, error: &AppError) -> Markup {
    alert(
        "error",
        html! {
            p { code { (error.code_text()) } " " span lang="en" { (error.body().error.message) } }
            p { (ctx.t("Nothing was changed. Please try again in a few seconds.")) }
        },
    )
}

/// The page for an API error: 401 goes to sign-in, anything else is shown with the API's
/// code and message (503 asks to retry and carries `Retry-After`).
pub fn error_response(ctx: &Ctx, session: Option<&Session>, error: &AppError) -> Response {
    if matches!(error, AppError::Unauthorized(_)) {
        return to_sign_in(ctx);
    }
    if let AppError::Internal(cause) = error {
        tracing::error!(%cause, "portal: internal error");
    }
    let status = status_of(error);
    let title = match status {
        StatusCode::NOT_FOUND => ctx.t("Not found"),
        StatusCode::FORBIDDEN => ctx.t("Not allowed"),
        StatusCode::SERVICE_UNAVAILABLE => ctx.t("Temporarily unavailable"),
        _ => ctx.t("Something went wrong"),
    };
    let body = html! {
        h1 { (title) }
        @if status == StatusCode::SERVICE_UNAVAILABLE {
            (unavailable_notice(ctx, error))
        } @else {
            (alert("error", html! {
                p { code { (error.code_text()) } " " span lang="en" { (error.body().error.message) } }
            }))
        }
        p { a href="/" { (ctx.t("Back to the boundaries")) } }
    };
    let mut response = html_response(status, page(ctx, session, title, body));
    if status == StatusCode::SERVICE_UNAVAILABLE {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    }
    response
}

/// The error code as text (`compute_plan_not_allowed`).
pub trait CodeText {
    fn code_text(&self) -> String;
}

impl CodeText for AppError {
    fn code_text(&self) -> String {
        serde_json::to_value(self.code())
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    }
}

/// Security headers on every portal answer: only the portal's own script (no inline script),
/// forms only to this site, no framing, no caching of pages that show a boundary's data.
pub async fn security_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// The status a page answers an application error with: the one its code carries.
pub fn status_of(error: &AppError) -> StatusCode {
    StatusCode::from_u16(error.code().http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}
