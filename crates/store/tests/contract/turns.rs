//! A fair share of the writer per boundary (issue 42, item 8): a boundary that has many
//! writes queued holds up another boundary's write by at most one turn.

use crate::support::*;

/// Writes of `a` queued behind a write of `a` that holds its turn, then a create of `b`: once
/// the held write ends, `b`'s create commits after at most one of `a`'s queued writes (one
/// turn of `a`), where first come first served would commit all 20 first. On SQLite the held
/// write holds the one writer; on PostgreSQL it holds `a`'s row (`FOR SHARE`), which each
/// policy write of `a` waits for with a connection of the pool, so there `b`'s create commits
/// before any of them. Orders are read from the change log's one sequence: nothing here is
/// timed.
pub async fn a_boundarys_queue_holds_up_another_boundarys_write_by_one_turn(db: TestDb) {
    const QUEUED: usize = 20;
    let store = db.connect().await;
    store.create_boundary("a", None).await.unwrap();
    store.create_boundary("b", None).await.unwrap();

    // A create of `a` whose guard waits until told, inside its transaction and turn.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let holding = Arc::new(AtomicBool::new(false));
    let guard: Guard = Box::new({
        let holding = Arc::clone(&holding);
        move |_: &[PolicyRecord]| {
            holding.store(true, Ordering::SeqCst);
            // Waits until the test lets go, handing this worker's other tasks to a thread of
            // their own meanwhile.
            let _ = tokio::task::block_in_place(|| gate.recv());
            Ok(())
        }
    });
    let held = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            store
                .create_resource(new_resource("a", "db", "held", "{}"), Some(guard), None)
                .await
        }
    });
    while !holding.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // `a` queues many writes, then `b` one.
    let mut queued = Vec::new();
    for n in 0..QUEUED {
        let store = Arc::clone(&store);
        queued.push(tokio::spawn(async move {
            store
                .put_policy(policy_write("a", &format!("p{n}"), "{}"), "a's admin")
                .await
        }));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let b = tokio::spawn({
        let store = Arc::clone(&store);
        async move {
            store
                .create_resource(new_resource("b", "db", "r", "{}"), None, None)
                .await
        }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;

    release.send(()).unwrap();
    held.await.unwrap().unwrap();
    b.await.unwrap().unwrap();
    for write in queued {
        write.await.unwrap().unwrap();
    }

    let b_seq = store.list_changes("b").await.unwrap()[0].seq;
    let a = store.list_changes("a").await.unwrap();
    assert_eq!(a.len(), QUEUED + 1, "{:?}", kinds(&a));
    let before_b: Vec<_> = a
        .iter()
        .filter(|c| c.kind == "policy.put" && c.seq < b_seq)
        .map(|c| c.subject.as_str())
        .collect();
    assert!(
        before_b.len() <= 1,
        "b's create waited for {} queued writes of a: {before_b:?}",
        before_b.len()
    );
}
