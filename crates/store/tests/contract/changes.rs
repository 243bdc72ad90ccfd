//! The committed-change log: one sequence across boundaries.

use crate::support::*;

pub async fn changes_share_one_sequence(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b1", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    let k = key("b1", "db", "r");

    store
        .put_policy(policy_write("b1", "p", r#"{"v":1}"#), "a")
        .await
        .unwrap();
    store
        .create_resource(new_resource("b1", "db", "r", r#"{"v":1}"#), None, None)
        .await
        .unwrap();
    store
        .put_policy(policy_write("b2", "q", r#"{"v":1}"#), "a")
        .await
        .unwrap();
    store
        .update_resource(&k, None, editor(r#"{"v":2}"#, None), None)
        .await
        .unwrap();
    store
        .put_policy(policy_write("b1", "p", r#"{"v":2}"#), "a")
        .await
        .unwrap();
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
