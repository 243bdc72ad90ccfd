//! The reconciler's state: the installation id, wake-ups, the lease.

use crate::support::*;

pub async fn installation_id_is_made_once(db: TestDb) {
    let store = db.connect().await;
    assert_eq!(store.installation_id("first").await.unwrap(), "first");
    assert_eq!(store.installation_id("second").await.unwrap(), "first");
    let again = db.connect().await;
    assert_eq!(again.installation_id("third").await.unwrap(), "first");
}

/// Waits until the counter moves past `seen` (at most 10 s); the new value.
pub async fn next_change(changes: &mut tokio::sync::watch::Receiver<u64>) -> u64 {
    tokio::time::timeout(Duration::from_secs(10), changes.changed())
        .await
        .expect("a change arrives within 10 s")
        .unwrap();
    *changes.borrow_and_update()
}

pub async fn changes_wake_subscribers(db: TestDb) {
    let store = db.connect().await;
    let mut changes = store.subscribe().await.unwrap();
    if store.backend() == "postgres" {
        // The listener's first connection bumps it once.
        next_change(&mut changes).await;
    }
    store.create_boundary("b", None).await.unwrap();
    put(&store, "b", "p", r#"{"rules":[]}"#, "t").await;
    next_change(&mut changes).await;
    // A second store on the same database (another replica) hears it too on PostgreSQL.
    if store.backend() == "postgres" {
        let replica = db.connect().await;
        let mut heard = replica.subscribe().await.unwrap();
        next_change(&mut heard).await;
        store.delete_policy("b", "p", None, "t").await.unwrap();
        next_change(&mut heard).await;
    }
    // Refused writes wake nobody.
    let before = *changes.borrow_and_update();
    assert!(store.delete_policy("b", "nope", None, "t").await.is_err());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = *changes.borrow_and_update();
    if store.backend() == "sqlite" {
        assert_eq!(before, after);
    }
}

/// PostgreSQL: every replica joins the installation's fleet, and each cluster is held by one
/// of them at a time, shown as its holder; what a replica held is free once it is gone.
/// SQLite: one process per file joins (a file holds one installation) and holds every
/// cluster it asks for.
pub async fn one_holder_per_cluster(db: TestDb) {
    let store = db.connect().await;
    let first = store.join_fleet("i1", "first").await.unwrap().unwrap();
    assert!(first.held().await);
    assert!(first.try_hold("c1").await.unwrap());
    assert!(
        first.try_hold("c1").await.unwrap(),
        "holding twice is holding"
    );
    let replica = db.connect().await;
    let second = replica.join_fleet("i1", "second").await.unwrap();
    if store.backend() == "sqlite" {
        assert!(second.is_none(), "one reconciler per SQLite file");
        let other = replica.join_fleet("i2", "second").await.unwrap();
        assert!(other.is_none(), "one reconciler per SQLite file");
        return;
    }
    let second = second.expect("every replica joins");
    let members = second.members().await.unwrap();
    assert_eq!(members.len(), 2, "{members:?}");
    assert!(members.iter().any(|m| m == first.me()));
    assert!(members.iter().any(|m| m == second.me()));
    assert!(first.me().starts_with("first#"), "{}", first.me());
    assert!(
        !second.try_hold("c1").await.unwrap(),
        "one holder per cluster"
    );
    assert!(second.try_hold("c2").await.unwrap());
    // Another installation: a fleet and clusters of its own.
    let other = replica.join_fleet("i2", "second").await.unwrap().unwrap();
    assert_eq!(other.members().await.unwrap(), [other.me().to_owned()]);
    assert!(other.try_hold("c1").await.unwrap());
    drop(other);

    // Holders of clusters the store knows, by replica name.
    let sealed = b"sealed".to_vec();
    for name in ["c1", "c2", "c3"] {
        store.put_cluster(name, &sealed, None).await.unwrap();
    }
    let holders = store.cluster_holders("i1").await.unwrap();
    assert_eq!(
        holders.into_iter().collect::<Vec<_>>(),
        [
            ("c1".to_owned(), "first".to_owned()),
            ("c2".to_owned(), "second".to_owned())
        ]
    );
    // Given up: free for the other.
    second.release("c2").await.unwrap();
    assert!(!second.holds("c2"));
    assert!(first.try_hold("c2").await.unwrap());

    drop(first);
    // The locks go with the lease's connection.
    let mut taken = false;
    for _ in 0..50 {
        taken = second.try_hold("c1").await.unwrap();
        if taken {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(taken, "a cluster is free once its holder is gone");
    assert!(second.try_hold("c2").await.unwrap());
    assert_eq!(second.members().await.unwrap(), [second.me().to_owned()]);
    for name in ["c1", "c2", "c3"] {
        store.delete_cluster(name).await.unwrap();
    }
}

/// The encryption key's check value is recorded once, by the first start.
pub async fn the_encryption_key_check_is_made_once(db: TestDb) {
    let store = db.connect().await;
    assert_eq!(store.encryption_key_check(None).await.unwrap(), None);
    let k1 = Some("k1".to_owned());
    assert_eq!(store.encryption_key_check(Some("k1")).await.unwrap(), k1);
    assert_eq!(store.encryption_key_check(Some("k2")).await.unwrap(), k1);
    assert_eq!(store.encryption_key_check(None).await.unwrap(), k1);
    let again = db.connect().await;
    assert_eq!(again.encryption_key_check(Some("k3")).await.unwrap(), k1);
    // Replaced on purpose (a new key).
    again.replace_encryption_key_check("k4").await.unwrap();
    assert_eq!(
        store.encryption_key_check(Some("k5")).await.unwrap(),
        Some("k4".to_owned())
    );
    // Beside the installation id, not in its place.
    assert_eq!(store.installation_id("id").await.unwrap(), "id");
}
