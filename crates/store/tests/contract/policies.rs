//! Policies: writes, history, `If-Match`, and `apply_policies` (all or nothing, in order).

use crate::support::*;

pub async fn policies(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let spec1 = r#"{"allow":true}"#;
    let spec2 = r#"{"allow":false}"#;

    let (created, action) = put(&store, "b", "p", spec1, "alice").await;
    assert_eq!(action, WriteAction::Created);
    assert_eq!(created.boundary, "b");
    assert_eq!(created.name, "p");
    assert_eq!(created.spec_json, spec1);
    assert_eq!(created.metadata_json, META);
    assert_eq!(created.etag, etag_of(&[spec1, META]));
    assert_eq!(created.updated_by, "alice");
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(store.get_policy("b", "p").await.unwrap(), created);

    // Identical content: nothing is written, not even the actor.
    let (same, action) = put(&store, "b", "p", spec1, "bob").await;
    assert_eq!(action, WriteAction::Unchanged);
    assert_eq!(same, created);
    assert_eq!(store.get_policy("b", "p").await.unwrap(), created);

    let (configured, action) = put(&store, "b", "p", spec2, "bob").await;
    assert_eq!(action, WriteAction::Configured);
    assert_eq!(configured.etag, etag_of(&[spec2, META]));
    assert_eq!(configured.created_at, created.created_at);
    assert_eq!(configured.updated_by, "bob");
    assert_eq!(store.get_policy("b", "p").await.unwrap(), configured);

    // Metadata alone is a change too.
    let labelled = PolicyWrite {
        metadata_json: r#"{"labels":{"team":"a"},"annotations":{}}"#.into(),
        ..policy_write("b", "p", spec2)
    };
    let (relabelled, action) = store.put_policy(labelled, "carol").await.unwrap();
    assert_eq!(action, WriteAction::Configured);
    assert_ne!(relabelled.etag, configured.etag);

    put(&store, "b", "a-first", spec1, "alice").await;
    let names: Vec<String> = store
        .list_policies("b")
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["a-first", "p"]);
    assert_not_found(store.list_policies("nope").await);
    assert_not_found(store.get_policy("b", "nope").await);
    assert_not_found(
        store
            .put_policy(policy_write("nope", "p", spec1), "alice")
            .await,
    );

    let history = store.policy_history("b", "p", None, 1000).await.unwrap();
    let summary: Vec<(&str, Option<&str>, Option<&str>)> = history
        .iter()
        .map(|h| {
            (
                h.actor.as_str(),
                h.before_json.as_deref(),
                h.after_json.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("alice", None, Some(spec1)),
            ("bob", Some(spec1), Some(spec2)),
            ("carol", Some(spec2), Some(spec2)),
        ]
    );
    assert!(history.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(history[0].at, created.updated_at);
    assert_eq!(history[1].at, configured.updated_at);

    store.delete_policy("b", "p", None, "dave").await.unwrap();
    assert_not_found(store.get_policy("b", "p").await);
    assert_not_found(store.delete_policy("b", "p", None, "dave").await);
    assert_not_found(store.delete_policy("nope", "p", None, "dave").await);
    let history = store.policy_history("b", "p", None, 1000).await.unwrap();
    assert_eq!(history.len(), 4);
    assert_eq!(history[3].actor, "dave");
    assert_eq!(history[3].before_json.as_deref(), Some(spec2));
    assert_eq!(history[3].after_json, None);
    assert_not_found(store.policy_history("b", "never", None, 1000).await);

    let changes = store.list_changes("b").await.unwrap();
    assert_eq!(
        kinds(&changes),
        [
            ("policy.put", "p"),
            ("policy.put", "p"),
            ("policy.put", "p"),
            ("policy.put", "a-first"),
            ("policy.delete", "p"),
        ]
    );
    assert_eq!(changes[0].body_json.as_deref(), Some(spec1));
    assert_eq!(changes[1].body_json.as_deref(), Some(spec2));
    assert_eq!(changes[4].body_json, None);
}

/// Every change makes a version (SPEC 8): on the policy, on each history entry that saved a
/// spec, and numbered on after a deletion; the spec of each version is read back.
pub async fn policy_versions(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let spec = |n: u32| format!(r#"{{"n":{n}}}"#);
    let version = |store: &palisade_store::SharedStore, n: u32| {
        let store = store.clone();
        let spec = spec(n);
        async move {
            let (record, _) = put(&store, "b", "p", &spec, "alice").await;
            record.version
        }
    };
    assert_eq!(version(&store, 1).await, 1);
    assert_eq!(version(&store, 2).await, 2);
    // Unchanged content makes no version.
    assert_eq!(version(&store, 2).await, 2);
    // A rollback's entry names the version it restored.
    let (restored, _) = store
        .put_policy(
            PolicyWrite {
                restores: Some(1),
                ..policy_write("b", "p", &spec(1))
            },
            "alice",
        )
        .await
        .unwrap();
    assert_eq!(restored.version, 3);
    assert_eq!(store.get_policy("b", "p").await.unwrap().version, 3);
    assert_eq!(store.list_policies("b").await.unwrap()[0].version, 3);
    // Another policy numbers on its own.
    let (other, _) = put(&store, "b", "q", &spec(9), "alice").await;
    assert_eq!(other.version, 1);

    store.delete_policy("b", "p", None, "bob").await.unwrap();
    assert_eq!(version(&store, 4).await, 4);
    let versions: Vec<Option<i64>> = store
        .policy_history("b", "p", None, 100)
        .await
        .unwrap()
        .iter()
        .map(|h| h.version)
        .collect();
    assert_eq!(versions, [Some(1), Some(2), Some(3), None, Some(4)]);
    let restored: Vec<Option<i64>> = store
        .policy_history("b", "p", None, 100)
        .await
        .unwrap()
        .iter()
        .map(|h| h.restored_version)
        .collect();
    assert_eq!(restored, [None, None, Some(1), None, None]);

    for (n, expected) in [(1, Some(spec(1))), (2, Some(spec(2))), (3, Some(spec(1)))] {
        assert_eq!(
            store.policy_version_spec("b", "p", n).await.unwrap(),
            expected,
            "version {n}"
        );
    }
    assert_eq!(store.policy_version_spec("b", "p", 5).await.unwrap(), None);
    assert_eq!(store.policy_version_spec("b", "p", 0).await.unwrap(), None);
    assert_eq!(
        store.policy_version_spec("b", "nope", 1).await.unwrap(),
        None
    );
}

pub async fn policy_if_match(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let v1 = r#"{"v":1}"#;
    let v2 = r#"{"v":2}"#;

    // If-Match on a policy that does not exist.
    assert_precondition_failed(
        store
            .put_policy(with_if_match(policy_write("b", "p", v1), "*"), "a")
            .await,
    );
    let (p1, _) = put(&store, "b", "p", v1, "a").await;

    assert_precondition_failed(
        store
            .put_policy(with_if_match(policy_write("b", "p", v2), "stale"), "a")
            .await,
    );
    assert_eq!(store.get_policy("b", "p").await.unwrap(), p1);
    assert_eq!(
        store
            .policy_history("b", "p", None, 1000)
            .await
            .unwrap()
            .len(),
        1
    );

    // Quoted, weak and bare forms of the etag all match.
    let quoted = format!("\"{}\"", p1.etag);
    let (p2, action) = store
        .put_policy(with_if_match(policy_write("b", "p", v2), &quoted), "a")
        .await
        .unwrap();
    assert_eq!(action, WriteAction::Configured);
    let weak = format!("W/\"{}\"", p2.etag);
    let (_, action) = store
        .put_policy(with_if_match(policy_write("b", "p", v2), &weak), "a")
        .await
        .unwrap();
    assert_eq!(action, WriteAction::Unchanged);

    assert_precondition_failed(store.delete_policy("b", "p", Some(&p1.etag), "a").await);
    assert_eq!(store.get_policy("b", "p").await.unwrap(), p2);
    store
        .delete_policy("b", "p", Some(&p2.etag), "a")
        .await
        .unwrap();
    assert_not_found(store.get_policy("b", "p").await);
}

pub async fn apply_policies_is_all_or_nothing(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b1", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    let (existing, _) = put(&store, "b1", "keep", r#"{"v":1}"#, "a").await;
    let changes_before = store.list_changes("b1").await.unwrap();

    // A bad If-Match last: the valid writes before it are not kept.
    let result = store
        .apply_policies(
            vec![
                policy_write("b1", "new", r#"{"v":1}"#),
                policy_write("b2", "other", r#"{"v":1}"#),
                with_if_match(policy_write("b1", "keep", r#"{"v":2}"#), "wrong"),
            ],
            "a",
        )
        .await;
    assert_precondition_failed(result);

    // An unknown boundary anywhere: nothing is written either.
    let result = store
        .apply_policies(
            vec![
                policy_write("b1", "new", r#"{"v":1}"#),
                policy_write("nope", "x", r#"{"v":1}"#),
            ],
            "a",
        )
        .await;
    assert_not_found(result);

    assert_eq!(store.list_policies("b1").await.unwrap(), [existing]);
    assert!(store.list_policies("b2").await.unwrap().is_empty());
    assert_eq!(store.list_changes("b1").await.unwrap(), changes_before);
    assert!(store.list_changes("b2").await.unwrap().is_empty());
    assert_not_found(store.policy_history("b1", "new", None, 1000).await);
    assert_not_found(store.policy_history("b2", "other", None, 1000).await);
    assert_eq!(
        store
            .policy_history("b1", "keep", None, 1000)
            .await
            .unwrap()
            .len(),
        1
    );
}

pub async fn apply_policies_in_order(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b1", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    let (keep, _) = put(&store, "b1", "keep", r#"{"v":1}"#, "a").await;
    let (edit, _) = put(&store, "b1", "edit", r#"{"v":1}"#, "a").await;

    // Boundaries out of name order, one policy written twice.
    let results = store
        .apply_policies(
            vec![
                policy_write("b2", "new", r#"{"v":1}"#),
                policy_write("b1", "keep", r#"{"v":1}"#),
                with_if_match(policy_write("b1", "edit", r#"{"v":2}"#), &edit.etag),
                policy_write("b1", "edit", r#"{"v":3}"#),
            ],
            "bob",
        )
        .await
        .unwrap();
    let actions: Vec<WriteAction> = results.iter().map(|(_, a)| *a).collect();
    assert_eq!(
        actions,
        [
            WriteAction::Created,
            WriteAction::Unchanged,
            WriteAction::Configured,
            WriteAction::Configured,
        ]
    );
    assert_eq!(results[1].0, keep);
    assert_eq!(
        store.get_policy("b1", "edit").await.unwrap().spec_json,
        r#"{"v":3}"#
    );
    assert_eq!(store.get_policy("b2", "new").await.unwrap(), results[0].0);
    assert_eq!(
        store
            .policy_history("b1", "edit", None, 1000)
            .await
            .unwrap()
            .len(),
        3
    );
    assert_eq!(
        kinds(&store.list_changes("b1").await.unwrap()),
        [
            ("policy.put", "keep"),
            ("policy.put", "edit"),
            ("policy.put", "edit"),
            ("policy.put", "edit"),
        ]
    );
    assert!(store
        .apply_policies(Vec::new(), "a")
        .await
        .unwrap()
        .is_empty());
}

/// A policy's rollout (SPEC 8): a save decides it from the policy as stored before, inside the
/// save's transaction; a promotion or an abort sets it for the version and the rollout it read
/// only, records a change and, with an event, an entry of the history (the spec unchanged, no
/// new version); a save without one clears it.
pub async fn policy_rollouts(db: TestDb) {
    use palisade_store::RolloutMove;
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    put(&store, "b", "p", r#"{"n":1}"#, "alice").await;
    let seen = Arc::new(Mutex::new(None));
    let saw = seen.clone();
    let decide = move |before: Option<&PolicyRecord>, version: i64| {
        *saw.lock().unwrap() = before.map(|b| (b.version, b.spec_json.clone()));
        Some(format!(r#"{{"version":{version}}}"#))
    };
    let write = PolicyWrite {
        rollout: Some(palisade_store::RolloutDecision(Arc::new(decide))),
        ..policy_write("b", "p", r#"{"n":2}"#)
    };
    let (saved, _) = store.put_policy(write, "alice").await.unwrap();
    assert_eq!(*seen.lock().unwrap(), Some((1, r#"{"n":1}"#.to_owned())));
    assert_eq!(saved.rollout_json.as_deref(), Some(r#"{"version":2}"#));
    assert_eq!(store.get_policy("b", "p").await.unwrap(), saved);

    let changes_before = store.list_changes("b").await.unwrap().len();
    let mv =
        |version: i64, expected: Option<&'static str>, event: Option<&'static str>| RolloutMove {
            version,
            expected,
            rollout_json: Some(r#"{"stage":1}"#),
            event,
            actor: "alice",
        };
    assert!(matches!(
        store
            .set_policy_rollout("b", "p", mv(1, Some(r#"{"version":2}"#), None))
            .await,
        Err(StoreError::PreconditionFailed)
    ));
    assert!(matches!(
        store
            .set_policy_rollout("b", "p", mv(2, Some(r#"{"version":1}"#), None))
            .await,
        Err(StoreError::PreconditionFailed)
    ));
    assert_not_found(store.set_policy_rollout("b", "q", mv(2, None, None)).await);
    let event = "rollout of version 2 promoted to stage 2/3";
    let promoted = store
        .set_policy_rollout("b", "p", mv(2, Some(r#"{"version":2}"#), Some(event)))
        .await
        .unwrap();
    assert_eq!(promoted.rollout_json.as_deref(), Some(r#"{"stage":1}"#));
    assert_eq!(store.get_policy("b", "p").await.unwrap(), promoted);
    let changes = store.list_changes("b").await.unwrap();
    assert_eq!(changes.len(), changes_before + 1);
    let last = changes.last().unwrap();
    assert_eq!(
        (last.kind.as_str(), last.subject.as_str()),
        ("policy.rollout", "p")
    );

    // The move is an entry of the history: the spec unchanged, the version, what happened.
    let history = store.policy_history("b", "p", None, 100).await.unwrap();
    let last = history.last().unwrap();
    assert_eq!(
        (last.version, last.event.as_deref(), last.actor.as_str()),
        (Some(2), Some(event), "alice")
    );
    assert_eq!(last.before_json, last.after_json);
    assert_eq!(last.after_json.as_deref(), Some(r#"{"n":2}"#));
    let (plain, _) = put(&store, "b", "p", r#"{"n":3}"#, "alice").await;
    assert_eq!(plain.rollout_json, None);
    assert_eq!(plain.version, 3, "a rollout's move makes no version");
}
