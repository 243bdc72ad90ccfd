//! Creating a boundary (admin): a form on the boundaries list, `POST /boundaries`.

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_api_types::view::NewBoundary;
use palisade_app::App;

use super::{answer, done, status_for, Said};
use crate::form::FormData;
use crate::layout::{csrf_field, Ctx};
use crate::pages::require_form_session;
use crate::session::Session;

/// The form (admins only; the list page shows it).
pub(crate) fn create_form(ctx: &Ctx, session: &Session) -> Markup {
    if session.caller.require_admin().is_err() {
        return html! {};
    }
    html! {
        section aria-labelledby="new-boundary-heading" {
            h2 id="new-boundary-heading" { (ctx.t("Create a boundary")) }
            form method="post" action="/boundaries" id="boundary-form" {
                (csrf_field(session))
                div class="field" {
                    label for="boundary-name" { (ctx.t("Name")) }
                    input id="boundary-name" name="name" required
                        pattern="[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?" aria-describedby="boundary-name-help";
                    p id="boundary-name-help" class="help" { (ctx.t("Lower-case letters, digits and '-', at most 63.")) }
                }
                div class="field" {
                    label for="boundary-display" { (ctx.t("Display name")) " " span class="muted" { (ctx.t("(optional)")) } }
                    input id="boundary-display" name="display_name";
                }
                div class="buttons" { button type="submit" class="primary" { (ctx.t("Create the boundary")) } }
            }
        }
    }
}

pub async fn create(
    State(state): State<App>,
    headers: HeaderMap,
    uri: Uri,
    data: FormData,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_form_session(&state, &headers, &ctx, &data).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let name = data.get("name").trim().to_owned();
    let display = data.get("display_name").trim();
    let new = NewBoundary {
        name: name.clone(),
        display_name: (!display.is_empty()).then(|| display.to_owned()),
    };
    match state.create_boundary(&session.caller, new).await {
        Ok(_) => done(
            &state,
            &ctx,
            &format!("/boundaries/{name}"),
            format!("{} {name}", ctx.t("Created boundary")),
        ),
        Err(error) => {
            let said = Said::Refused(error);
            let status = status_for(&said);
            let page = crate::pages::boundary::list_page(&state, &ctx, &session, &said).await;
            answer(&ctx, &session, status, page)
        }
    }
}
