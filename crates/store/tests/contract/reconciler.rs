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
    store
        .put_policy(policy_write("b", "p", r#"{"rules":[]}"#), "t")
        .await
        .unwrap();
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

/// PostgreSQL: one lease per installation (an advisory lock); SQLite: one per file (a file
/// holds one installation), so a second store on the file stands by whatever it asks for.
pub async fn one_lease_per_installation(db: TestDb) {
    let store = db.connect().await;
    let first = store.try_lease("i1").await.unwrap();
    assert!(first.is_some());
    assert!(first.as_ref().unwrap().held().await);
    let replica = db.connect().await;
    let second = replica.try_lease("i1").await.unwrap();
    assert!(second.is_none(), "a second replica must stand by");
    let other = replica.try_lease("i2").await.unwrap();
    if store.backend() == "postgres" {
        assert!(
            other.is_some(),
            "another installation has a lease of its own"
        );
    } else {
        assert!(other.is_none(), "one reconciler per SQLite file");
    }
    drop(first);
    // The lock goes with the lease's connection (PostgreSQL) or file handle (SQLite).
    let mut taken = None;
    for _ in 0..50 {
        taken = replica.try_lease("i1").await.unwrap();
        if taken.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(taken.is_some(), "the lease is free once its holder is gone");
}
