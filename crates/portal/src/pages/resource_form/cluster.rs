//! A resource page's live part: its status and what its cluster holds for a workload (the
//! Deployment's replicas, pods, the build Job, the latest Kubernetes events, denials among
//! them), read when the page is made. While the status is moving (`deploying`, or nothing
//! recorded yet for a placed workload) the region says so, and `/static/live.js` fetches the
//! page again and swaps the region in, so the page follows the cluster without a reload; it
//! still works without JavaScript (a reload shows the same). Right after a create or update
//! (`follow`), the status shown may still be the one of the version before: the region then
//! asks to be followed for [`FOLLOW_SECS`] whatever it says.

use maud::{html, Markup};
use palisade_api_types::view::{Tone, WorkloadDetail, WorkloadStatus};
use palisade_app::AppError;
use palisade_policy::ResourceType;

use crate::layout::{alert, column_heads, Ctx};

/// How long a page reached by a create or update is followed, at least.
pub(super) const FOLLOW_SECS: u64 = 20;

/// How long a read of the region waits for the status to move before it answers anyway (the
/// pods and events may have moved meanwhile).
pub(super) const LIVE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The resource a live region is of.
pub(super) struct LiveOf<'a> {
    pub boundary: &'a str,
    pub ty: ResourceType,
    pub name: &'a str,
}

impl LiveOf<'_> {
    /// Where the region alone is read, waiting for a change (`super::live`).
    fn href(&self) -> String {
        format!(
            "/boundaries/{}/resources/{}/{}/live",
            self.boundary,
            self.ty.as_str(),
            self.name
        )
    }
}

/// Whether a status may still change on its own: `deploying`, or none recorded yet for a
/// placed workload.
pub(super) fn moving(status: Option<&WorkloadStatus>, placed: bool) -> bool {
    match status {
        Some(status) => status.tone() == Tone::Moving,
        None => placed,
    }
}

/// The live region: the status, then the cluster's part (`None`: not a workload, or not
/// placed).
pub(super) fn live_region(
    ctx: &Ctx,
    of: &LiveOf<'_>,
    status: Option<&WorkloadStatus>,
    placed: bool,
    workload: Option<&Result<WorkloadDetail, AppError>>,
    follow: bool,
) -> Markup {
    let moving = moving(status, placed);
    let follow = if follow && placed { FOLLOW_SECS } else { 0 };
    html! {
        section id="live" aria-live="polite" data-moving=(if moving { "true" } else { "false" }) data-follow=(follow)
            data-live=(of.href()) data-status=(palisade_app::live::status_text(status)) {
            dl class="facts" {
                dt { (ctx.t("Status")) }
                dd id="status" { (crate::pages::boundary::workload_status(ctx, status)) }
            }
            @match workload {
                Some(Ok(detail)) => (cluster_part(ctx, detail)),
                Some(Err(error)) => {
                    h2 { (ctx.t("In the cluster")) }
                    (alert("warning", html! {
                        p { (ctx.t("The cluster could not be read:")) " " span lang="en" { (error.to_string()) } }
                    }))
                }
                None => {}
            }
        }
    }
}

fn cluster_part(ctx: &Ctx, detail: &WorkloadDetail) -> Markup {
    html! {
        h2 { (ctx.t("In the cluster")) }
        dl id="workload" class="facts" {
            dt { (ctx.t("Placement")) }
            dd { code { (detail.cluster) } " / " code { (detail.namespace) } }
            dt { (ctx.t("Deployment")) }
            dd {
                @match &detail.deployment {
                    Some(d) => {
                        code { (d.name) } ": "
                        span id="replicas" { (d.ready) "/" (d.desired) } " " (ctx.t("ready")) " ("
                        (d.available) " " (ctx.t("available")) ", " (d.updated) " " (ctx.t("up to date")) ")"
                    }
                    None => { (ctx.t("none in the cluster")) }
                }
            }
            @if let Some(build) = &detail.build {
                dt { (ctx.t("Build")) }
                dd {
                    code { (build.name) } ": "
                    (match build.state.as_str() {
                        "running" => ctx.t("running build"),
                        "succeeded" => ctx.t("succeeded"),
                        _ => ctx.t("failed"),
                    })
                    @if let Some(message) = &build.message { " (" span lang="en" { (message) } ")" }
                }
            }
        }
        h3 { (ctx.t("Pods")) }
        @if detail.pods.is_empty() {
            p id="no-pods" class="muted" { (ctx.t("No pods.")) }
        } @else {
            table id="pods" {
                (column_heads(&[ctx.t("Name"), ctx.t("Phase"), ctx.t("Ready"), ctx.t("Restarts"), ctx.t("Node")]))
                tbody {
                    @for pod in &detail.pods {
                        tr {
                            td { code { (pod.name) } }
                            td lang="en" { (pod.phase) }
                            td { (if pod.ready { ctx.t("yes") } else { ctx.t("no") }) }
                            td { (pod.restarts) }
                            td { @if let Some(node) = &pod.node { code { (node) } } @else { "–" } }
                        }
                    }
                }
            }
        }
        h3 { (ctx.t("Recent events")) }
        @if detail.events.is_empty() {
            p id="no-events" class="muted" { (ctx.t("No events.")) }
        } @else {
            table id="events" {
                (column_heads(&[ctx.t("Time"), ctx.t("Type"), ctx.t("Reason"), ctx.t("Object"), ctx.t("Message")]))
                tbody {
                    @for event in &detail.events {
                        tr class=(if event.event_type == "Warning" { "event-warning" } else { "event" }) {
                            td { (event.time.as_deref().unwrap_or("–")) }
                            td lang="en" {
                                @if event.event_type == "Warning" { span class="status bad" { (event.event_type) } }
                                @else { (event.event_type) }
                            }
                            td lang="en" { (event.reason) }
                            td { code { (event.object) } }
                            td lang="en" { (event.message) }
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_deploying_or_unrecorded_placed_workload_is_moving() {
        let cases = [
            (Some(WorkloadStatus::Deploying), true, true),
            (None, true, true),
            (None, false, false),
            (Some(WorkloadStatus::Running), true, false),
            (Some(WorkloadStatus::Rejected("no".into())), true, false),
        ];
        for (status, placed, expected) in cases {
            assert_eq!(moving(status.as_ref(), placed), expected, "{status:?}");
        }
    }
}
