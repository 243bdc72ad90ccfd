//! A staged rollout (SPEC 8) as `palisade serve` reconciles it, judged by the API server, in
//! every layout on 1.30 and 1.37: while a stage has reached one of a boundary's two
//! namespaces, the new version denies there and the previous one denies, word for word as
//! before, in the other; the last stage hands over to the layout's usual objects and the
//! version's objects go; an abort puts the previous version back everywhere. The rollout's
//! progress is written to the store directly: what moves it (the API, timers) is beside this.

use std::sync::Arc;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ListParams, PostParams};
use kube::Api;
use palisade_app::rollout::StoredRollout;
use palisade_policy::rollout::{Phase, Progress};
use palisade_policy::Name;
use palisade_reconciler::Layout;
use palisade_store::{PolicyWrite, RolloutDecision};
use serde_json::{json, Value};

use crate::serve::Stack;
use crate::support::{eventually, in_every_layout, plane, requires_label, ACTIVATION_TIMEOUT};

in_every_layout!(a_stage_holds_then_hands_over_and_an_abort_puts_the_previous_version_back);

/// The API server's verdict on a dry-run create of a Pod labelled `labels` running `image` in
/// `namespace`: `None` admitted, else the policy's message (what follows `denied request: `).
async fn verdict(
    admin: &kube::Client,
    namespace: &str,
    labels: Value,
    image: &str,
) -> Option<String> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "probe", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": image}]},
    }))
    .unwrap();
    let params = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    match Api::<Pod>::namespaced(admin.clone(), namespace)
        .create(&params, &pod)
        .await
    {
        Ok(_) => None,
        Err(kube::Error::Api(status)) => Some(
            status
                .message
                .split_once("denied request: ")
                .map_or(status.message.clone(), |(_, m)| m.to_owned()),
        ),
        Err(other) => panic!("{other}"),
    }
}

/// Saves `spec` as the next version of `policy` straight into the store, with `rollout`
/// made from the version stored before (its number and spec).
async fn save_rolling(
    stack: &Stack,
    boundary: &str,
    policy: &str,
    spec: Value,
    phase: Phase,
    stage: usize,
) -> i64 {
    let decide = move |before: Option<&palisade_store::PolicyRecord>, version: i64| {
        let before = before?;
        let progress = Progress {
            phase: phase.clone(),
            stage,
            ..Progress::start(
                u64::try_from(version).unwrap(),
                Some(u64::try_from(before.version).unwrap()),
                chrono::Utc::now().timestamp(),
            )
        };
        let stored = StoredRollout {
            progress,
            previous_spec: Some(before.spec_json.clone()),
        };
        Some(stored.encode())
    };
    let write = PolicyWrite {
        rollout: Some(RolloutDecision(Arc::new(decide))),
        ..PolicyWrite::unconditional(
            boundary,
            policy,
            spec.to_string(),
            r#"{"labels":{},"annotations":{}}"#,
        )
    };
    let (record, _) = stack.store.put_policy(write, "test").await.unwrap();
    assert!(record.rollout_json.is_some());
    record.version
}

/// Sets the stored rollout of `policy`'s `version` to `phase` at `stage`.
async fn move_rollout(
    stack: &Stack,
    boundary: &str,
    policy: &str,
    version: i64,
    phase: Phase,
    stage: usize,
) {
    let record = stack.store.get_policy(boundary, policy).await.unwrap();
    let mut stored = StoredRollout::decode(record.rollout_json.as_deref().unwrap()).unwrap();
    stored.progress.phase = phase;
    stored.progress.stage = stage;
    stack
        .store
        .set_policy_rollout(boundary, policy, version, Some(&stored.encode()))
        .await
        .unwrap();
}

/// The names of the version objects (policies and bindings) palisade holds for `boundary`.
async fn version_objects(admin: &kube::Client, boundary: &str) -> Vec<String> {
    let params = ListParams::default().labels(&format!(
        "palisade.dev/boundary={boundary},palisade.dev/version"
    ));
    let mut names: Vec<String> = Api::<ValidatingAdmissionPolicy>::all(admin.clone())
        .list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|o| o.metadata.name)
        .collect();
    names.extend(
        Api::<ValidatingAdmissionPolicyBinding>::all(admin.clone())
            .list(&params)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name),
    );
    names.sort();
    names
}

async fn a_stage_holds_then_hands_over_and_an_abort_puts_the_previous_version_back(
    version: &str,
    layout: Layout,
) {
    let plane = plane(version).await;
    let admin = plane.client().await;
    let stack = Stack::start_in(layout).await;
    let boundary = stack
        .new_boundary("stages", "k1", plane.kubeconfig_yaml())
        .await;
    let reached = stack.new_namespace(&boundary, "k1", "reached").await;
    let other = stack.new_namespace(&boundary, "k1", "other").await;
    let tags = Name::parse("tags").unwrap();
    let team_missing = palisade_policy::message::label_missing(&tags, "team");
    let latest = palisade_policy::message::image_latest(&tags, "nginx:latest");

    // Version 1 everywhere: a label `team` is required.
    stack
        .enforce_policy(&boundary, "k1", "tags", requires_label("team"))
        .await;

    // Version 2, no `latest` tag, reaches the first namespace only.
    let v2 = json!({"rules": [{"disallowLatestTag": {}}],
        "rollout": {"stages": [{"namespaces": [reached], "for": "1h"}], "promote": "manual"}});
    let v2_version = save_rolling(&stack, &boundary, "tags", v2, Phase::Running, 0).await;
    let judged = || async {
        let unlabelled = verdict(&admin, &other, json!({}), "nginx:1").await;
        let tagged = verdict(&admin, &reached, json!({"team": "a"}), "nginx:latest").await;
        let untouched = verdict(&admin, &reached, json!({}), "nginx:1").await;
        let audited = verdict(&admin, &other, json!({"team": "a"}), "nginx:latest").await;
        (unlabelled, tagged, untouched, audited)
    };
    eventually(
        "version 2 in the reached namespace, version 1 elsewhere",
        ACTIVATION_TIMEOUT,
        || async {
            let seen = judged().await;
            (seen == (Some(team_missing.clone()), Some(latest.clone()), None, None)).then_some(())
        },
    )
    .await;
    stack.wait_enforced(&boundary, "tags", "k1").await;
    let held = version_objects(&admin, &boundary).await;
    assert_eq!(
        held,
        vec![
            format!("tags.{boundary}.v{v2_version}.audit.palisade.dev"),
            format!("tags.{boundary}.v{v2_version}.palisade.dev"),
            format!("tags.{boundary}.v{v2_version}.palisade.dev"),
        ],
        "the version's policy, its binding to the reached namespace and its audit binding"
    );

    // The last stage: version 2 everywhere, in the layout's usual objects; its own go.
    move_rollout(&stack, &boundary, "tags", v2_version, Phase::Done, 1).await;
    eventually(
        "version 2 everywhere, its objects gone",
        ACTIVATION_TIMEOUT,
        || async {
            let everywhere = (
                verdict(&admin, &other, json!({"team": "a"}), "nginx:latest").await,
                verdict(&admin, &other, json!({}), "nginx:1").await,
            );
            let gone = version_objects(&admin, &boundary).await.is_empty();
            (everywhere == (Some(latest.clone()), None) && gone).then_some(())
        },
    )
    .await;

    // Version 3 (the label again) rolls out to the first namespace, and is aborted: version 2
    // is back everywhere, and nothing of version 3 is left.
    let v3 = json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}],
        "rollout": {"stages": [{"namespaces": [reached], "for": "1h"}], "promote": "manual"}});
    let v3_version = save_rolling(&stack, &boundary, "tags", v3, Phase::Running, 0).await;
    eventually(
        "version 3 in the reached namespace",
        ACTIVATION_TIMEOUT,
        || async {
            let seen = (
                verdict(&admin, &reached, json!({}), "nginx:1").await,
                verdict(&admin, &other, json!({}), "nginx:1").await,
            );
            (seen == (Some(team_missing.clone()), None)).then_some(())
        },
    )
    .await;
    move_rollout(&stack, &boundary, "tags", v3_version, Phase::Aborted, 0).await;
    eventually("version 2 back everywhere", ACTIVATION_TIMEOUT, || async {
        let seen = (
            verdict(&admin, &reached, json!({}), "nginx:1").await,
            verdict(&admin, &reached, json!({"team": "a"}), "nginx:latest").await,
            verdict(&admin, &other, json!({"team": "a"}), "nginx:latest").await,
        );
        let gone = version_objects(&admin, &boundary).await.is_empty();
        (seen == (None, Some(latest.clone()), Some(latest.clone())) && gone).then_some(())
    })
    .await;
}
