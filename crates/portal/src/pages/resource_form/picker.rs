//! The plan picker: the catalog's plans of a type as the application's `picker` answers them,
//! disallowed ones disabled with their reason in text.

use maud::{html, Markup};
use palisade_api_types::view::{Picker, PickerPlan};
use palisade_app::AppError;
use palisade_app::{App, Caller};
use palisade_policy::ResourceType;

use crate::i18n::Lang;
use crate::layout::Ctx;

fn plan_text(plan: &PickerPlan) -> String {
    format!("{} ({} vCPU, {})", plan.name, plan.cpu, plan.memory)
}

/// The disallowed reason as the page shows it: the API's English text, introduced in the
/// page's language when that is not English.
/// A picker reason in the page's language. The API's text is English (SPEC 2.5:
/// `Disallowed by boundary policy 'a'`, or `... policies 'a', 'b'`); the portal says the same
/// in its own words, the policy names as they are. A text of another shape stays English.
fn reason_text(ctx: &Ctx, reason: &str) -> Option<String> {
    if ctx.lang == Lang::En {
        return Some(reason.to_owned());
    }
    if let Some(names) = reason.strip_prefix("Disallowed by boundary policy ") {
        return Some(format!(
            "{} {names}",
            ctx.t("Disallowed by boundary policy")
        ));
    }
    reason
        .strip_prefix("Disallowed by boundary policies ")
        .map(|names| format!("{} {names}", ctx.t("Disallowed by boundary policies")))
}

fn reason_markup(ctx: &Ctx, reason: &str) -> Markup {
    match reason_text(ctx, reason) {
        Some(text) => html! { (text) },
        None => html! { (ctx.t("Not allowed")) ": " span lang="en" { (reason) } },
    }
}

/// The plan picker: radio buttons in catalog order, disallowed ones disabled with the reason
/// next to them in text.
pub(super) fn plan_picker(
    ctx: &Ctx,
    picker: &Picker,
    selected: &str,
    kept: Option<&str>,
    error: Option<&str>,
) -> Markup {
    html! {
        fieldset class="picker" id="plan-picker" aria-describedby=[error.map(|_| "error-plan")] {
            legend { (ctx.t("Plan")) }
            @if !picker.enforced {
                p class="note" id="not-enforced" { (ctx.t("The API does not enforce plans of functions: plans that a policy disallows are greyed out here, but the API accepts them (with a warning).")) }
            }
            @for plan in &picker.plans {
                @let id = format!("plan-{}", plan.name);
                @let is_kept = kept == Some(plan.name.as_str());
                div class={ "choice" @if !plan.allowed && !is_kept { " disallowed" } } {
                    @if plan.allowed || is_kept {
                        input type="radio" name="plan" id=(id) value=(plan.name) checked[selected == plan.name]
                            aria-describedby=[(!plan.allowed).then(|| format!("reason-{}", plan.name))];
                    } @else {
                        input type="radio" name="plan" id=(id) value=(plan.name) disabled
                            aria-describedby={ "reason-" (plan.name) };
                    }
                    label for=(id) { (plan_text(plan)) }
                    @if let Some(reason) = &plan.reason {
                        " "
                        span class="reason" id={ "reason-" (plan.name) } {
                            (reason_markup(ctx, reason))
                            @if is_kept { " " span class="kept" { (ctx.t("(the current plan: keeping it is allowed, moving back to it later is not)")) } }
                        }
                    }
                    @if let Some(warning) = &plan.audit_warning {
                        " "
                        span class="audit" lang="en" { (warning) }
                    }
                }
            }
            @if let Some(message) = error {
                div class="field-error" id="error-plan" { p lang="en" { (message) } }
            }
        }
    }
}

pub(super) fn plan_select(
    ctx: &Ctx,
    picker: &Picker,
    id: &str,
    selected: &str,
    kept: Option<&str>,
) -> Markup {
    html! {
        select id=(id) name="component_plan" {
            option value="" selected[selected.is_empty()] { (ctx.t("— choose a plan —")) }
            @for plan in &picker.plans {
                @if plan.allowed {
                    option value=(plan.name) selected[selected == plan.name] { (plan_text(plan)) }
                } @else if kept == Some(plan.name.as_str()) {
                    option value=(plan.name) selected[selected == plan.name] {
                        (plan_text(plan)) " — " (ctx.t("current plan, kept")) "; "
                        (plan.reason.as_deref().map(|r| reason_text(ctx, r).unwrap_or_else(|| r.to_owned())).unwrap_or_default())
                    }
                } @else {
                    option value=(plan.name) disabled {
                        (plan_text(plan)) " — "
                        (plan.reason.as_deref().map(|r| reason_text(ctx, r).unwrap_or_else(|| format!("{}: {r}", ctx.t("Not allowed")))).unwrap_or_default())
                    }
                }
            }
        }
    }
}

pub(super) async fn picker_for(
    state: &App,
    caller: &Caller,
    boundary: &str,
    ty: ResourceType,
) -> Option<Result<Picker, AppError>> {
    if !ty.has_plans() {
        return None;
    }
    Some(match state.open(caller, boundary).await {
        Ok(access) => state.picker(&access, Some(ty.as_str())).await,
        Err(error) => Err(error),
    })
}
