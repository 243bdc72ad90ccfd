//! The pages an admin needs for the README's cluster walkthrough (issue 26, item 3): create a
//! boundary, register clusters, attach them, create, adopt and release namespaces, and create,
//! list and revoke tokens. Each asks the same use case as the API with the signed-in caller,
//! so each obeys the API's roles. A successful POST redirects (post/redirect/get) to the page,
//! which shows what was done once; a refused one shows the page again with the API's code and
//! message and the status the API would answer.

pub mod boundaries;
pub mod clusters;
pub mod placement;
pub mod tokens;

use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_app::{App, AppError};

use crate::flash::{self, Flash, Notice};
use crate::layout::{alert, error_response, html_response, status_of, CodeText, Ctx};
use crate::pages::SignedForm;
use crate::session::Session;

/// What the page says at the top: what a POST that redirected here did, or why one was
/// refused.
pub(crate) enum Said {
    Nothing,
    Done(Flash),
    Refused(AppError),
}

impl Said {
    /// The notice of the flash for this page, if any.
    pub(crate) fn from_flash(flash: Option<Flash>) -> Said {
        match flash {
            Some(flash) if matches!(flash.notice, Notice::Done { .. }) => Said::Done(flash),
            _ => Said::Nothing,
        }
    }

    pub(crate) fn render(&self, ctx: &Ctx) -> Markup {
        match self {
            Said::Nothing => html! {},
            Said::Done(flash) => match &flash.notice {
                Notice::Done { text, secret } => html! {
                    (alert("success", html! {
                        p id="done" { (text) }
                        @if let Some(secret) = secret {
                            p { (ctx.t("The token (shown once; it is stored only as a hash):")) }
                            p { code id="secret" class="secret" { (secret) } }
                        }
                    }))
                },
                _ => html! {},
            },
            Said::Refused(error) => html! {
                (alert("error", html! {
                    p id="refused" {
                        code lang="en" { (error.code_text()) } " "
                        span lang="en" class="api-message" { (error.body().error.message) }
                    }
                }))
            },
        }
    }
}

/// 303 to `path` with what was done, shown there once.
pub(crate) fn done(state: &App, ctx: &Ctx, path: &str, text: String) -> Response {
    flash::redirect(state, ctx, path, Notice::Done { text, secret: None }, &[])
}

/// A management page as loaded: with the status the API would answer the POST that is shown
/// refused on it (200 otherwise); an error the page cannot hold (the caller may not see the
/// page at all) is its own page.
pub(crate) fn answer(
    ctx: &Ctx,
    session: &Session,
    status: StatusCode,
    page: Result<Markup, AppError>,
) -> Response {
    match page {
        Ok(markup) => html_response(status, markup),
        Err(error) => error_response(ctx, Some(session), &error),
    }
}

/// The status a refused POST is answered with.
pub(crate) fn status_for(said: &Said) -> StatusCode {
    match said {
        Said::Refused(error) => status_of(error),
        _ => StatusCode::OK,
    }
}

/// A management page's GET: the session, the notice of the POST that redirected here (shown
/// once), and the page `page` makes.
pub(crate) async fn get_page(
    state: &App,
    headers: &HeaderMap,
    uri: &Uri,
    page: impl AsyncFnOnce(&Ctx, &Session, &Said) -> Result<Markup, AppError>,
) -> Response {
    let ctx = Ctx::new(headers, uri);
    let session = match crate::pages::require_session(state, headers, &ctx).await {
        Ok(session) => session,
        Err(response) => return response,
    };
    let flash = flash::for_page(state, headers, uri.path());
    let shown = flash.is_some();
    let said = Said::from_flash(flash);
    let page = page(&ctx, &session, &said).await;
    let mut response = answer(&ctx, &session, status_for(&said), page);
    if shown {
        flash::shown(&ctx, &mut response);
    }
    response
}

/// A management page's POST, once the form's session and CSRF token are checked
/// (`SignedForm`): `act`, which does what
/// was asked and answers the redirect that says so; a refusal shows the page `page` makes
/// again, with the API's code and message and the status the API would answer.
pub(crate) async fn post_page(
    form: &SignedForm,
    act: impl AsyncFnOnce(&Ctx, &Session) -> Result<Response, AppError>,
    page: impl AsyncFnOnce(&Ctx, &Session, &Said) -> Result<Markup, AppError>,
) -> Response {
    let SignedForm { ctx, session, .. } = form;
    match act(ctx, session).await {
        Ok(response) => response,
        Err(error) => {
            let said = Said::Refused(error);
            let page = page(ctx, session, &said).await;
            answer(ctx, session, status_for(&said), page)
        }
    }
}
