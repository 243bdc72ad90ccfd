//! The boundaries list and a boundary's page: its clusters with their admission status, its
//! policies (mode, scope, rules, the scope's clusters), its resources and its grandfathered
//! resources with the policies that now disallow them.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use maud::{html, Markup};
use palisade_api_types::view::{ClusterStatus, InstallStatus, Tone, WorkloadStatus};
use palisade_api_types::PolicySpec;
use palisade_app::overview::{ClusterAdmission, ClusterRow, Overview};
use palisade_app::{App, AppError, Caller};
use palisade_policy::ResourceType;

use super::{query_param, require_session, ALL};
use crate::flash::Notice;
use crate::i18n::Lang;
use crate::layout::{
    alert, column_heads, error_response, html_response, page, unavailable_notice, Ctx,
};
use crate::session::Session;

pub async fn list(State(state): State<App>, headers: HeaderMap, uri: Uri) -> Response {
    crate::pages::manage::get_page(&state, &headers, &uri, async |ctx, session, said| {
        list_page(&state, ctx, session, said).await
    })
    .await
}

/// The boundaries the caller can see, and for an admin the form that creates one, with what
/// a POST that came back here did or why it was refused.
pub(crate) async fn list_page(
    state: &App,
    ctx: &Ctx,
    session: &Session,
    said: &crate::pages::manage::Said,
) -> Result<Markup, AppError> {
    let boundaries = state.boundaries(&session.caller).await?;
    let title = ctx.t("Boundaries");
    let body = html! {
        h1 { (title) }
        (said.render(ctx))
        @if boundaries.is_empty() {
            p { (ctx.t("No boundaries yet.")) }
        } @else {
            table {
                caption class="visually-hidden" { (title) }
                (column_heads(&[ctx.t("Name"), ctx.t("Display name")]))
                tbody {
                    @for b in &boundaries {
                        tr {
                            td { a href={ "/boundaries/" (b.name) } { (b.name) } }
                            td { (b.display_name.as_deref().unwrap_or("")) }
                        }
                    }
                }
            }
        }
        (crate::pages::manage::boundaries::create_form(ctx, session))
    };
    Ok(page(ctx, Some(session), title, body))
}

/// Everything the boundary page shows: the application's overview, read once, and what the
/// page adds; rendering does no I/O.
#[derive(Debug)]
pub struct BoundaryPage {
    pub overview: Overview,
    pub csrf: String,
    /// A notice to show at the top (e.g. after a deletion).
    pub notice: Option<String>,
    /// The API's warnings of the write that redirected here.
    pub warnings: Vec<String>,
    /// The boundary's namespaces, by cluster and name.
    pub namespaces: Vec<palisade_api_types::view::NamespaceView>,
}

impl std::ops::Deref for BoundaryPage {
    type Target = Overview;

    fn deref(&self) -> &Overview {
        &self.overview
    }
}

/// Reads the boundary page's data as `caller` sees it.
pub async fn load_boundary_page(
    state: &App,
    caller: &Caller,
    boundary: &str,
    after: Option<String>,
) -> Result<BoundaryPage, AppError> {
    let access = state.open(caller, boundary).await?;
    Ok(BoundaryPage {
        overview: state.overview(&access, after).await?,
        namespaces: state.list_namespaces(&access, &ALL).await?.items,
        csrf: String::new(),
        notice: None,
        warnings: Vec::new(),
    })
}

pub async fn show(
    State(state): State<App>,
    Path(boundary): Path<String>,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let ctx = Ctx::new(&headers, &uri);
    let session = match require_session(&state, &headers, &ctx).await {
        Ok(session) => session,
        Err(response) => return response,
    };
    let after = query_param(uri.query(), "after");
    match load_boundary_page(&state, &session.caller, &boundary, after).await {
        Ok(mut data) => {
            data.csrf = session.csrf.clone();
            data.notice = query_param(uri.query(), "deleted")
                .map(|p| format!("{} '{p}'", ctx.t("Deleted policy")));
            // What an exception's save or approval that redirected here did, shown once.
            let flash = crate::flash::for_page(&state, &headers, uri.path());
            if let Some(flash) = &flash {
                data.notice = match &flash.notice {
                    Notice::ExceptionSaved { name, status } if status == "requested" => {
                        Some(format!(
                        "{} '{name}' {}",
                        ctx.t("Requested exception"),
                        ctx.t("(it lets nothing past until an admin or boundary-admin approves it)")
                    ))
                    }
                    Notice::Done { text, .. } => Some(text.clone()),
                    Notice::ResourceDeleted {
                        resource_type,
                        name,
                    } => Some(format!("{} {resource_type} '{name}'", ctx.t("Deleted"))),
                    Notice::ExceptionSaved { name, .. } => Some(format!(
                        "{} '{name}' {}",
                        ctx.t("Saved exception"),
                        ctx.t("(active)")
                    )),
                    Notice::ExceptionApproved { name, until } => Some(format!(
                        "{} '{name}': {} {until}",
                        ctx.t("Approved exception"),
                        ctx.t("active until")
                    )),
                    _ => data.notice.take(),
                };
                data.warnings = flash.warnings.clone();
            }
            let mut response = html_response(StatusCode::OK, render(&ctx, &session, &data));
            if flash.is_some() {
                crate::flash::shown(&ctx, &mut response);
            }
            response
        }
        Err(error) => error_response(&ctx, Some(&session), &error),
    }
}

/// Renders the boundary page (for benchmarks and tests; the handler uses the same code).
pub fn render_boundary_page(data: &BoundaryPage, lang: Lang) -> String {
    let ctx = Ctx {
        lang,
        secure: false,
        here: format!("/boundaries/{}", data.name),
    };
    let session = Session {
        caller: data.caller.clone(),
        csrf: data.csrf.clone(),
    };
    render(&ctx, &session, data).into_string()
}

fn render(ctx: &Ctx, session: &Session, data: &BoundaryPage) -> Markup {
    let can_edit = session.caller.require_boundary_admin().is_ok();
    let title = format!("{} {}", ctx.t("Boundary"), data.name);
    let b = &data.name;
    let body = html! {
        p class="crumbs" { a href="/" { (ctx.t("Boundaries")) } " / " (b) }
        h1 {
            (ctx.t("Boundary")) " " code { (b) }
            @if let Some(display) = &data.display_name { " " span class="muted" { "(" (display) ")" } }
        }
        @if let Some(notice) = &data.notice { (alert("success", html! {
            p { (notice) }
            // In the page's language: every notice that lands here says its warnings so.
            @for warning in &data.warnings { p { (warning) } }
        })) }
        nav class="actions" aria-label=(ctx.t("Actions")) {
            a class="button" href={ "/boundaries/" (b) "/resources/new" } { (ctx.t("Create a resource")) }
            a class="button" href={ "/boundaries/" (b) "/uploads/new?type=function" } { (ctx.t("Function from uploaded code")) }
            a class="button" href={ "/boundaries/" (b) "/uploads/new?type=static_web_app" } { (ctx.t("Static web app from uploaded code")) }
            @if can_edit {
                a class="button" href={ "/boundaries/" (b) "/policies/new" } { (ctx.t("New policy")) }
            }
            a class="button" href={ "/boundaries/" (b) "/exceptions/new" } { (ctx.t("Request an exception")) }
            @if can_edit {
                a class="button" href={ "/boundaries/" (b) "/clusters" } { (ctx.t("Clusters and namespaces")) }
            }
        }
        (ending_soon(ctx, data))
        @if let Some(clusters) = &data.clusters {
            (clusters_section(ctx, clusters, &data.namespaces))
        }
        // Followed by /static/live.js while something in it is moving (a policy pending in a
        // cluster, a workload deploying), once a second.
        div id="live" data-moving=(if moving(data) { "true" } else { "false" }) data-poll="1000" {
            (policies_section(ctx, data, can_edit))
            (resources_section(ctx, data))
            (grandfathered_section(ctx, data, can_edit))
        }
    };
    page(ctx, Some(session), &title, body)
}

/// Whether a status on the page may still change on its own: a policy with admission rules
/// not yet recorded, or pending, in a cluster in its scope; a workload deploying.
fn moving(data: &BoundaryPage) -> bool {
    let attached = data.clusters.as_ref().map_or(0, Vec::len);
    let policies = data.policies.iter().any(|p| {
        p.spec.as_ref().is_some_and(has_admission_rules)
            && (p.install.len() < attached.min(1)
                || p.install.iter().any(|s| s.status == InstallStatus::Pending))
    });
    let workloads = data
        .resources
        .iter()
        .any(|r| r.status == Some(WorkloadStatus::Deploying));
    policies || workloads
}

/// `enforced`, `not enforced: <reason>`, or not checked yet, in the page's words; a reason
/// stays as written.
pub fn admission_status(ctx: &Ctx, cluster: &ClusterRow) -> Markup {
    match &cluster.admission {
        ClusterAdmission::NotChecked => html! {
            span class="status unknown" {
                (ctx.t("not checked yet")) " — " (ctx.t("palisade has not reached this cluster yet"))
            }
        },
        ClusterAdmission::Enforced => html! { span class="status ok" { (ctx.t("enforced")) } },
        ClusterAdmission::NotEnforced(reason) => html! {
            span class="status bad" { (ctx.t("not enforced")) ": " (crate::reasons::reason(ctx, reason)) }
        },
    }
}

fn clusters_section(
    ctx: &Ctx,
    clusters: &[ClusterRow],
    namespaces: &[palisade_api_types::view::NamespaceView],
) -> Markup {
    html! {
        section aria-labelledby="clusters-heading" {
            h2 id="clusters-heading" { (ctx.t("Clusters")) }
            @if clusters.is_empty() {
                p { (ctx.t("No cluster is attached to this boundary.")) }
            } @else {
                table id="clusters" {
                    (column_heads(&[ctx.t("Cluster"), ctx.t("Kubernetes version"), ctx.t("Admission rules"), ctx.t("Namespaces")]))
                    tbody {
                        @for c in clusters {
                            tr data-cluster=(c.name) {
                                th scope="row" { (c.name) }
                                td { (c.kubernetes_version.as_deref().unwrap_or(ctx.t("unknown"))) }
                                td {
                                    (admission_status(ctx, c))
                                    @if let Some(layout) = &c.layout {
                                        br;
                                        (ctx.t("Admission layout")) ": "
                                        span lang="en" { (layout.name) " (" (layout.reason) ")" }
                                    }
                                    @if let Some(repair) = &c.last_repair {
                                        br;
                                        (ctx.t("Last repair")) ": "
                                        span lang="en" { (repair.message) } " "
                                        time datetime=(repair.at) { "(" (repair.at) ")" }
                                    }
                                    @if let Some(error) = &c.last_error {
                                        br;
                                        span class="status bad" {
                                            (ctx.t("Last attempt failed")) ": " span lang="en" { (error) }
                                        }
                                    }
                                }
                                td {
                                    @let here: Vec<&str> = namespaces.iter().filter(|n| n.cluster == c.name).map(|n| n.name.as_str()).collect();
                                    @if here.is_empty() { span class="muted" { "–" } }
                                    @for (i, name) in here.iter().enumerate() {
                                        @if i > 0 { ", " }
                                        code { (name) }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

fn rule_lines(ctx: &Ctx, spec: &PolicySpec) -> Markup {
    html! {
        ul class="rules" {
            @for rule in &spec.rules {
                li {
                    @if let Some(plans) = &rule.allowed_compute_plans {
                        (ctx.t("Allowed compute plans")) ": " code { (plans.plans.join(", ")) }
                    }
                    @if let Some(labels) = &rule.required_labels {
                        (ctx.t("Required labels")) ": "
                        code { (labels.labels.iter().map(|l| match &l.value {
                            Some(v) if !v.is_empty() => format!("{}={v}", l.key),
                            _ => l.key.clone(),
                        }).collect::<Vec<_>>().join(", ")) }
                    }
                    @if let Some(registries) = &rule.allowed_registries {
                        (ctx.t("Allowed registries")) ": " code { (registries.registries.join(", ")) }
                    }
                    @if rule.disallow_latest_tag.is_some() {
                        (ctx.t("Disallow the latest tag"))
                    }
                }
            }
        }
    }
}

fn has_admission_rules(spec: &PolicySpec) -> bool {
    spec.rules.iter().any(|r| r.allowed_compute_plans.is_none())
}

fn policies_section(ctx: &Ctx, data: &BoundaryPage, can_edit: bool) -> Markup {
    let b = &data.name;
    html! {
        section aria-labelledby="policies-heading" {
            h2 id="policies-heading" { (ctx.t("Policies")) }
            @if data.policies.is_empty() {
                p { (ctx.t("No policies yet.")) }
            }
            @for policy in &data.policies {
                article class="card policy" id={ "policy-" (policy.name) } {
                    h3 {
                        code { (policy.name) }
                        @if can_edit {
                            " "
                            a class="small" href={ "/boundaries/" (b) "/policies/" (policy.name) "/edit" } { (ctx.t("Edit")) }
                            " "
                            a class="small" href={ "/boundaries/" (b) "/policies/" (policy.name) "/delete" } { (ctx.t("Delete")) }
                        }
                    }
                    @match &policy.spec {
                        None => p { (ctx.t("This stored policy cannot be decoded.")) },
                        Some(spec) => {
                            dl class="facts" {
                                dt { (ctx.t("Mode")) }
                                dd { @match spec.mode { Some(palisade_api_types::document::ModeDoc::Audit) => "audit", _ => "enforce" } }
                                dt { (ctx.t("Scope")) }
                                dd { @match &spec.scope {
                                    None => (ctx.t("every cluster attached to the boundary")),
                                    Some(scope) => (scope.clusters.join(", ")),
                                } }
                            }
                            (rule_lines(ctx, spec))
                            @if let Some(rollout) = &policy.rollout {
                                (crate::pages::rollout::section(ctx, b, &policy.name, rollout, spec.rollout.as_ref(), &data.csrf, can_edit))
                            }
                            (policy_exceptions(ctx, data, &policy.name, can_edit))
                            @if has_admission_rules(spec) {
                                (scope_clusters(ctx, data, spec, &policy.install))
                            } @else {
                                p class="muted" { (ctx.t("Compute plans are enforced by palisade's API: nothing is installed in clusters.")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// How long until `expires_at` (RFC 3339): days, hours or minutes; `None` once it has passed.
fn time_left(expires_at: &str) -> Option<String> {
    let end = chrono::DateTime::parse_from_rfc3339(expires_at).ok()?;
    let left = end.with_timezone(&chrono::Utc) - chrono::Utc::now();
    if left <= chrono::Duration::zero() {
        None
    } else if left.num_days() >= 1 {
        Some(format!("{} d", left.num_days()))
    } else if left.num_hours() >= 1 {
        Some(format!("{} h", left.num_hours()))
    } else {
        Some(format!("{} min", left.num_minutes().max(1)))
    }
}

/// The active exceptions that end within 7 days, with their time left (SPEC 7).
fn ending_soon(ctx: &Ctx, data: &BoundaryPage) -> Markup {
    let week = chrono::Utc::now() + chrono::Duration::days(7);
    let soon: Vec<_> = data
        .exceptions
        .iter()
        .filter(|x| x.status == "active")
        .filter(|x| {
            chrono::DateTime::parse_from_rfc3339(&x.expires_at)
                .is_ok_and(|end| end.with_timezone(&chrono::Utc) <= week)
        })
        .collect();
    html! {
        @if !soon.is_empty() {
            section aria-labelledby="ending-heading" {
                h2 id="ending-heading" { (ctx.t("Exceptions ending within 7 days")) }
                ul {
                    @for x in soon {
                        li {
                            code { (x.name) } " (" (x.spec["policy"].as_str().unwrap_or("")) "): "
                            (x.expires_at)
                            @if let Some(left) = time_left(&x.expires_at) { " — " (left) }
                        }
                    }
                }
            }
        }
    }
}

/// A policy's exceptions: name, status, end and time left, and for an admin or boundary-admin
/// the approval of a request, beside the whole spec it approves; the form carries the etag of
/// the spec shown, so a request changed since is refused (412), never approved unseen.
fn policy_exceptions(ctx: &Ctx, data: &BoundaryPage, policy: &str, can_approve: bool) -> Markup {
    let of_policy: Vec<_> = data
        .exceptions
        .iter()
        .filter(|x| x.spec["policy"].as_str() == Some(policy))
        .collect();
    html! {
        @if !of_policy.is_empty() {
            h4 { (ctx.t("Exceptions")) }
            ul class="exceptions" {
                @for x in of_policy {
                    li {
                        code { (x.name) } ": " (x.status) ", " (ctx.t("until")) " " (x.expires_at)
                        @if let Some(left) = time_left(&x.expires_at) { " (" (left) ")" }
                        " — " (x.spec["reason"].as_str().unwrap_or(""))
                        @if can_approve && x.status == "requested" {
                            p { (ctx.t("Approving approves exactly this spec:")) }
                            pre class="spec" lang="en" { (spec_yaml(&x.spec)) }
                            form class="inline" method="post" action={ "/boundaries/" (data.name) "/exceptions/" (x.name) "/approve" } {
                                input type="hidden" name=(crate::session::CSRF_FIELD) value=(data.csrf);
                                input type="hidden" name="etag" value=(x.etag);
                                " "
                                button type="submit" class="small" aria-label={ (ctx.t("Approve")) " " (x.name) } { (ctx.t("Approve")) }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// An exception's spec as YAML, as the API keeps it (every field, in the document's order).
fn spec_yaml(spec: &serde_json::Value) -> String {
    serde_yaml_ng::to_string(spec).unwrap_or_else(|_| spec.to_string())
}

/// A policy's install status in one cluster (`enforced`, `pending`, `error: ...`) in the
/// page's words, marked by kind in text and class; a reason after the words stays as written.
fn install_status(ctx: &Ctx, status: &InstallStatus) -> Markup {
    let class = match status {
        InstallStatus::Enforced | InstallStatus::AuditActive => "status ok",
        InstallStatus::Installed | InstallStatus::Pending => "status unknown",
        InstallStatus::Error(_) | InstallStatus::NotEnforced(_) => "status bad",
    };
    let (words, reason) = match status {
        InstallStatus::Pending => (ctx.t("pending"), None),
        InstallStatus::Installed => (ctx.t("installed"), None),
        InstallStatus::Enforced => (ctx.t("enforced"), None),
        InstallStatus::AuditActive => (ctx.t("active (audit)"), None),
        InstallStatus::Error(reason) => (ctx.t("error"), Some(reason)),
        InstallStatus::NotEnforced(reason) => (ctx.t("not enforced"), Some(reason)),
    };
    html! {
        span class=(class) {
            (words) @if let Some(reason) = reason { ": " (crate::reasons::reason(ctx, reason)) }
        }
    }
}

fn scope_clusters(
    ctx: &Ctx,
    data: &BoundaryPage,
    spec: &PolicySpec,
    install: &[ClusterStatus],
) -> Markup {
    let Some(clusters) = &data.clusters else {
        return html! {};
    };
    let in_scope: Vec<&ClusterRow> = match &spec.scope {
        None => clusters.iter().collect(),
        Some(scope) => clusters
            .iter()
            .filter(|c| scope.clusters.contains(&c.name))
            .collect(),
    };
    let missing: Vec<&String> = match &spec.scope {
        None => Vec::new(),
        Some(scope) => scope
            .clusters
            .iter()
            .filter(|name| !clusters.iter().any(|c| &c.name == *name))
            .collect(),
    };
    html! {
        div class="scope-clusters" {
            h4 { (ctx.t("Clusters in scope")) }
            @if in_scope.is_empty() && missing.is_empty() {
                p { (ctx.t("No cluster is attached to this boundary.")) }
            } @else {
                ul {
                    @for c in &in_scope {
                        @let status = install
                            .iter()
                            .find(|s| s.cluster == c.name)
                            .map_or(InstallStatus::Pending, |s| s.status.clone());
                        li data-install=(c.name) {
                            strong { (c.name) } ": "
                            (install_status(ctx, &status))
                            @if let Some(in_force) = install.iter().find(|s| s.cluster == c.name).and_then(|s| s.in_force.as_deref()) {
                                " " span lang="en" { (in_force) }
                            }
                            @if matches!(c.admission, ClusterAdmission::NotEnforced(_)) && !c.says_own_reason(&status) {
                                " — " (admission_status(ctx, c))
                            }
                        }
                    }
                    @for name in &missing {
                        li { strong { (name) } ": " (ctx.t("not attached to this boundary")) }
                    }
                }
            }
            p class="muted" { (ctx.t("enforced: a violating object was denied in a namespace of the boundary; installed: no namespace to confirm it in yet; pending: not yet applied.")) }
        }
    }
}

fn resources_section(ctx: &Ctx, data: &BoundaryPage) -> Markup {
    // Only admins and boundary-admins see the clusters; for them, say plainly when the
    // boundary has none, instead of a failure on every workload.
    let no_cluster = data.clusters.as_ref().is_some_and(Vec::is_empty);
    let unplaced = data
        .resources
        .iter()
        .any(|r| r.status.as_ref().is_some_and(waits_for_placement));
    html! {
        section aria-labelledby="resources-heading" {
            h2 id="resources-heading" { (ctx.t("Resources")) }
            @if no_cluster && unplaced {
                p class="notice" id="no-cluster" {
                    (ctx.t("No cluster is attached to this boundary, so its workloads are not deployed anywhere yet; nothing has failed. An admin attaches a cluster on the boundary's Clusters and namespaces page."))
                }
            }
            @if data.resources.is_empty() {
                p { (ctx.t("No resources yet.")) }
            } @else {
                table id="resources" {
                    (column_heads(&[ctx.t("Type"), ctx.t("Name"), ctx.t("Plan"), ctx.t("Status")]))
                    tbody {
                        @for r in &data.resources {
                            tr data-resource={ (r.resource_type) "/" (r.name) } {
                                td { @match ResourceType::parse(&r.resource_type) {
                                    Ok(ty) => (crate::pages::resource_form::type_name(ctx, ty)),
                                    Err(_) => code { (r.resource_type) },
                                } }
                                td { a href={ "/boundaries/" (data.name) "/resources/" (r.resource_type) "/" (r.name) } { (r.name) } }
                                td { (r.plans) }
                                td class="resource-status" {
                                    @if no_cluster && r.status.as_ref().is_some_and(waits_for_placement) {
                                        span class="status unknown" {
                                            (ctx.t("not deployed")) ": " (ctx.t("no cluster is attached to this boundary"))
                                        }
                                    } @else {
                                        (workload_status(ctx, r.status.as_ref()))
                                    }
                                    @if !no_cluster && matches!(r.status, Some(WorkloadStatus::NotDeployed(_))) {
                                        " "
                                        a class="small" href={ "/boundaries/" (data.name) "/resources/" (r.resource_type) "/" (r.name) "/edit#cluster" } { (ctx.t("Place it")) }
                                    }
                                }
                            }
                        }
                    }
                }
                @if let Some(next) = &data.next_page {
                    p { a href={ "/boundaries/" (data.name) "?after=" (form_urlencoded::byte_serialize(next.as_bytes()).collect::<String>()) } { (ctx.t("Next page")) } }
                }
            }
            p {
                (ctx.t("Create:")) " "
                @for (i, ty) in ResourceType::ALL.iter().enumerate() {
                    @if i > 0 { ", " }
                    a href={ "/boundaries/" (data.name) "/resources/new?type=" (ty.as_str()) } { (ty.as_str()) }
                }
            }
        }
    }
}

/// Whether a workload is only waiting to be placed: nothing was sent because no cluster and
/// namespace were given and the boundary has no single one to run it in. Nothing failed.
fn waits_for_placement(status: &WorkloadStatus) -> bool {
    matches!(status, WorkloadStatus::NotDeployed(reason)
        if palisade_policy::reason::parse_no_placement(reason).is_some())
}

/// A workload's status: green when running, amber when degraded, red when denied or failed,
/// grey while it deploys or waits to be placed; none is a dash. palisade's own words are in
/// the page's language; the message after them stays as Kubernetes (or palisade) wrote it.
pub(crate) fn workload_status(ctx: &Ctx, status: Option<&WorkloadStatus>) -> Markup {
    let Some(status) = status else {
        return html! { span class="muted" { "–" } };
    };
    let class = match status.tone() {
        _ if waits_for_placement(status) => "status unknown",
        Tone::Ok => "status ok",
        Tone::Moving => "status unknown",
        Tone::Degraded => "status warn",
        Tone::Failed => "status bad",
    };
    let (words, message) = match status {
        WorkloadStatus::Deploying => (ctx.t("deploying"), None),
        WorkloadStatus::Running => (ctx.t("running"), None),
        WorkloadStatus::Rejected(message) => (ctx.t("rejected"), Some(message)),
        WorkloadStatus::BuildRejected(message) => (ctx.t("build rejected"), Some(message)),
        WorkloadStatus::BuildFailed(reason) => (ctx.t("build failed"), Some(reason)),
        WorkloadStatus::NotDeployed(reason) => {
            return html! {
                span class=(class) {
                    (ctx.t("not deployed")) ": " (crate::reasons::reason(ctx, reason))
                }
            };
        }
        WorkloadStatus::Degraded {
            available,
            desired,
            message,
        } => {
            return html! {
                span class=(class) {
                    (ctx.t("degraded")) ": " (available) "/" (desired) " "
                    (ctx.t("replicas; pods rejected")) ": "
                    span lang="en" { (message) }
                }
            };
        }
    };
    html! {
        span class=(class) {
            (words)
            @if let Some(message) = message {
                ": " span lang="en" { (message) }
            }
        }
    }
}

fn grandfathered_section(ctx: &Ctx, data: &BoundaryPage, can_edit: bool) -> Markup {
    html! {
        section aria-labelledby="grandfathered-heading" {
            h2 id="grandfathered-heading" { (ctx.t("Grandfathered resources")) }
            p class="muted" { (ctx.t("These resources keep a plan that a policy now disallows. They keep running and can be changed in other ways; moving them to another plan is checked.")) }
            @match &data.grandfathered {
                Err(error) => (unavailable_notice(ctx, error)),
                Ok(list) if list.is_empty() => p { (ctx.t("None.")) },
                Ok(list) => table id="grandfathered" {
                    (column_heads(&[ctx.t("Type"), ctx.t("Name"), ctx.t("Plan"), ctx.t("Now disallowed by")]))
                    tbody {
                        @for (r, denied) in list {
                            tr {
                                td { code { (r.resource_type) } }
                                td { a href={ "/boundaries/" (data.name) "/resources/" (r.resource_type) "/" (r.name) "/edit" } { (r.name) } }
                                td { (r.plans) }
                                td {
                                    @for (i, p) in denied.iter().enumerate() {
                                        @if i > 0 { ", " }
                                        @if can_edit {
                                            a href={ "/boundaries/" (data.name) "/policies/" (p) "/edit" } { (p) }
                                        } @else {
                                            (p)
                                        }
                                    }
                                }
                            }
                        }
                    }
                },
            }
        }
    }
}
