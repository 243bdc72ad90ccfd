//! A boundary's clusters and namespaces (boundary-admin or admin): the attached clusters, each
//! with the boundary's namespaces in it and a way to release one; the form that creates or
//! adopts a namespace; and, for an admin, the form that attaches another registered cluster.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_app::caller::Access;
use palisade_app::{App, AppError};

use super::{done, get_page, post_page, Said};
use crate::form::FormData;
use crate::layout::{csrf_field, page, Ctx};
use crate::pages::{SignedForm, ALL};
use crate::session::Session;

fn here(boundary: &str) -> String {
    format!("/boundaries/{boundary}/clusters")
}

pub async fn show(
    State(state): State<App>,
    Path(boundary): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    get_page(&state, &headers, &uri, async |ctx, session, said| {
        placement_page(&state, ctx, session, &boundary, said).await
    })
    .await
}

/// `POST /boundaries/{b}/clusters`: attach a registered cluster (admin).
pub async fn attach(post: PlacementPost) -> Response {
    answer(post, async |ctx, state, access, data| {
        let cluster = data.get("cluster");
        state.attach_cluster(access, cluster).await?;
        Ok(format!("{} {cluster}", ctx.t("Attached cluster")))
    })
    .await
}

/// `POST /boundaries/{b}/namespaces`: create, or with `adopt` label, a namespace.
pub async fn put_namespace(post: PlacementPost) -> Response {
    answer(post, async |ctx, state, access, data| {
        let cluster = data.get("cluster");
        let name = data.get("name").trim();
        let (view, _) = state
            .put_namespace(access, cluster, name, data.has("adopt"))
            .await?;
        let verb = match view.action.as_deref() {
            Some("adopted") => ctx.t("Adopted namespace"),
            Some("unchanged") => ctx.t("Namespace already the boundary's:"),
            _ => ctx.t("Created namespace"),
        };
        Ok(format!("{verb} {name} ({} {cluster})", ctx.t("cluster")))
    })
    .await
}

/// `POST /boundaries/{b}/namespaces/release`: remove the boundary's label; the namespace and
/// what runs in it stay (refused while the boundary's workloads are placed there).
pub async fn release(post: PlacementPost) -> Response {
    answer(post, async |ctx, state, access, data| {
        let cluster = data.get("cluster");
        let name = data.get("name");
        state.release_namespace(access, cluster, name).await?;
        Ok(format!(
            "{} {name} ({} {cluster})",
            ctx.t("Released namespace"),
            ctx.t("cluster")
        ))
    })
    .await
}

/// A POST of this page: the application, the boundary (from the path) and the signed-in
/// user's form, extracted in that order.
type PlacementPost = (State<App>, Path<String>, SignedForm);

/// Opens the boundary for the caller and runs `act`: back to the page with what it says it
/// did, or the page again with the API's refusal.
async fn answer(
    (State(state), Path(boundary), form): PlacementPost,
    act: impl AsyncFnOnce(&Ctx, &App, &Access, &FormData) -> Result<String, AppError>,
) -> Response {
    post_page(
        &form,
        async |ctx, session| {
            let access = state.open(&session.caller, &boundary).await?;
            let text = act(ctx, &state, &access, &form.data).await?;
            Ok(done(&state, ctx, &here(&boundary), text))
        },
        async |ctx, session, said| placement_page(&state, ctx, session, &boundary, said).await,
    )
    .await
}

async fn placement_page(
    state: &App,
    ctx: &Ctx,
    session: &Session,
    boundary: &str,
    said: &Said,
) -> Result<Markup, AppError> {
    let access = state.open(&session.caller, boundary).await?;
    let attached = state.attached_clusters(&access, &ALL).await?;
    let namespaces = state.list_namespaces(&access, &ALL).await?;
    let is_admin = session.caller.require_admin().is_ok();
    let attachable: Vec<String> = if is_admin {
        state
            .list_clusters(&session.caller, &ALL)
            .await?
            .items
            .into_iter()
            .map(|c| c.name)
            .filter(|c| !attached.items.iter().any(|a| &a.name == c))
            .collect()
    } else {
        Vec::new()
    };
    let title = format!(
        "{} {boundary}: {}",
        ctx.t("Boundary"),
        ctx.t("clusters and namespaces")
    );
    let b = boundary;
    let body = html! {
        p class="crumbs" {
            a href="/" { (ctx.t("Boundaries")) } " / "
            a href={ "/boundaries/" (b) } { (b) } " / " (ctx.t("Clusters and namespaces"))
        }
        h1 { (title) }
        (said.render(ctx))
        @if attached.items.is_empty() {
            p id="no-attached" { (ctx.t("No cluster is attached to this boundary.")) }
        }
        @for cluster in &attached.items {
            section class="card" data-cluster=(cluster.name) aria-labelledby={ "cluster-" (cluster.name) } {
                h2 id={ "cluster-" (cluster.name) } { (ctx.t("Cluster")) " " code { (cluster.name) } }
                @let here_ns: Vec<_> = namespaces.items.iter().filter(|n| n.cluster == cluster.name).collect();
                @if here_ns.is_empty() {
                    p class="muted" { (ctx.t("No namespace of this boundary here yet.")) }
                } @else {
                    ul class="namespaces" {
                        @for ns in here_ns {
                            li {
                                code { (ns.name) } " "
                                // `gone: ...` or `reserved: ...` (SPEC 3.4 v3.2), as the API says it.
                                @if ns.status != "active" {
                                    span class="namespace-status warn" lang="en" { (ns.status) } " "
                                }
                                form method="post" action={ "/boundaries/" (b) "/namespaces/release" } class="inline" {
                                    (csrf_field(session))
                                    input type="hidden" name="cluster" value=(cluster.name);
                                    input type="hidden" name="name" value=(ns.name);
                                    button type="submit" class="small" aria-label={ (ctx.t("Release")) " " (ns.name) } { (ctx.t("Release")) }
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !attached.items.is_empty() {
            section aria-labelledby="namespace-heading" {
                h2 id="namespace-heading" { (ctx.t("Create or adopt a namespace")) }
                form method="post" action={ "/boundaries/" (b) "/namespaces" } id="namespace-form" {
                    (csrf_field(session))
                    div class="field" {
                        label for="namespace-cluster" { (ctx.t("Cluster")) }
                        select id="namespace-cluster" name="cluster" {
                            @for cluster in &attached.items { option value=(cluster.name) { (cluster.name) } }
                        }
                    }
                    div class="field" {
                        label for="namespace-name" { (ctx.t("Name")) }
                        input id="namespace-name" name="name" required;
                    }
                    // Adopting an existing namespace needs an admin (SPEC 3.4 v3.2).
                    @if is_admin {
                        div class="field" {
                            input type="checkbox" id="namespace-adopt" name="adopt" value="true";
                            " "
                            label for="namespace-adopt" { (ctx.t("Adopt it if it exists (label it for this boundary)")) }
                        }
                    }
                    div class="buttons" { button type="submit" class="primary" { (ctx.t("Create or adopt")) } }
                }
            }
        }
        @if is_admin {
            section aria-labelledby="attach-heading" {
                h2 id="attach-heading" { (ctx.t("Attach a cluster")) }
                @if attachable.is_empty() {
                    p { (ctx.t("Every registered cluster is attached.")) " " a href="/clusters" { (ctx.t("Register a cluster")) } }
                } @else {
                    form method="post" action={ "/boundaries/" (b) "/clusters" } id="attach-form" {
                        (csrf_field(session))
                        div class="field" {
                            label for="attach-cluster" { (ctx.t("Cluster")) }
                            select id="attach-cluster" name="cluster" {
                                @for name in &attachable { option value=(name) { (name) } }
                            }
                        }
                        div class="buttons" { button type="submit" class="primary" { (ctx.t("Attach")) } }
                    }
                }
            }
        }
    };
    Ok(page(ctx, Some(session), &title, body))
}
