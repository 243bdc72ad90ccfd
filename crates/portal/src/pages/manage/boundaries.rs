//! Creating a boundary (admin): a form on the boundaries list, `POST /boundaries`.

use axum::extract::State;

use axum::response::Response;
use maud::{html, Markup};
use palisade_api_types::view::NewBoundary;
use palisade_app::App;

use super::{done, post_page};
use crate::layout::{csrf_field, Ctx};
use crate::pages::SignedForm;
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

pub async fn create(State(state): State<App>, form: SignedForm) -> Response {
    post_page(
        &form,
        async |ctx, session| {
            let name = form.data.get("name").trim().to_owned();
            let display = form.data.get("display_name").trim();
            let new = NewBoundary {
                name: name.clone(),
                display_name: (!display.is_empty()).then(|| display.to_owned()),
            };
            state.create_boundary(&session.caller, new).await?;
            let text = format!("{} {name}", ctx.t("Created boundary"));
            Ok(done(&state, ctx, &format!("/boundaries/{name}"), text))
        },
        async |ctx, session, said| {
            crate::pages::boundary::list_page(&state, ctx, session, said).await
        },
    )
    .await
}
