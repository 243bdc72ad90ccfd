//! The clusters page (admin): every registered cluster with its Kubernetes version, whether it
//! enforces admission rules, the layout in use, the replica that reconciles it and its last
//! error; and the form that registers one from a kubeconfig (`PUT /v1/clusters/{c}`'s rules:
//! one cluster, user and context, an https server, inline credentials; stored encrypted).

use axum::extract::State;
use axum::http::{HeaderMap, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_app::{App, AppError};

use super::{done, get_page, post_page, Said};
use crate::layout::{column_heads, csrf_field, page, Ctx};
use crate::pages::{SignedForm, ALL};
use crate::session::Session;

pub async fn show(State(state): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    get_page(&state, &headers, &uri, async |ctx, session, said| {
        clusters_page(&state, ctx, session, said, "", "").await
    })
    .await
}

pub async fn add(State(state): State<App>, form: SignedForm) -> Response {
    let name = form.data.get("name").trim().to_owned();
    post_page(
        &form,
        async |ctx, session| {
            let kubeconfig = form.data.get("kubeconfig");
            let (_, created) = state
                .put_cluster(&session.caller, &name, kubeconfig, None)
                .await?;
            let verb = if created {
                ctx.t("Registered cluster")
            } else {
                ctx.t("Replaced the credentials of cluster")
            };
            Ok(done(&state, ctx, "/clusters", format!("{verb} {name}")))
        },
        // The form keeps what was typed, except the kubeconfig's secrets.
        async |ctx, session, said| clusters_page(&state, ctx, session, said, &name, "").await,
    )
    .await
}

async fn clusters_page(
    state: &App,
    ctx: &Ctx,
    session: &Session,
    said: &Said,
    name: &str,
    kubeconfig: &str,
) -> Result<Markup, AppError> {
    let clusters = state.list_clusters(&session.caller, &ALL).await?;
    let title = ctx.t("Clusters");
    let body = html! {
        p class="crumbs" { a href="/" { (ctx.t("Boundaries")) } " / " (title) }
        h1 { (title) }
        (said.render(ctx))
        @if clusters.items.is_empty() {
            p id="no-clusters" { (ctx.t("No cluster is registered yet.")) }
        } @else {
            table id="cluster-list" {
                caption class="visually-hidden" { (title) }
                (column_heads(&[ctx.t("Cluster"), ctx.t("Kubernetes version"), ctx.t("Admission rules"), ctx.t("Admission layout"), ctx.t("Reconciled by"), ctx.t("Last error")]))
                tbody {
                    @for c in &clusters.items {
                        tr data-cluster=(c.name) {
                            th scope="row" { (c.name) }
                            td { (c.kubernetes_version.as_deref().unwrap_or(ctx.t("unknown"))) }
                            td {
                                @if c.admission.enforced { span class="status ok" { (ctx.t("enforced")) } }
                                @else if let Some(reason) = &c.admission.reason { span class="status bad" { (ctx.t("not enforced")) ": " (crate::reasons::reason(ctx, reason)) } }
                                @else { span class="status unknown" { (ctx.t("not checked yet")) } }
                            }
                            td lang="en" { @if let Some(layout) = &c.layout { (layout.name) " (" (layout.reason) ")" } @else { "–" } }
                            td { @if let Some(replica) = &c.reconciled_by { code { (replica) } } @else { (ctx.t("no replica now")) } }
                            td lang="en" { (c.last_error.as_deref().unwrap_or("–")) }
                        }
                    }
                }
            }
        }
        section aria-labelledby="add-cluster-heading" {
            h2 id="add-cluster-heading" { (ctx.t("Register a cluster")) }
            p class="help" { (ctx.t("A kubeconfig with exactly one cluster, user and context, an https server, and inline credentials (certificate-authority-data; client-certificate-data and client-key-data, or a token). It is stored encrypted and never shown again. palisade needs the RBAC that this command prints:")) " " code { "palisade cluster rbac" } }
            form method="post" action="/clusters" id="cluster-form" {
                (csrf_field(session))
                div class="field" {
                    label for="cluster-name" { (ctx.t("Name")) }
                    input id="cluster-name" name="name" required value=(name);
                }
                div class="field" {
                    label for="cluster-kubeconfig" { (ctx.t("Kubeconfig (YAML)")) }
                    textarea id="cluster-kubeconfig" name="kubeconfig" rows="12" required spellcheck="false" { (kubeconfig) }
                }
                div class="buttons" { button type="submit" class="primary" { (ctx.t("Register the cluster")) } }
            }
        }
    };
    Ok(page(ctx, Some(session), title, body))
}
