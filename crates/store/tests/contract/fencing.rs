//! Fencing (SPEC 4.3 v3.2): a lease query answers within `LEASE_QUERY_TIMEOUT` or the lease is
//! lost on the holder's side at once, long before the server ends the holder's session
//! (`LEASE_LIFETIME`) and another replica can take its clusters.

use std::time::Instant;

use palisade_store::{LEASE_CONFIRM_INTERVAL, LEASE_LIFETIME, LEASE_QUERY_TIMEOUT};
use palisade_testkit::stall::{socket_address, StallProxy};

use crate::support::*;

/// SQLite: one process holds every cluster; a fence holds until its cluster is given up.
/// PostgreSQL: see [`a_stalled_lease_stops_its_holder_before_another_takes_over`].
pub async fn a_fence_holds_while_its_cluster_is_held(db: TestDb) {
    if db.url.starts_with("postgres") {
        return a_stalled_lease_stops_its_holder_before_another_takes_over(db).await;
    }
    let store = db.connect().await;
    let lease = store.join_fleet("i1", "first").await.unwrap().unwrap();
    assert!(lease.try_hold("c1").await.unwrap());
    let fence = lease.fence("c1");
    fence.confirm().await.unwrap();
    assert!(lease.confirm("c1").await.unwrap());
    assert_eq!(lease.confirm_held().await.unwrap(), Default::default());
    lease.release("c1").await.unwrap();
    assert!(!fence.holds());
    fence.lost().await;
    assert!(matches!(
        fence.confirm().await,
        Err(StoreError::LeaseLost(_))
    ));
    // A fence outlived by its lease holds nothing.
    assert!(lease.try_hold("c2").await.unwrap());
    let fence = lease.fence("c2");
    drop(lease);
    assert!(!fence.holds());
    fence.lost().await;
    assert!(fence.confirm().await.is_err());
}

/// Replica A reaches PostgreSQL through a proxy; B directly. A holds c1 and c2; the proxy
/// then stalls (no byte passes either way, nothing is closed). A's next lease query fails
/// within the timeout: A holds nothing from then on, and its fences say so at once. Its
/// session, and so c1, stays locked on the server until the lease's lifetime has passed
/// without a word from A; only then does B take c1, well after A stopped writing. Meanwhile
/// C, whose connection does not stall and which confirms every second, keeps c3 past the
/// lifetime.
async fn a_stalled_lease_stops_its_holder_before_another_takes_over(db: TestDb) {
    let store = db.connect().await;
    let proxy = StallProxy::start(socket_address(&db.url)).await;
    let through = palisade_store::connect(&proxy.url(&db.url)).await.unwrap();
    let a = through.join_fleet("i1", "a").await.unwrap().unwrap();
    assert!(a.try_hold("c1").await.unwrap());
    assert!(a.try_hold("c2").await.unwrap());
    let fence = a.fence("c1");
    fence.confirm().await.unwrap();
    assert_eq!(a.confirm_held().await.unwrap(), Default::default());
    let b = store.join_fleet("i1", "b").await.unwrap().unwrap();
    let c = store.join_fleet("i1", "c").await.unwrap().unwrap();
    assert!(c.try_hold("c3").await.unwrap());
    assert!(!b.try_hold("c1").await.unwrap(), "A holds it");
    assert!(!b.try_hold("c3").await.unwrap(), "C holds it");

    proxy.stall();
    let stalled = Instant::now();
    let refused = fence.confirm().await;
    let stopped = stalled.elapsed();
    assert!(
        matches!(&refused, Err(StoreError::LeaseLost(reason)) if reason.contains("no answer")),
        "{refused:?}"
    );
    assert!(
        stopped >= LEASE_QUERY_TIMEOUT - Duration::from_millis(100)
            && stopped < LEASE_QUERY_TIMEOUT + Duration::from_secs(1),
        "{stopped:?}"
    );
    // Lost on A's side, for every cluster, at once; no query waits any more.
    assert!(!fence.holds());
    fence.lost().await;
    assert!(!a.fence("c2").holds());
    let lost = a.lost().expect("the lease is lost");
    assert_eq!(lost.clusters.into_iter().collect::<Vec<_>>(), ["c1", "c2"]);
    let quick = Instant::now();
    assert!(matches!(
        a.try_hold("c4").await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(matches!(a.members().await, Err(StoreError::LeaseLost(_))));
    assert!(matches!(
        a.confirm_held().await,
        Err(StoreError::LeaseLost(_))
    ));
    assert!(!a.held().await);
    assert!(quick.elapsed() < Duration::from_millis(100));

    // B takes c1 only once the server has ended A's idle session; C confirms meanwhile.
    let taken = loop {
        assert_eq!(c.confirm_held().await.unwrap(), Default::default());
        if b.try_hold("c1").await.unwrap() {
            break stalled.elapsed();
        }
        assert!(
            stalled.elapsed() < LEASE_LIFETIME + Duration::from_secs(10),
            "A's clusters are not free after {:?}",
            stalled.elapsed()
        );
        tokio::time::sleep(LEASE_CONFIRM_INTERVAL / 4).await;
    };
    eprintln!("A stopped after {stopped:?}; B took c1 after {taken:?}");
    // A last reached the server just before the stall, so the server kept A's session for
    // about the lifetime: B took c1 seconds after A had stopped, never in the same second.
    assert!(
        taken >= LEASE_LIFETIME - LEASE_CONFIRM_INTERVAL,
        "B took c1 {taken:?} after the stall"
    );
    assert!(
        taken >= stopped + Duration::from_secs(5),
        "{stopped:?} {taken:?}"
    );
    assert!(b.try_hold("c2").await.unwrap());
    assert_eq!(
        b.members().await.unwrap().len(),
        2,
        "B and C; A's session is gone"
    );
    // C confirmed every second: its session lives on past the lifetime, c3 with it.
    assert!(c.confirm("c3").await.unwrap());
    assert!(!b.try_hold("c3").await.unwrap());

    // The stall ends: A's side stays lost (it joins again on a new connection).
    proxy.resume();
    assert!(a.fence("c1").confirm().await.is_err());
    drop(a);
    let again = through.join_fleet("i1", "a").await.unwrap().unwrap();
    assert!(!again.try_hold("c1").await.unwrap(), "B holds it now");
}
