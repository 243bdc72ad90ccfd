//! Deleting a resource from its page: a confirmation that says what goes (for a workload, its
//! Deployment, pods and build Jobs in the cluster), then the delete with the etag the page was
//! made from, and a redirect to the boundary page that says what was deleted.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;
use palisade_app::App;
use palisade_policy::ResourceType;

use super::render::{resource_path, type_name};
use crate::flash::{self, Notice};
use crate::layout::{alert, csrf_field, error_response, html_response, page};
use crate::pages::{Signed, SignedForm};

pub async fn form(
    State(state): State<App>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    Signed { ctx, session }: Signed,
) -> Response {
    let view = match async {
        let access = state.open(&session.caller, &boundary).await?;
        state.get_resource(&access, &resource_type, &name).await
    }
    .await
    {
        Ok(view) => view,
        Err(e) => return error_response(&ctx, Some(&session), &e),
    };
    let Ok(ty) = ResourceType::parse(&resource_type) else {
        return error_response(
            &ctx,
            Some(&session),
            &palisade_app::AppError::NotFound(format!(
                "{resource_type} '{name}' not found in boundary '{boundary}'"
            )),
        );
    };
    let here = resource_path(&boundary, ty, &name);
    let title = format!("{} {} '{name}'", ctx.t("Delete"), type_name(&ctx, ty));
    let workload = palisade_app::workloads::kind_of(ty).is_some();
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (boundary) } { (boundary) } " / "
            a href=(here) { (name) } " / " (ctx.t("Delete"))
        }
        h1 { (title) }
        (alert("warning", html! {
            @if workload {
                p id="consequence" { (ctx.t("Deleting it removes its Deployment, its pods and its build Jobs from the cluster: what runs stops. This cannot be undone.")) }
            } @else {
                p id="consequence" { (ctx.t("Deleting it removes the resource from the boundary. This cannot be undone.")) }
            }
        }))
        form method="post" action={ (here) "/delete" } {
            (csrf_field(&session))
            input type="hidden" name="etag" value=(view.etag);
            div class="buttons" {
                button type="submit" class="danger" { (ctx.t("Delete it")) }
                a class="button" href=(here) { (ctx.t("Cancel")) }
            }
        }
    };
    html_response(StatusCode::OK, page(&ctx, Some(&session), &title, body))
}

pub async fn submit(
    State(state): State<App>,
    Path((boundary, resource_type, name)): Path<(String, String, String)>,
    SignedForm { ctx, session, data }: SignedForm,
) -> Response {
    let result = async {
        let access = state.open(&session.caller, &boundary).await?;
        let if_match = data.if_match();
        state
            .delete_resource(&access, &resource_type, &name, if_match)
            .await
    }
    .await;
    match result {
        Ok(()) => flash::redirect(
            &state,
            &ctx,
            &format!("/boundaries/{boundary}"),
            Notice::ResourceDeleted {
                resource_type,
                name,
            },
            &[],
        ),
        Err(e) => error_response(&ctx, Some(&session), &e),
    }
}
