//! A policy's staged rollout on the boundary page (SPEC 8): its state, its stages and how far
//! it has come, and for an admin or boundary-admin Promote and Abort while it runs; a developer
//! reads it.

use axum::extract::{Path, State};
use axum::response::Response;
use maud::{html, Markup};
use palisade_api_types::document::{NamespacesDoc, RolloutDoc};
use palisade_api_types::view::RolloutView;
use palisade_app::rollout::Step;
use palisade_app::App;

use super::SignedForm;
use crate::flash::{self, Notice};
use crate::layout::{error_response, Ctx};

/// The rollout of a policy: its state and stage, its stages (those reached marked), and the
/// buttons while it runs or is paused.
pub fn section(
    ctx: &Ctx,
    boundary: &str,
    policy: &str,
    rollout: &RolloutView,
    stages: Option<&RolloutDoc>,
    csrf: &str,
    can_move: bool,
) -> Markup {
    let open = rollout.state == "running" || rollout.state == "paused";
    html! {
        h4 { (ctx.t("Rollout")) }
        p class="rollout" {
            (ctx.t("Version")) " " (rollout.version) ": " strong { (state_words(ctx, &rollout.state)) }
            @if open {
                ", " (ctx.t("stage")) " " (rollout.stage) "/" (rollout.stages)
                ", " (rollout.denials) " " (ctx.t("denials"))
                @if let Some(next) = &rollout.next_promotion_at {
                    ", " (ctx.t("next promotion")) " " (next)
                }
            }
            @if let Some(previous) = rollout.previous_version {
                " (" (ctx.t("previous version")) " " (previous) ")"
            }
        }
        @if let Some(reason) = &rollout.reason {
            p class="status error" lang="en" { (reason) }
        }
        @if let Some(doc) = stages {
            ol class="stages" {
                @for (i, stage) in doc.stages.iter().enumerate() {
                    li {
                        (reach(ctx, stage.clusters.as_deref(), stage.namespaces.as_ref()))
                        @if let Some(duration) = &stage.duration { ", " (ctx.t("for")) " " (duration) }
                        @if u64::try_from(i).is_ok_and(|i| i < rollout.stage) { " — " (ctx.t("reached")) }
                    }
                }
                @if u64::try_from(doc.stages.len()).is_ok_and(|n| n < rollout.stages) {
                    li {
                        (ctx.t("everywhere"))
                        @if rollout.stage >= rollout.stages { " — " (ctx.t("reached")) }
                    }
                }
            }
        }
        @if can_move && open {
            @for (step, label) in [("promote", ctx.t("Promote")), ("abort", ctx.t("Abort"))] {
                form class="inline" method="post" action={ "/boundaries/" (boundary) "/policies/" (policy) "/rollout/" (step) } {
                    input type="hidden" name=(crate::session::CSRF_FIELD) value=(csrf);
                    button type="submit" class="small" aria-label={ (label) " " (policy) } { (label) }
                }
                " "
            }
        }
    }
}

/// A rollout's state in the page's words.
fn state_words(ctx: &Ctx, state: &str) -> &'static str {
    match state {
        "running" => ctx.t("running"),
        "paused" => ctx.t("paused"),
        "done" => ctx.t("done"),
        "aborted" => ctx.t("aborted"),
        _ => ctx.t("unknown"),
    }
}

/// What a stage reaches, in words.
fn reach(ctx: &Ctx, clusters: Option<&[String]>, namespaces: Option<&NamespacesDoc>) -> String {
    let clusters = match clusters {
        None => ctx.t("every cluster").to_owned(),
        Some(names) => names.join(", "),
    };
    let namespaces = match namespaces {
        None => ctx.t("every namespace").to_owned(),
        Some(NamespacesDoc::Percent(p)) => format!("{p} {}", ctx.t("of the namespaces")),
        Some(NamespacesDoc::Names(names)) => names.join(", "),
    };
    format!("{clusters}: {namespaces}")
}

/// Promote, then back to the boundary page with what was done.
pub async fn promote(
    State(state): State<App>,
    Path((boundary, policy)): Path<(String, String)>,
    form: SignedForm,
) -> Response {
    submit(state, boundary, policy, Step::Promote, form).await
}

/// Abort, then back to the boundary page with what was done.
pub async fn abort(
    State(state): State<App>,
    Path((boundary, policy)): Path<(String, String)>,
    form: SignedForm,
) -> Response {
    submit(state, boundary, policy, Step::Abort, form).await
}

async fn submit(
    state: App,
    boundary: String,
    policy: String,
    step: Step,
    SignedForm { ctx, session, .. }: SignedForm,
) -> Response {
    let result = async {
        let access = state.open(&session.caller, &boundary).await?;
        state.step_rollout(&access, &policy, step).await
    }
    .await;
    match result {
        Ok(rollout) => {
            let done = match step {
                Step::Promote => ctx.t("Promoted the rollout of"),
                Step::Abort => ctx.t("Aborted the rollout of"),
            };
            let text = format!(
                "{done} '{policy}': {} {} {}",
                ctx.t("version"),
                rollout.version,
                state_words(&ctx, &rollout.state)
            );
            flash::redirect(
                &state,
                &ctx,
                &format!("/boundaries/{boundary}"),
                Notice::Done { text, secret: None },
                &[],
            )
        }
        Err(error) => error_response(&ctx, Some(&session), &error),
    }
}
