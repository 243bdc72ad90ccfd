//! The committed-change log: one sequence across boundaries.

use crate::support::*;

pub async fn changes_share_one_sequence(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b1", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    let k = key("b1", "db", "r");

    put(&store, "b1", "p", r#"{"v":1}"#, "a").await;
    store
        .create_resource(new_resource("b1", "db", "r", r#"{"v":1}"#), None, None)
        .await
        .unwrap();
    put(&store, "b2", "q", r#"{"v":1}"#, "a").await;
    store
        .update_resource(&k, None, editor(r#"{"v":2}"#, None), None)
        .await
        .unwrap();
    put(&store, "b1", "p", r#"{"v":2}"#, "a").await;
    store.delete_resource(&k, None).await.unwrap();
    store.delete_policy("b1", "p", None, "a").await.unwrap();

    let b1 = store.list_changes("b1").await.unwrap();
    assert_eq!(
        kinds(&b1),
        [
            ("policy.put", "p"),
            ("resource.create", "db/r"),
            ("resource.update", "db/r"),
            ("policy.put", "p"),
            ("resource.delete", "db/r"),
            ("policy.delete", "p"),
        ]
    );
    let bodies: Vec<Option<&str>> = b1.iter().map(|c| c.body_json.as_deref()).collect();
    assert_eq!(
        bodies,
        [
            Some(r#"{"v":1}"#),
            Some(r#"{"v":1}"#),
            Some(r#"{"v":2}"#),
            Some(r#"{"v":2}"#),
            None,
            None,
        ]
    );
    assert!(b1.iter().all(|c| c.boundary == "b1"));
    assert!(b1.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(b1.windows(2).all(|w| w[0].at <= w[1].at));

    let b2 = store.list_changes("b2").await.unwrap();
    assert_eq!(kinds(&b2), [("policy.put", "q")]);
    // One sequence for the store: b2's change sits between b1's second and third.
    assert!(b1[1].seq < b2[0].seq && b2[0].seq < b1[2].seq);
    assert!(store.list_changes("nope").await.unwrap().is_empty());
}

/// History retention prunes the oldest rows first, in batches, and nothing newer.
pub async fn history_is_pruned_oldest_first_in_batches(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    for version in 0..5 {
        store
            .put_policy(
                policy_write("b", "p", &format!(r#"{{"v":{version}}}"#)),
                "a",
            )
            .await
            .unwrap();
    }
    // Nothing is older than the distant past.
    assert_eq!(
        store
            .prune_history("2000-01-01T00:00:00.000Z", 2)
            .await
            .unwrap(),
        0
    );
    let cutoff = palisade_store::now();
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    put(&store, "b", "p", r#"{"v":99}"#, "a").await;
    // 5 history rows and 5 change rows are older than the cutoff: 2 of each per call.
    let mut calls = Vec::new();
    loop {
        let deleted = store.prune_history(&cutoff, 2).await.unwrap();
        calls.push(deleted);
        if deleted == 0 {
            break;
        }
    }
    assert_eq!(calls, [4, 4, 2, 0]);
    let history = store.policy_history("b", "p", None, 1000).await.unwrap();
    assert_eq!(history.len(), 1, "the newest entry stays");
    assert_eq!(history[0].after_json.as_deref(), Some(r#"{"v":99}"#));
    let changes = store.list_changes("b").await.unwrap();
    assert_eq!(changes.len(), 1);
}

fn exception(name: &str, spec: &str) -> palisade_store::ExceptionWrite {
    palisade_store::ExceptionWrite {
        boundary: "b".into(),
        name: name.into(),
        policy: "p".into(),
        spec_json: spec.into(),
        expires_at: "2099-01-31T00:00:00.000Z".into(),
        approve: true,
        if_match: None,
        create_only: false,
        max_per_boundary: 100,
        max_requests_per_boundary: 20,
    }
}

/// SPEC 7 v3.2: an exception's history is pruned like a policy's, and however old, the newest
/// entry of each policy and each exception stays (a live object's history never answers
/// `NotFound`); a history is read a page at a time.
pub async fn history_keeps_each_newest_entry_and_reads_pages(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    for version in 0..3 {
        let spec = format!(r#"{{"v":{version}}}"#);
        for name in ["p", "q"] {
            put(&store, "b", name, &spec, "a").await;
        }
        for name in ["x", "y"] {
            store
                .put_exception(exception(name, &spec), "a")
                .await
                .unwrap();
        }
    }
    // Pages: two entries, then the one after the last of them.
    let first = store.policy_history("b", "p", None, 2).await.unwrap();
    assert_eq!(first.len(), 2);
    let rest = store
        .policy_history("b", "p", Some(first[1].seq), 2)
        .await
        .unwrap();
    let bodies: Vec<Option<&str>> = rest.iter().map(|e| e.after_json.as_deref()).collect();
    assert_eq!(bodies, [Some(r#"{"v":2}"#)]);
    let none = store
        .policy_history("b", "p", Some(rest[0].seq), 2)
        .await
        .unwrap();
    assert!(none.is_empty(), "past the last page: an empty page");
    let first = store.exception_history("b", "x", None, 1).await.unwrap();
    assert_eq!(first.len(), 1);
    let rest = store
        .exception_history("b", "x", Some(first[0].seq), 10)
        .await
        .unwrap();
    assert_eq!(rest.len(), 2);

    // Everything is older than the cutoff: all but the newest entry of each goes.
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let cutoff = palisade_store::now();
    while store.prune_history(&cutoff, 3).await.unwrap() > 0 {}
    for name in ["p", "q"] {
        let history = store.policy_history("b", name, None, 100).await.unwrap();
        let bodies: Vec<Option<&str>> = history.iter().map(|e| e.after_json.as_deref()).collect();
        assert_eq!(bodies, [Some(r#"{"v":2}"#)], "policy {name}");
    }
    for name in ["x", "y"] {
        let history = store.exception_history("b", name, None, 100).await.unwrap();
        let bodies: Vec<Option<&str>> = history.iter().map(|e| e.after_json.as_deref()).collect();
        assert_eq!(bodies, [Some(r#"{"v":2}"#)], "exception {name}");
    }
    assert!(store.list_changes("b").await.unwrap().is_empty());
}
