//! `spec.rollout` (SPEC 8): each invalid rollout is a 400 whose pointer names the stage and
//! field; a valid one is saved.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

mod common;

use common::outcome;

fn with_rollout(scope: &str, rollout: &str) -> String {
    format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {{name: p, boundary: shop}}\nspec:\n{scope}  rules: [{{disallowLatestTag: {{}}}}]\n  rollout:\n{rollout}"
    )
}

#[test]
fn invalid_rollouts_name_the_stage_and_the_field() {
    let scoped = "  scope: {clusters: [staging-1, prod-1]}\n";
    let cases: &[(&str, &str, &str)] = &[
        (
            scoped,
            "    stages: [{clusters: [prod-2], for: 1h}]\n",
            "/spec/rollout/stages/0/clusters/0: cluster 'prod-2' is not in the policy's scope",
        ),
        (
            "",
            "    stages: [{namespaces: 0%, for: 1h}]\n",
            "/spec/rollout/stages/0/namespaces: '0%' is not a percentage from 1% to 100% (a whole number followed by %)",
        ),
        (
            "",
            "    stages: [{namespaces: 101%, for: 1h}]\n",
            "/spec/rollout/stages/0/namespaces: '101%' is not a percentage from 1% to 100% (a whole number followed by %)",
        ),
        (
            "",
            "    stages: [{namespaces: 25%, for: 9s}]\n",
            "/spec/rollout/stages/0/for: must be at least 10s, got 9s",
        ),
        (
            "",
            "    stages: [{namespaces: 25%, for: soon}]\n",
            "/spec/rollout/stages/0/for: 'soon' is not a duration: use whole numbers with d, h, m or s, largest first, e.g. 1h30m",
        ),
        (
            "",
            "    stages: [{namespaces: 25%}]\n",
            "/spec/rollout/stages/0/for: is missing: every stage but a last one that reaches everywhere runs for a time (e.g. for: 1h)",
        ),
        (
            "",
            "    stages: [{namespaces: [web, Web], for: 1h}]\n",
            "/spec/rollout/stages/0/namespaces/1: 'Web' is not a DNS label: use lowercase letters, digits and '-', starting and ending with a letter or digit",
        ),
        (
            "",
            "    stages: [{namespaces: [web, web], for: 1h}]\n",
            "/spec/rollout/stages/0/namespaces/1: duplicates entry 0",
        ),
        (
            "",
            "    stages: [{clusters: [], for: 1h}]\n",
            "/spec/rollout/stages/0/clusters: must not be empty; omit it for every cluster of the policy's scope",
        ),
        (
            "",
            "    stages: []\n",
            "/spec/rollout/stages: must list at least one stage; omit rollout to apply changes everywhere at once",
        ),
        (
            "",
            "    stages: [{for: 1h}, {namespaces: 10%, for: 1h}]\n",
            "/spec/rollout/stages/0: reaches everywhere, so no stage may follow it",
        ),
        (
            "",
            "    stages: [{namespaces: 10%, for: 1h}]\n    promote: sometimes\n",
            "/spec/rollout/promote: must be one of auto, manual, got 'sometimes'",
        ),
        (
            "",
            "    stages: [{namespaces: 25, for: 1h}]\n",
            "/spec/rollout/stages/0/namespaces: must be a percentage such as 25%, or a list of namespace names",
        ),
    ];
    for (scope, rollout, expected) in cases {
        let text = with_rollout(scope, rollout);
        assert_eq!(outcome(&text), Err((*expected).to_owned()), "{text}");
    }
    // Eleven stages before the last are too many; ten, and `{}` last, are not.
    let stage = "      - {namespaces: 10%, for: 1h}\n";
    let eleven = format!("    stages:\n{}", stage.repeat(11));
    assert_eq!(
        outcome(&with_rollout("", &eleven)),
        Err("/spec/rollout/stages: must have at most 10 stages, got 11".to_owned())
    );
    let ten = format!("    stages:\n{}      - {{}}\n", stage.repeat(10));
    assert_eq!(outcome(&with_rollout("", &ten)), Ok(()));
}

#[test]
fn a_valid_rollout_is_saved() {
    let rollout = "    stages:\n      - {clusters: [staging-1], for: 1h}\n      - {namespaces: 25%, for: 24h}\n      - {}\n    promote: manual\n    maxDenials: 2\n";
    let text = with_rollout("  scope: {clusters: [staging-1, prod-1]}\n", rollout);
    assert_eq!(outcome(&text), Ok(()));
}
