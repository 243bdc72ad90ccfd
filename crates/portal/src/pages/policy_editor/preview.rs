//! The editor's preview (what the policy as typed would deny among what the boundary already
//! runs, before it is saved), the confirmation a save asks for when it newly denies objects
//! (ones the saved version does not deny already), and the policy's last audit. Data from the application's `preview_policy` and `policy_report`.

use maud::{html, Markup};
use palisade_api_types::view::{Finding, PolicyReport, Preview};

use crate::layout::{alert, column_heads, Ctx};

fn findings_table(ctx: &Ctx, id: &str, rows: &[(&str, &Finding)]) -> Markup {
    html! {
        table id=(id) {
            (column_heads(&[ctx.t("Cluster"), ctx.t("Namespace"), ctx.t("Object"), ctx.t("Workload"), ctx.t("Replicas"), ctx.t("Message")]))
            tbody {
                @for (cluster, f) in rows {
                    tr {
                        td { (cluster) }
                        td { (f.namespace) }
                        td { (f.kind) "/" (f.name) }
                        td { (f.workload.kind) "/" (f.workload.name) }
                        td { (f.workload.replicas) }
                        td lang="en" { (f.message) }
                    }
                }
            }
        }
    }
}

/// The preview's summary and lists.
pub(super) fn render_preview(ctx: &Ctx, preview: &Preview) -> Markup {
    let s = &preview.summary;
    let denied: Vec<(&str, &Finding)> = preview
        .clusters
        .iter()
        .flat_map(|c| {
            c.denied
                .iter()
                .map(move |d| (c.cluster.as_str(), &d.finding))
        })
        .collect();
    let warned: Vec<(&str, &Finding)> = preview
        .clusters
        .iter()
        .flat_map(|c| c.warned.iter().map(move |f| (c.cluster.as_str(), f)))
        .collect();
    let loosened: Vec<(&str, &Finding)> = preview
        .clusters
        .iter()
        .flat_map(|c| c.loosened.iter().map(move |f| (c.cluster.as_str(), f)))
        .collect();
    html! {
        section class="card" id="preview" aria-labelledby="preview-heading" {
            h2 id="preview-heading" { (ctx.t("Preview")) }
            p id="preview-summary" {
                (ctx.t("Would deny")) " " strong { (s.objects) } " " (ctx.t("objects of")) " "
                strong { (s.workloads) } " " (ctx.t("workloads")) ", "
                strong { (s.replicas_at_risk) } " " (ctx.t("replicas at risk")) "; "
                (s.new_objects) " " (ctx.t("of them newly denied")) ", "
                (s.warned) " " (ctx.t("warned")) ", "
                (s.loosened) " " (ctx.t("allowed that the saved version denies")) ", "
                (s.resources_grandfathered) " " (ctx.t("resources whose plan it disallows")) "."
            }
            @if preview.clusters.is_empty() {
                p class="hint" { (ctx.t("No attached cluster is in the policy's scope, or it has no admission rules.")) }
            }
            @for cluster in &preview.clusters {
                @if let Some(error) = &cluster.error {
                    (alert("error", html! {
                        p { (ctx.t("Cluster")) " " strong { (cluster.cluster) } " " (ctx.t("could not be read:")) " " span lang="en" { (error) } }
                    }))
                } @else {
                    p class="hint" {
                        (ctx.t("Cluster")) " " strong { (cluster.cluster) } ": "
                        (cluster.checked) " " (ctx.t("objects checked in")) " " (cluster.namespaces.len()) " " (ctx.t("namespaces"))
                    }
                }
            }
            @if !denied.is_empty() {
                h3 { (ctx.t("Would be denied")) }
                (findings_table(ctx, "preview-denied", &denied))
            }
            @if !warned.is_empty() {
                h3 { (ctx.t("Would be warned about (audit mode)")) }
                (findings_table(ctx, "preview-warned", &warned))
            }
            @if !loosened.is_empty() {
                h3 { (ctx.t("Denied by the saved version, allowed by this one")) }
                (findings_table(ctx, "preview-loosened", &loosened))
            }
            @if !preview.grandfathered.is_empty() {
                h3 { (ctx.t("Resources whose plan it disallows (they keep running)")) }
                ul id="preview-grandfathered" {
                    @for r in &preview.grandfathered {
                        li { (r.resource_type) "/" (r.name) " (" (r.plans.join(", ")) "): " span lang="en" { (r.message) } }
                    }
                }
            }
            // The API pages the findings: this is the first page.
            @if preview.continue_token.is_some() {
                p class="hint" id="preview-more" {
                    (ctx.t("Only the first findings are listed here; the counts above include them all. The CLI lists every one:"))
                    " " code { "palisade preview -f FILE" }
                }
            }
        }
    }
}

/// Whether a save must be confirmed: its version newly denies objects (ones the saved
/// version does not deny already).
pub(super) fn must_confirm(preview: &Preview) -> bool {
    preview.summary.new_objects > 0
}

/// How many newly denied objects the notice names; the preview below lists them all.
const NAMED: usize = 20;

/// The notice a save gets when its preview finds objects it newly denies, naming them.
pub(super) fn render_confirmation(ctx: &Ctx, preview: &Preview) -> Markup {
    let s = &preview.summary;
    let new: Vec<(&str, &Finding)> = preview
        .clusters
        .iter()
        .flat_map(|c| {
            c.denied
                .iter()
                .filter(|d| d.new)
                .map(move |d| (c.cluster.as_str(), &d.finding))
        })
        .collect();
    let more = new.len().saturating_sub(NAMED);
    alert(
        "warning",
        html! {
            p id="confirm-notice" {
                (ctx.t("Not saved yet: this policy would newly deny")) " " (s.new_objects) " "
                (ctx.t("objects of")) " " (s.new_workloads) " " (ctx.t("workloads")) ", "
                strong { (s.new_replicas_at_risk) " " (ctx.t("replicas at risk")) } ". "
                (ctx.t("Their running pods stay, but new ones (a rollout, a scale-up, a restart elsewhere) are denied. Review the preview, then save anyway or change the policy."))
            }
            ul id="confirm-objects" {
                @for (cluster, f) in new.iter().take(NAMED) {
                    li { (f.namespace) "/" (f.kind) "/" (f.name) " (" (ctx.t("cluster")) " " (cluster) ")" }
                }
            }
            @if more > 0 {
                p { (ctx.t("and")) " " (more) " " (ctx.t("more, listed in the preview below.")) }
            }
        },
    )
}

/// The label of the button that saves despite the preview.
pub(super) fn confirm_label(ctx: &Ctx, preview: &Preview) -> String {
    format!(
        "{} ({} {})",
        ctx.t("Save anyway"),
        preview.summary.new_replicas_at_risk,
        ctx.t("replicas at risk")
    )
}

/// The policy's last audit: a row per cluster, then the objects.
pub(super) fn render_report(ctx: &Ctx, report: &PolicyReport) -> Markup {
    let rows: Vec<(&str, &Finding)> = report
        .clusters
        .iter()
        .flat_map(|c| c.findings.iter().map(move |f| (c.cluster.as_str(), f)))
        .collect();
    html! {
        section class="card" id="audit" aria-labelledby="audit-heading" {
            h2 id="audit-heading" { (ctx.t("Last audit")) }
            p class="hint" { (ctx.t("What the policy's rules find among the objects already stored in the boundary's namespaces, after every change and every 10 minutes.")) }
            @if report.clusters.is_empty() {
                p { (ctx.t("No attached cluster is in the policy's scope, or it has no admission rules.")) }
            } @else {
                table id="audit-clusters" {
                    (column_heads(&[ctx.t("Cluster"), ctx.t("Checked"), ctx.t("Violations"), ctx.t("Taken")]))
                    tbody {
                        @for c in &report.clusters {
                            tr {
                                td { (c.cluster) }
                                td { (c.checked) }
                                td { (c.violations) }
                                td {
                                    @match (&c.error, &c.taken_at) {
                                        (Some(error), _) => { span lang="en" { "error: " (error) } }
                                        (None, None) => { (ctx.t("not audited yet")) }
                                        (None, Some(at)) => {
                                            time datetime=(at) { (at) }
                                            @if !c.current { " " (ctx.t("(an audit of the new version is under way)")) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if !rows.is_empty() {
                    (findings_table(ctx, "audit-findings", &rows))
                }
            }
        }
    }
}
