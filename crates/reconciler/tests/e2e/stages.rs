//! A staged rollout (SPEC 8) as `palisade serve` reconciles it, judged by the API server, in
//! every layout on 1.30 and 1.37: while a stage has reached one of a boundary's two
//! namespaces, the new version denies there and the previous one denies, word for word as
//! before, in the other; the last stage hands over to the layout's usual objects and the
//! version's objects go; an abort puts the previous version back everywhere. The rollout's
//! progress is written to the store directly: what moves it (the API, timers) is beside this.

use std::sync::Arc;
use std::time::Duration;

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
use crate::support::{
    eventually, in_every_layout, plane, requires_label, verdict, ACTIVATION_TIMEOUT,
};

/// A stack in `layout` over the shared control plane of `version`, with a boundary (named
/// from `prefix`) of cluster k1 and two namespaces there: one a stage reaches, one other.
struct Setting {
    admin: kube::Client,
    stack: Stack,
    boundary: String,
    reached: String,
    other: String,
    /// What policy `tags` says when it requires the label `team`, and when it refuses the
    /// `latest` tag of `nginx:latest`: the versions the tests roll out.
    team_missing: String,
    latest: String,
    /// The API path of policy `tags`.
    policy: String,
}

impl Setting {
    async fn new(version: &str, layout: Layout, prefix: &str) -> Setting {
        let plane = plane(version).await;
        let admin = plane.client().await;
        let stack = Stack::start_in(layout).await;
        let boundary = stack
            .new_boundary(prefix, "k1", plane.kubeconfig_yaml())
            .await;
        let reached = stack.new_namespace(&boundary, "k1", "reached").await;
        let other = stack.new_namespace(&boundary, "k1", "other").await;
        let tags = Name::parse("tags").unwrap();
        let policy = crate::serve::policy_path(&boundary, "tags");
        Setting {
            admin,
            stack,
            boundary,
            reached,
            other,
            team_missing: palisade_policy::message::label_missing(&tags, "team"),
            latest: palisade_policy::message::image_latest(&tags, "nginx:latest"),
            policy,
        }
    }

    /// [`Setting::new`], with version 1 of policy `tags` in force everywhere: a label `team`
    /// is required.
    async fn tags(version: &str, layout: Layout, prefix: &str) -> Setting {
        let setting = Setting::new(version, layout, prefix).await;
        setting
            .stack
            .enforce_policy(&setting.boundary, "k1", "tags", requires_label("team"))
            .await;
        setting
    }
}

/// A count from the environment variable `name` (a run's size), 1 when unset.
fn count_from_env(name: &str) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
}

/// Prints p50, p99 and the longest of `times` (`what`, counted in `unit`); asserts nothing.
fn report(what: &str, layout: Layout, version: &str, unit: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| times[((times.len() as f64 * q).ceil() as usize).clamp(1, times.len()) - 1];
    eprintln!(
        "rollout {what} ({layout:?}, {version}, {} {unit}): p50 {:?}, p99 {:?}, max {:?}",
        times.len(),
        at(0.5),
        at(0.99),
        times[times.len() - 1]
    );
}

mod manual {
    use super::*;
    in_every_layout!(a_stage_holds_then_hands_over_and_an_abort_puts_the_previous_version_back);
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
            denials: 0,
            baseline: None,
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
        .set_policy_rollout(
            boundary,
            policy,
            palisade_store::RolloutMove {
                version,
                expected: record.rollout_json.as_deref(),
                rollout_json: Some(&stored.encode()),
                event: None,
                actor: "test",
            },
        )
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
    let Setting {
        admin,
        stack,
        boundary,
        reached,
        other,
        team_missing,
        latest,
        policy,
    } = Setting::tags(version, layout, "stages").await;

    // Version 2, no `latest` tag, reaches the first namespace only.
    let v2 = json!({"rules": [{"disallowLatestTag": {}}],
        "rollout": {"stages": [{"namespaces": [reached], "for": "1h"}], "promote": "manual"}});

    // Its preview says which stage meets what runs: a Pod on nginx:latest in each namespace.
    for namespace in [&reached, &other] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "old", "labels": {"team": "a"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:latest"}]},
        }))
        .unwrap();
        Api::<Pod>::namespaced(admin.clone(), namespace)
            .create(&PostParams::default(), &pod)
            .await
            .unwrap();
    }
    let preview = stack
        .ok("POST", &format!("{policy}/preview"), Some(v2.clone()))
        .await;
    let mut met: Vec<(String, Option<u64>)> = preview["clusters"][0]["denied"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["namespace"].as_str().unwrap().to_owned(),
                d["stage"].as_u64(),
            )
        })
        .collect();
    met.sort();
    let mut expected = vec![(reached.clone(), Some(1)), (other.clone(), Some(2))];
    expected.sort();
    assert_eq!(met, expected, "{preview}");
    let v2_version = save_rolling(&stack, &boundary, "tags", v2, Phase::Running, 0).await;
    let judged = || async {
        let unlabelled = verdict(&admin, &other, json!({}), &["nginx:1"]).await;
        let tagged = verdict(&admin, &reached, json!({"team": "a"}), &["nginx:latest"]).await;
        let untouched = verdict(&admin, &reached, json!({}), &["nginx:1"]).await;
        let audited = verdict(&admin, &other, json!({"team": "a"}), &["nginx:latest"]).await;
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
    let shown = stack.ok("GET", &policy, None).await;
    assert_eq!(
        shown["status"]["clusters"][0]["in_force"],
        format!("v{v2_version} in 1 of 2 namespaces; v1 elsewhere"),
        "{shown}"
    );
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
                verdict(&admin, &other, json!({"team": "a"}), &["nginx:latest"]).await,
                verdict(&admin, &other, json!({}), &["nginx:1"]).await,
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
                verdict(&admin, &reached, json!({}), &["nginx:1"]).await,
                verdict(&admin, &other, json!({}), &["nginx:1"]).await,
            );
            (seen == (Some(team_missing.clone()), None)).then_some(())
        },
    )
    .await;
    move_rollout(&stack, &boundary, "tags", v3_version, Phase::Aborted, 0).await;
    eventually("version 2 back everywhere", ACTIVATION_TIMEOUT, || async {
        let seen = (
            verdict(&admin, &reached, json!({}), &["nginx:1"]).await,
            verdict(&admin, &reached, json!({"team": "a"}), &["nginx:latest"]).await,
            verdict(&admin, &other, json!({"team": "a"}), &["nginx:latest"]).await,
        );
        let gone = version_objects(&admin, &boundary).await.is_empty();
        (seen == (None, Some(latest.clone()), Some(latest.clone())) && gone).then_some(())
    })
    .await;
}

mod auto {
    use super::*;
    in_every_layout!(auto_promotion_pauses_on_a_real_denial_and_goes_on_without_one);
}

/// The policy's rollout as the API shows it.
async fn rollout_of(stack: &Stack, boundary: &str, policy: &str) -> Value {
    stack
        .ok("GET", &crate::serve::policy_path(boundary, policy), None)
        .await["rollout"]
        .clone()
}

/// Saved through the API with `promote: auto` and one stage of 10 s: a request the new version
/// denies in the reached namespace pauses the rollout when the stage is due, with the reason;
/// promoted by hand it is done and in force everywhere. The next change, denying nothing, is
/// promoted by the loop when its stage is due, no sooner; an abort puts it back.
async fn auto_promotion_pauses_on_a_real_denial_and_goes_on_without_one(
    version: &str,
    layout: Layout,
) {
    let Setting {
        admin,
        stack,
        boundary,
        reached,
        other,
        team_missing,
        latest,
        policy,
    } = Setting::tags(version, layout, "autoroll").await;
    let rollout = json!({"stages": [{"namespaces": [reached], "for": "10s"}, {}], "maxDenials": 0});

    // Version 2 (no `latest` tag) reaches the first namespace; a real create there is denied.
    let saved = stack
        .put_policy(
            &boundary,
            "tags",
            json!({"rules": [{"disallowLatestTag": {}}], "rollout": rollout}),
        )
        .await;
    let started = chrono::DateTime::parse_from_rfc3339(
        saved["rollout"]["stage_started_at"].as_str().unwrap(),
    )
    .unwrap();
    eventually(
        "version 2 in the reached namespace",
        ACTIVATION_TIMEOUT,
        || async {
            let seen = verdict(&admin, &reached, json!({"team": "a"}), &["nginx:latest"]).await;
            (seen == Some(latest.clone())).then_some(())
        },
    )
    .await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"team": "a"}},
        "spec": {"containers": [{"name": "c", "image": "nginx:latest"}]},
    }))
    .unwrap();
    let denied = Api::<Pod>::namespaced(admin.clone(), &reached)
        .create(&PostParams::default(), &pod)
        .await;
    assert!(
        matches!(denied, Err(kube::Error::Api(ref s)) if s.code == 422),
        "{denied:?}"
    );
    let (paused, _) = eventually("the rollout paused", Duration::from_secs(40), || async {
        let rollout = rollout_of(&stack, &boundary, "tags").await;
        (rollout["state"] == "paused").then_some(rollout)
    })
    .await;
    assert!(
        paused["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("paused: ") && r.contains(" denied")),
        "{paused}"
    );
    assert!(
        paused["denials"].as_u64().is_some_and(|d| d >= 1),
        "{paused}"
    );
    assert_eq!(paused["stage"], 1);
    metric_is(&stack, "palisade_rollout_paused", &boundary, 1).await;
    let last = last_history_entry(&stack, &policy).await;
    assert_eq!(
        (&last["action"], &last["actor"]),
        (
            &json!(format!(
                "rollout of version 2 {}",
                paused["reason"].as_str().unwrap()
            )),
            &json!("palisade (automatic promotion)")
        ),
        "{last}"
    );
    metric_is(&stack, "palisade_rollout_stage", &boundary, 1).await;
    // Still version 1 in the other namespace.
    assert_eq!(
        verdict(&admin, &other, json!({}), &["nginx:1"]).await,
        Some(team_missing.clone())
    );

    // Promoted by hand: the last stage, done; version 2 everywhere.
    let promoted = stack
        .ok("POST", &format!("{policy}/rollout/promote"), None)
        .await;
    assert_eq!(
        (&promoted["state"], &promoted["stage"]),
        (&json!("done"), &json!(2))
    );
    eventually("version 2 everywhere", ACTIVATION_TIMEOUT, || async {
        let seen = (
            verdict(&admin, &other, json!({"team": "a"}), &["nginx:latest"]).await,
            verdict(&admin, &other, json!({}), &["nginx:1"]).await,
        );
        let gone = version_objects(&admin, &boundary).await.is_empty();
        (seen == (Some(latest.clone()), None) && gone).then_some(())
    })
    .await;
    let paused_after = chrono::Utc::now().signed_duration_since(started);
    assert!(
        paused_after.num_seconds() >= 10,
        "paused no sooner than `for`"
    );

    // Version 3 (the label again) denies nothing: promoted by the loop after its 10 s.
    let saved = stack
        .put_policy(
            &boundary,
            "tags",
            json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}], "rollout": rollout}),
        )
        .await;
    let started = chrono::DateTime::parse_from_rfc3339(
        saved["rollout"]["stage_started_at"].as_str().unwrap(),
    )
    .unwrap();
    let (done, _) = eventually(
        "version 3 promoted by the loop",
        Duration::from_secs(40),
        || async {
            let rollout = rollout_of(&stack, &boundary, "tags").await;
            (rollout["state"] == "done").then_some(rollout)
        },
    )
    .await;
    let last = last_history_entry(&stack, &policy).await;
    assert_eq!(
        (&last["action"], &last["actor"]),
        (
            &json!("rollout of version 3 done: in force everywhere"),
            &json!("palisade (automatic promotion)")
        ),
        "{last}"
    );
    let promoted_at =
        chrono::DateTime::parse_from_rfc3339(done["stage_started_at"].as_str().unwrap()).unwrap();
    assert!(
        promoted_at.signed_duration_since(started).num_seconds() >= 10,
        "promoted no sooner than `for`: {done}"
    );
    eventually("version 3 everywhere", ACTIVATION_TIMEOUT, || async {
        let seen = verdict(&admin, &other, json!({}), &["nginx:1"]).await;
        (seen == Some(team_missing.clone())).then_some(())
    })
    .await;

    // Version 4 (no `latest` tag again) is aborted: version 3 everywhere, nothing of 4 left.
    stack
        .put_policy(
            &boundary,
            "tags",
            json!({"rules": [{"disallowLatestTag": {}}], "rollout": rollout}),
        )
        .await;
    eventually(
        "version 4 in the reached namespace",
        ACTIVATION_TIMEOUT,
        || async {
            let seen = verdict(&admin, &reached, json!({"team": "a"}), &["nginx:latest"]).await;
            (seen == Some(latest.clone())).then_some(())
        },
    )
    .await;
    let aborted = stack
        .ok("POST", &format!("{policy}/rollout/abort"), None)
        .await;
    assert_eq!(aborted["state"], "aborted");
    eventually("version 3 back everywhere", ACTIVATION_TIMEOUT, || async {
        let seen = (
            verdict(&admin, &reached, json!({"team": "a"}), &["nginx:latest"]).await,
            verdict(&admin, &reached, json!({}), &["nginx:1"]).await,
        );
        let gone = version_objects(&admin, &boundary).await.is_empty();
        (seen == (None, Some(team_missing.clone())) && gone).then_some(())
    })
    .await;
    metric_is(&stack, "palisade_rollout_stage", &boundary, 0).await;
}

/// The last entry of the history of the policy at `path`.
async fn last_history_entry(stack: &Stack, path: &str) -> Value {
    let history = stack.ok("GET", &format!("{path}/history"), None).await;
    history["items"].as_array().unwrap().last().unwrap().clone()
}

/// Waits until `/metrics` shows `metric` of policy `tags` of `boundary` at `value`.
async fn metric_is(stack: &Stack, metric: &str, boundary: &str, value: u64) {
    let series = format!("{metric}{{boundary=\"{boundary}\",policy=\"tags\"}} {value}");
    eventually(&series, Duration::from_secs(20), || async {
        let (_, metrics) = stack.call("GET", "/metrics", None).await;
        let metrics = metrics.as_str().unwrap_or_default().to_owned();
        metrics.lines().any(|l| l == series).then_some(())
    })
    .await;
}

mod latency {
    use super::*;
    in_every_layout!(promote_and_abort_are_in_force_soon);
}

/// How soon a promotion and an abort are in force where they change what is judged (SPEC 8:
/// within 2 s): `ROLLOUT_ROUNDS` rounds (default 1; docs/benchmarks.md runs 50) of a change
/// rolled out to one of two namespaces, promoted by hand (timed until the other namespace
/// denies by the new version), then the next change aborted (timed until the reached
/// namespace judges by the version before again). Prints p50 and p99; asserts no time.
async fn promote_and_abort_are_in_force_soon(version: &str, layout: Layout) {
    let rounds = count_from_env("ROLLOUT_ROUNDS");
    let Setting {
        admin,
        stack,
        boundary,
        reached,
        other,
        team_missing,
        latest,
        policy,
    } = Setting::tags(version, layout, "latency").await;
    let rollout = json!({"stages": [{"namespaces": [reached], "for": "1h"}], "promote": "manual"});
    let labels =
        json!({"rules": [{"requiredLabels": {"labels": [{"key": "team"}]}}], "rollout": rollout});
    let no_latest = json!({"rules": [{"disallowLatestTag": {}}], "rollout": rollout});
    let (mut promotes, mut aborts) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        // Version n+1 (no `latest` tag) in the reached namespace, then promoted.
        stack.put_policy(&boundary, "tags", no_latest.clone()).await;
        eventually("the stage in force", ACTIVATION_TIMEOUT, || async {
            let seen = verdict(&admin, &reached, json!({"team": "a"}), &["nginx:latest"]).await;
            (seen == Some(latest.clone())).then_some(())
        })
        .await;
        let started = std::time::Instant::now();
        stack
            .ok("POST", &format!("{policy}/rollout/promote"), None)
            .await;
        eventually("the promotion in force", ACTIVATION_TIMEOUT, || async {
            let seen = verdict(&admin, &other, json!({"team": "a"}), &["nginx:latest"]).await;
            (seen == Some(latest.clone())).then_some(())
        })
        .await;
        promotes.push(started.elapsed());
        // Version n+2 (the label again) in the reached namespace, then aborted.
        stack.put_policy(&boundary, "tags", labels.clone()).await;
        eventually("the stage in force", ACTIVATION_TIMEOUT, || async {
            let seen = verdict(&admin, &reached, json!({}), &["nginx:1"]).await;
            (seen == Some(team_missing.clone())).then_some(())
        })
        .await;
        let started = std::time::Instant::now();
        stack
            .ok("POST", &format!("{policy}/rollout/abort"), None)
            .await;
        eventually("the abort in force", ACTIVATION_TIMEOUT, || async {
            let seen = verdict(&admin, &reached, json!({}), &["nginx:1"]).await;
            (seen.is_none()).then_some(())
        })
        .await;
        aborts.push(started.elapsed());
        // Back to the label everywhere, at once, for the next round.
        stack
            .put_policy(&boundary, "tags", requires_label("team"))
            .await;
        eventually("the label alone everywhere", ACTIVATION_TIMEOUT, || async {
            let seen = verdict(&admin, &other, json!({"team": "a"}), &["nginx:latest"]).await;
            (seen.is_none()).then_some(())
        })
        .await;
    }
    for (what, times) in [("promote", promotes), ("abort", aborts)] {
        report(
            &format!("{what} in force"),
            layout,
            version,
            "rounds",
            times,
        );
    }
}

mod auto_latency {
    use super::*;
    in_every_layout!(auto_promotion_is_in_force_soon_and_no_sooner);
}

/// How soon an automatic promotion is in force after its stage is due, and that it never comes
/// sooner (SPEC 8): `AUTO_POLICIES` policies (default 1) each roll out `AUTO_ROUNDS` changes
/// (default 1; docs/benchmarks.md runs 5 × 10) to one of two namespaces for 10 s, side by
/// side. Each change is timed from when its stage is due (`stage_started_at` + 10 s) until
/// the other namespace denies by it; a Pod there carries every policy's labels but the one the
/// change requires, so only that change denies it. Prints p50 and p99; asserts no time, only
/// that no promotion came sooner than 10 s after the save was sent.
async fn auto_promotion_is_in_force_soon_and_no_sooner(version: &str, layout: Layout) {
    let (policies, rounds) = (
        count_from_env("AUTO_POLICIES"),
        count_from_env("AUTO_ROUNDS"),
    );
    let Setting {
        admin,
        stack,
        boundary,
        reached,
        other,
        ..
    } = Setting::new(version, layout, "autolatency").await;
    let rollout = json!({"stages": [{"namespaces": [reached], "for": "10s"}], "maxDenials": 0});
    let keys = |i: usize| [format!("a{i}"), format!("b{i}")];
    let every_key: Vec<String> = (0..policies).flat_map(keys).collect();
    for i in 0..policies {
        let name = format!("auto{i}");
        let [first, _] = keys(i);
        stack
            .enforce_policy(&boundary, "k1", &name, requires_label(&first))
            .await;
    }
    let timed = (0..policies).map(|i| {
        let (stack, admin, boundary, other, rollout, every_key) =
            (&stack, &admin, &boundary, &other, &rollout, &every_key);
        async move {
            let name = format!("auto{i}");
            let policy = Name::parse(&name).unwrap();
            let mut times = Vec::new();
            for round in 0..rounds {
                let key = &keys(i)[(round + 1) % 2];
                let labels: serde_json::Map<String, Value> = every_key
                    .iter()
                    .filter(|k| *k != key)
                    .map(|k| (k.clone(), json!("x")))
                    .collect();
                let denied = palisade_policy::message::label_missing(&policy, key);
                let sent = std::time::Instant::now();
                let saved = stack
                    .put_policy(
                        boundary,
                        &name,
                        json!({"rules": [{"requiredLabels": {"labels": [{"key": key}]}}],
                               "rollout": rollout}),
                    )
                    .await;
                let due = chrono::DateTime::parse_from_rfc3339(
                    saved["rollout"]["stage_started_at"].as_str().unwrap(),
                )
                .unwrap()
                    + chrono::Duration::seconds(10);
                eventually("the promotion in force", Duration::from_secs(60), || {
                    let labels = Value::Object(labels.clone());
                    let denied = denied.clone();
                    async move {
                        let seen = verdict(admin, other, labels, &["nginx:1"]).await;
                        (seen == Some(denied)).then_some(())
                    }
                })
                .await;
                let in_force = chrono::Utc::now();
                assert!(
                    sent.elapsed() >= Duration::from_secs(10),
                    "promoted {:?} after the save was sent, sooner than `for`",
                    sent.elapsed()
                );
                let late = in_force.signed_duration_since(due);
                if std::env::var_os("AUTO_TRACE").is_some() {
                    eprintln!("auto{i} round {round}: due {due}, in force {in_force}, late {late}");
                }
                times.push(Duration::from_millis(
                    u64::try_from(late.num_milliseconds()).unwrap_or_default(),
                ));
            }
            times
        }
    });
    let times: Vec<Duration> = futures::future::join_all(timed)
        .await
        .into_iter()
        .flatten()
        .collect();
    report(
        "auto promotion in force after due",
        layout,
        version,
        "promotions",
        times,
    );
}

mod rollback_latency {
    use super::*;
    in_every_layout!(rollback_is_in_force_soon);
}

/// How soon a rollback (at once) is in force everywhere (SPEC 8: within 2 s):
/// `ROLLOUT_ROUNDS` rounds (default 1; docs/benchmarks.md runs 25, so 50 rollbacks) of a
/// rollback to version 1 (the label), timed until a namespace denies by it, then to version 2
/// (no `latest` tag), timed the same way. Prints p50 and p99; asserts no time.
async fn rollback_is_in_force_soon(version: &str, layout: Layout) {
    let rounds = count_from_env("ROLLOUT_ROUNDS");
    let Setting {
        admin,
        stack,
        boundary,
        reached: namespace,
        team_missing,
        latest,
        policy,
        ..
    } = Setting::tags(version, layout, "rollback").await;
    stack
        .put_policy(
            &boundary,
            "tags",
            json!({"rules": [{"disallowLatestTag": {}}]}),
        )
        .await;
    eventually("version 2 in force", ACTIVATION_TIMEOUT, || async {
        let seen = verdict(&admin, &namespace, json!({}), &["nginx:latest"]).await;
        (seen == Some(latest.clone())).then_some(())
    })
    .await;
    let mut times = Vec::new();
    for _ in 0..rounds {
        for (to, expected) in [(1, &team_missing), (2, &latest)] {
            let started = std::time::Instant::now();
            stack
                .ok(
                    "POST",
                    &format!("{policy}/rollback"),
                    Some(json!({"version": to})),
                )
                .await;
            eventually("the rollback in force", ACTIVATION_TIMEOUT, || async {
                let seen = verdict(&admin, &namespace, json!({}), &["nginx:latest"]).await;
                (seen.as_ref() == Some(expected)).then_some(())
            })
            .await;
            times.push(started.elapsed());
        }
    }
    report("rollback in force", layout, version, "rollbacks", times);
}
