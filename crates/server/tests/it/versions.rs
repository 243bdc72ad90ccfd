//! Policy versions and rollback through the HTTP API (SPEC 8): every change makes a version,
//! shown on the policy and in its history; a rollback saves an earlier version's spec as a new
//! version, in force at once; bad requests name the field.

use axum::http::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::{app_resource, plans, shop, Answer, TestApp};

const POLICY: &str = "/v1/boundaries/shop/policies/size";

async fn rollback(app: &TestApp, token: &str, body: Value, if_match: Option<&str>) -> Answer {
    let quoted = if_match.map(|e| format!("\"{e}\""));
    let headers: Vec<(&str, &str)> = quoted.iter().map(|e| ("if-match", e.as_str())).collect();
    app.raw(
        Method::POST,
        &format!("{POLICY}/rollback"),
        Some(token),
        Some(&body.to_string()),
        Some("application/json"),
        &headers,
    )
    .await
}

fn versions(history: &Answer) -> Vec<Value> {
    history.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry.get("version").cloned().unwrap_or(Value::Null))
        .collect()
}

#[tokio::test]
async fn every_change_makes_a_version_and_a_rollback_saves_an_earlier_one_as_the_next() {
    let app = shop().await;
    let admin = app.admin.clone();
    let created = app.policy("shop", "size", plans(&["small"])).await;
    assert_eq!(created.body["version"], 1);
    let changed = app
        .policy("shop", "size", plans(&["small", "medium"]))
        .await;
    assert_eq!(changed.body["version"], 2);
    // Saving the same spec again is no change, and no version.
    let same = app
        .policy("shop", "size", plans(&["small", "medium"]))
        .await;
    assert_eq!(same.body["version"], 2);
    assert_eq!(app.get(POLICY, &admin).await.body["version"], 2);
    let listed = app.get("/v1/boundaries/shop/policies", &admin).await;
    assert_eq!(listed.body["items"][0]["version"], 2);
    let medium = app
        .create("shop", &admin, app_resource("web", "medium"))
        .await;
    assert_eq!(medium.status, StatusCode::CREATED, "{medium:?}");

    let back = rollback(&app, &admin, json!({"version": 1}), None).await;
    assert_eq!(back.status, StatusCode::OK, "{back:?}");
    assert_eq!(back.body["version"], 3);
    assert_eq!(
        back.body["spec"],
        app.get(POLICY, &admin).await.body["spec"]
    );
    assert_eq!(back.body["spec"]["rules"], plans(&["small"])["rules"]);
    assert_eq!(
        back.headers["etag"].to_str().unwrap(),
        format!("\"{}\"", back.body["etag"].as_str().unwrap())
    );
    // In force at once: the plan version 2 allowed is refused again.
    app.create("shop", &admin, app_resource("api", "medium"))
        .await
        .assert_refusal(
            StatusCode::UNPROCESSABLE_ENTITY,
            "compute_plan_not_allowed",
            "Compute plan 'medium' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small.",
        );

    // The policy has version 1's spec already: unchanged, no version made.
    let again = rollback(&app, &admin, json!({"version": 1}), None).await;
    assert_eq!(again.status, StatusCode::OK, "{again:?}");
    assert_eq!(again.body["version"], 3);

    let history = app.get(&format!("{POLICY}/history"), &admin).await;
    assert_eq!(versions(&history), [json!(1), json!(2), json!(3)]);
    assert_eq!(history.body["items"][2]["after"], back.body["spec"]);
    // The rollback's entry says so; the other changes name no action.
    let actions: Vec<Value> = history.body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry.get("action").cloned().unwrap_or(Value::Null))
        .collect();
    assert_eq!(
        actions,
        [Value::Null, Value::Null, json!("rollback to version 1")]
    );

    // A policy deleted and made again numbers on; the deletion has no version.
    let deleted = app.delete(POLICY, &admin).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT);
    let made_again = app.policy("shop", "size", plans(&["large"])).await;
    assert_eq!(made_again.status, StatusCode::CREATED);
    assert_eq!(made_again.body["version"], 4);
    let history = app.get(&format!("{POLICY}/history"), &admin).await;
    assert_eq!(
        versions(&history),
        [json!(1), json!(2), json!(3), Value::Null, json!(4)]
    );
    let back = rollback(&app, &admin, json!({"version": 2}), None).await;
    assert_eq!(back.body["version"], 5, "{back:?}");
    assert_eq!(
        back.body["spec"]["rules"],
        plans(&["small", "medium"])["rules"]
    );
}

#[tokio::test]
async fn a_rollback_that_cannot_be_made_says_why() {
    let app = shop().await;
    let admin = app.admin.clone();
    let first = app.policy("shop", "size", plans(&["small"])).await;
    app.policy("shop", "size", plans(&["medium"])).await;

    rollback(&app, &admin, json!({"version": 9}), None)
        .await
        .assert_refusal(
            StatusCode::NOT_FOUND,
            "not_found",
            "policy 'size' of boundary 'shop' has no version 9: its latest is version 2",
        );
    rollback(&app, &admin, json!({"version": 0}), None)
        .await
        .assert_invalid_request(
            "/version: must be a version of the policy (1 or more), got 0",
            "version 0",
        );
    rollback(&app, &admin, json!({"version": 1, "staged": true}), None)
        .await
        .assert_invalid_request(
            "/staged: policy 'size' has no spec.rollout: its stages are what a staged rollback goes through; omit staged to roll back at once",
            "staged",
        );
    let missing = rollback(&app, &admin, json!({}), None).await;
    assert_eq!(missing.status, StatusCode::BAD_REQUEST, "{missing:?}");
    assert!(missing.message().starts_with("/version"), "{missing:?}");
    let unknown = rollback(&app, &admin, json!({"version": 1, "to": 1}), None).await;
    assert_eq!(unknown.status, StatusCode::BAD_REQUEST, "{unknown:?}");
    assert!(unknown.message().starts_with("/to"), "{unknown:?}");

    // A stale etag changes nothing.
    let stale = first.body["etag"].as_str().unwrap();
    let refused = rollback(&app, &admin, json!({"version": 1}), Some(stale)).await;
    assert_eq!(
        refused.status,
        StatusCode::PRECONDITION_FAILED,
        "{refused:?}"
    );
    assert_eq!(app.get(POLICY, &admin).await.body["version"], 2);

    let nope = app
        .call(
            Method::POST,
            "/v1/boundaries/shop/policies/nope/rollback",
            Some(&admin),
            Some(json!({"version": 1})),
        )
        .await;
    nope.assert_refusal(
        StatusCode::NOT_FOUND,
        "not_found",
        "policy 'nope' not found in boundary 'shop'",
    );

    // A developer reads policies but does not roll them back.
    let developer = app.token("developer", Some("shop")).await;
    let forbidden = rollback(&app, &developer, json!({"version": 1}), None).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN, "{forbidden:?}");
    assert_eq!(app.get(POLICY, &admin).await.body["version"], 2);
}

/// `spec.rollout` is validated with pointers; a valid one is saved and shown as the rollout of
/// the version, which a boundary-admin promotes and aborts (409 when none runs) and a developer
/// only reads; a change during a rollout starts over the version in force everywhere.
#[tokio::test]
async fn a_rollout_is_saved_shown_promoted_and_aborted() {
    let app = shop().await;
    let admin = app.admin.clone();
    let mut spec = plans(&["small"]);
    spec["rollout"] = json!({"stages": [{"namespaces": "25%", "for": "5s"}]});
    app.put(POLICY, &admin, spec.clone())
        .await
        .assert_invalid_request(
            "/rollout/stages/0/for: must be at least 10s, got 5s",
            "too short",
        );
    let absent = app.get(POLICY, &admin).await;
    assert_eq!(absent.status, StatusCode::NOT_FOUND, "{absent:?}");

    spec["rules"]
        .as_array_mut()
        .unwrap()
        .push(json!({"disallowLatestTag": {}}));
    spec["rollout"] =
        json!({"stages": [{"namespaces": "25%", "for": "1h"}, {}], "promote": "manual"});
    let created = app.put(POLICY, &admin, spec.clone()).await;
    assert_eq!(created.status, StatusCode::CREATED, "{created:?}");
    assert_eq!(
        created.body["warnings"],
        json!(["allowedComputePlans applies at once: rollout stages the admission rules only"])
    );
    let rollout = &created.body["rollout"];
    assert_eq!(
        (
            &rollout["version"],
            &rollout["state"],
            &rollout["stage"],
            &rollout["stages"]
        ),
        (&json!(1), &json!("running"), &json!(1), &json!(2)),
        "{rollout}"
    );
    assert_eq!(
        rollout.get("previous_version"),
        None,
        "a new policy has none"
    );
    assert_eq!(rollout.get("next_promotion_at"), None, "manual: none");
    assert_eq!(app.get(POLICY, &admin).await.body["rollout"], *rollout);

    let step = |what: &'static str, token: String| {
        let app = &app;
        async move {
            app.call(
                Method::POST,
                &format!("{POLICY}/rollout/{what}"),
                Some(&token),
                None,
            )
            .await
        }
    };
    let developer = app.token("developer", Some("shop")).await;
    let forbidden = step("promote", developer.clone()).await;
    assert_eq!(forbidden.status, StatusCode::FORBIDDEN, "{forbidden:?}");
    let promoted = step("promote", admin.clone()).await;
    assert_eq!(promoted.status, StatusCode::OK, "{promoted:?}");
    assert_eq!(
        (&promoted.body["state"], &promoted.body["stage"]),
        (&json!("done"), &json!(2))
    );
    step("promote", admin.clone()).await.assert_refusal(
        StatusCode::CONFLICT,
        "conflict",
        "policy 'size' of boundary 'shop' has no rollout running",
    );
    let history = app.get(&format!("{POLICY}/history"), &admin).await;
    let last = history.body["items"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        (
            &last["action"],
            &last["version"],
            &last["before"],
            &last["after"]
        ),
        (
            &json!("rollout of version 1 done: in force everywhere"),
            &json!(1),
            &last["after"],
            &created.body["spec"]
        ),
        "{last}"
    );
    assert!(
        last["actor"].as_str().unwrap().ends_with("(admin)"),
        "{last}"
    );

    // A change of the admission rules rolls out over version 1, in force everywhere now.
    spec["mode"] = json!("audit");
    let changed = app.put(POLICY, &admin, spec.clone()).await;
    let rollout = &changed.body["rollout"];
    assert_eq!(
        (
            &rollout["version"],
            &rollout["previous_version"],
            &rollout["state"]
        ),
        (&json!(2), &json!(1), &json!("running")),
        "{rollout}"
    );
    let aborted = step("abort", admin.clone()).await;
    assert_eq!(aborted.status, StatusCode::OK, "{aborted:?}");
    assert_eq!(aborted.body["state"], "aborted");
    let history = app.get(&format!("{POLICY}/history"), &admin).await;
    assert_eq!(
        history.body["items"].as_array().unwrap().last().unwrap()["action"],
        "rollout of version 2 aborted: version 1 in force everywhere"
    );
    assert_eq!(
        app.get(POLICY, &developer).await.body["rollout"],
        aborted.body
    );
    step("abort", admin.clone()).await.assert_refusal(
        StatusCode::CONFLICT,
        "conflict",
        "policy 'size' of boundary 'shop' has no rollout running",
    );

    // The aborted spec is the current document, but version 1 is in force: a rollback to
    // version 2 makes it the one in force everywhere, as version 3 (not "unchanged"); the
    // same rollback again is unchanged.
    let restored = rollback(&app, &admin, json!({"version": 2}), None).await;
    assert_eq!(restored.status, StatusCode::OK, "{restored:?}");
    assert_eq!(
        (&restored.body["version"], restored.body.get("rollout")),
        (&json!(3), None),
        "{restored:?}"
    );
    let again = rollback(&app, &admin, json!({"version": 2}), None).await;
    assert_eq!(again.body["version"], 3, "{again:?}");
    let history = app.get(&format!("{POLICY}/history"), &admin).await;
    assert_eq!(
        history.body["items"].as_array().unwrap().last().unwrap()["action"],
        "rollback to version 2"
    );

    // Version 3's admission rules and mode, with other plans: nothing to roll out.
    spec["rules"][0] = plans(&["small", "medium"])["rules"][0].clone();
    let plans_only = app.put(POLICY, &admin, spec.clone()).await;
    assert_eq!(plans_only.body.get("rollout"), None, "{plans_only:?}");

    // A staged rollback goes through the stages of the policy as it is now; one at once to
    // the same spec while it rolls out puts it in force everywhere.
    let staged = rollback(&app, &admin, json!({"version": 1, "staged": true}), None).await;
    assert_eq!(staged.status, StatusCode::OK, "{staged:?}");
    assert_eq!(staged.body["rollout"]["state"], "running", "{staged:?}");
    let at_once = rollback(&app, &admin, json!({"version": 1}), None).await;
    assert_eq!(
        (&at_once.body["version"], at_once.body.get("rollout")),
        (&json!(6), None),
        "{at_once:?}"
    );
}
