//! The portal's pages. Each handler resolves the session, asks the API's functions, and renders.

pub mod boundary;
pub mod exceptions;
pub mod manage;
pub mod policy_editor;
pub mod resource_form;
pub mod rollout;
pub mod sign_in;

use axum::extract::{FromRef, FromRequest, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use maud::html;
use palisade_app::{App, PageRequest};

use crate::form::FormData;
use crate::layout::{alert, error_response, html_response, page, to_sign_in, Ctx};
use crate::session::{session, tokens_match, Session, CSRF_FIELD};

/// Any other path, whatever the method: the 404 page in the user's language, with the way
/// back. No session is needed to learn that a page does not exist; with one, the page shows
/// it as every page does.
pub async fn not_found(State(state): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = session(&state, &headers).await.ok().flatten();
    let title = ctx.t("Not found");
    html_response(
        StatusCode::NOT_FOUND,
        page(
            &ctx,
            session.as_ref(),
            title,
            html! {
                h1 { (title) }
                p { (ctx.t("There is no page at")) " " code { (uri.path()) } "." }
                p { a href="/" { (ctx.t("Back to the boundaries")) } }
            },
        ),
    )
}

/// What a portal page asks of a list: its first 1000 items (a page shows them all).
pub(crate) const ALL: PageRequest = PageRequest {
    limit: Some(1000),
    continue_token: None,
};

/// A signed-in page request: its context and session. Extracting it answers sign-in or an
/// error page otherwise (`require_session`).
pub struct Signed {
    pub ctx: Ctx,
    pub session: Session,
}

impl<S: Send + Sync> FromRequestParts<S> for Signed
where
    App: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let ctx = Ctx::new(&parts.headers, &parts.uri);
        let session = require_session(&App::from_ref(state), &parts.headers, &ctx).await?;
        Ok(Signed { ctx, session })
    }
}

/// A form submitted by a signed-in user, its CSRF token checked: its context, session and
/// fields. The form is read first, then the session (`require_session`); a form without the
/// session's CSRF token is refused with 403 (`csrf_rejected`).
pub struct SignedForm {
    pub ctx: Ctx,
    pub session: Session,
    pub data: FormData,
}

impl<S> FromRequest<S> for SignedForm
where
    S: Send + Sync,
    App: FromRef<S>,
{
    type Rejection = Response;

    async fn from_request(request: Request, state: &S) -> Result<Self, Response> {
        let (mut parts, body) = request.into_parts();
        let data = FormData::from_request(Request::from_parts(parts.clone(), body), state).await?;
        let Signed { ctx, session } = Signed::from_request_parts(&mut parts, state).await?;
        if !tokens_match(&session.csrf, data.get(CSRF_FIELD)) {
            return Err(csrf_rejected(&ctx, Some(&session)));
        }
        Ok(SignedForm { ctx, session, data })
    }
}

/// The session of a page request; otherwise the answer to send (sign-in, or an error page).
pub async fn require_session(
    state: &App,
    headers: &HeaderMap,
    ctx: &Ctx,
) -> Result<Session, Response> {
    match session(state, headers).await {
        Ok(Some(session)) => Ok(session),
        Ok(None) => Err(to_sign_in(ctx)),
        Err(error) => Err(error_response(ctx, None, &error)),
    }
}

/// 403: the form did not carry this session's CSRF token.
pub fn csrf_rejected(ctx: &Ctx, session: Option<&Session>) -> Response {
    let title = ctx.t("Form rejected");
    html_response(
        StatusCode::FORBIDDEN,
        page(
            ctx,
            session,
            title,
            html! {
                h1 { (title) }
                (alert("error", html! {
                    p { (ctx.t("The form did not come from this page or has expired (CSRF check failed). Nothing was changed.")) }
                }))
                p { a href="/" { (ctx.t("Back to the boundaries")) } }
            },
        ),
    )
}

/// A same-site path to return to, never another site (`//host`, `/\host`).
pub fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.starts_with("/\\")
        && !next.chars().any(char::is_control);
    if ok {
        next
    } else {
        "/"
    }
}

/// `?next=` of a query string.
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    form_urlencoded::parse(query.unwrap_or("").as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}
