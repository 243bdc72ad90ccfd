//! Guarded writes under pressure: a race against policy changes, and deadlines.

use crate::support::*;

/// The race the guard exists for: creates checked against a policy that keeps flipping
/// between allow and deny. Replaying the committed changes proves that every create was
/// checked against the latest policy committed before it, and none passed a deny.
pub async fn guarded_creates_race_policy_changes(db: TestDb) {
    const TASKS: usize = 8;
    const CREATES: usize = 200;
    let store = db.connect().await;
    store.create_boundary("race", None).await.unwrap();
    let gate = |n: u64| {
        policy_write(
            "race",
            "gate",
            &format!(r#"{{"allow":{},"n":{n}}}"#, n.is_multiple_of(2)),
        )
    };
    store.put_policy(gate(0), "flipper").await.unwrap();

    let done = Arc::new(AtomicBool::new(false));
    let flipper = {
        let store = Arc::clone(&store);
        let done = Arc::clone(&done);
        tokio::spawn(async move {
            let mut n = 0;
            while !done.load(Ordering::SeqCst) && n < 100_000 {
                n += 1;
                store.put_policy(gate(n), "flipper").await.unwrap();
                // A pause, so that on SQLite the creators' busy handler finds the lock free.
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            n
        })
    };

    let creators: Vec<_> = (0..TASKS)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                // Resource name → the policy counter its guard saw.
                let mut passed = HashMap::new();
                let mut vetoed = 0;
                for i in 0..CREATES {
                    let name = format!("t{task}-{i}");
                    let resource = new_resource("race", "svc", &name, "{}");
                    let saw = Arc::new(Mutex::new(None));
                    match store
                        .create_resource(resource, Some(gate_guard(&saw)), None)
                        .await
                    {
                        Ok(_) => {
                            let n = saw.lock().unwrap().expect("the guard allowed at a counter");
                            passed.insert(format!("svc/{name}"), n);
                        }
                        Err(StoreError::Vetoed(_)) => vetoed += 1,
                        Err(other) => panic!("create {name}: {other:?}"),
                    }
                }
                (passed, vetoed)
            })
        })
        .collect();

    let mut passed = HashMap::new();
    let mut vetoed = 0;
    for creator in creators {
        let (p, v) = creator.await.unwrap();
        passed.extend(p);
        vetoed += v;
    }
    done.store(true, Ordering::SeqCst);
    let flips = flipper.await.unwrap();
    eprintln!(
        "{flips} policy flips, {} creates passed, {vetoed} vetoed",
        passed.len()
    );
    assert_eq!(passed.len() + vetoed, TASKS * CREATES);
    assert!(
        flips > 0 && !passed.is_empty() && vetoed > 0,
        "no race happened: {flips} flips, {} passed, {vetoed} vetoed",
        passed.len()
    );

    // Replay: the latest policy committed before each create must allow it, and be the very
    // version its guard saw.
    let mut latest: Option<(bool, u64)> = None;
    let mut creates = 0;
    for change in store.list_changes("race").await.unwrap() {
        match change.kind.as_str() {
            "policy.put" => {
                let spec: serde_json::Value =
                    serde_json::from_str(change.body_json.as_deref().unwrap()).unwrap();
                latest = Some((
                    spec["allow"].as_bool().unwrap(),
                    spec["n"].as_u64().unwrap(),
                ));
            }
            "resource.create" => {
                creates += 1;
                let (allow, n) = latest.expect("a create before any policy");
                assert!(allow, "{} committed while gate {n} denied", change.subject);
                assert_eq!(
                    passed.get(&change.subject),
                    Some(&n),
                    "{} was checked against another version than the latest (gate {n})",
                    change.subject
                );
            }
            other => panic!("unexpected change {other}"),
        }
    }
    assert_eq!(creates, passed.len());
}

/// Allows when the `gate` policy says `"allow": true`, and leaves its counter `n` in `saw`,
/// so the test knows which version each create was checked against.
pub fn gate_guard(saw: &Arc<Mutex<Option<u64>>>) -> Guard {
    let saw = Arc::clone(saw);
    Box::new(move |policies: &[PolicyRecord]| -> Result<(), Veto> {
        let gate = policies
            .iter()
            .find(|p| p.name == "gate")
            .ok_or("no gate policy")?;
        let spec: serde_json::Value = serde_json::from_str(&gate.spec_json)?;
        let n = spec["n"].as_u64().ok_or("no counter")?;
        if spec["allow"] == serde_json::Value::Bool(true) {
            *saw.lock().unwrap() = Some(n);
            Ok(())
        } else {
            Err(format!("denied by gate {n}").into())
        }
    })
}

/// A guarded write whose deadline passes before its commit is `Timeout` and writes nothing,
/// whichever step ran late (the write lock, the guard); with time left it commits as usual.
pub async fn a_deadline_passed_before_the_commit_writes_nothing(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let exists = |name: &'static str| {
        let store = store.clone();
        async move {
            match store.get_resource(&key("b", "db", name)).await {
                Ok(_) => true,
                Err(StoreError::NotFound) => false,
                Err(other) => panic!("{other}"),
            }
        }
    };
    let past = std::time::Instant::now();
    let slow_guard = |sleep: Duration| -> Guard {
        Box::new(move |_: &[PolicyRecord]| {
            std::thread::sleep(sleep);
            Ok(())
        })
    };

    // Already past: nothing is tried.
    let result = store
        .create_resource(new_resource("b", "db", "late", "{}"), None, Some(past))
        .await;
    assert!(matches!(result, Err(StoreError::Timeout)), "{result:?}");
    // The guard runs past the deadline: the write is rolled back.
    let soon = std::time::Instant::now() + Duration::from_millis(100);
    let result = store
        .create_resource(
            new_resource("b", "db", "slow", "{}"),
            Some(slow_guard(Duration::from_millis(300))),
            Some(soon),
        )
        .await;
    assert!(matches!(result, Err(StoreError::Timeout)), "{result:?}");
    assert!(!exists("late").await);
    assert!(!exists("slow").await);

    // With time left, the same writes commit.
    let later = std::time::Instant::now() + Duration::from_secs(5);
    let record = store
        .create_resource(
            new_resource("b", "db", "slow", r#"{"plan":"small"}"#),
            Some(slow_guard(Duration::from_millis(10))),
            Some(later),
        )
        .await
        .unwrap();
    assert!(exists("slow").await);

    // A plan move whose guard runs late leaves the resource as it was.
    let soon = std::time::Instant::now() + Duration::from_millis(100);
    let edit: Editor = {
        let guard = slow_guard(Duration::from_millis(300));
        Box::new(move |_| {
            Ok(Edit {
                body_json: r#"{"plan":"large"}"#.into(),
                guard: Some(guard),
                cluster: None,
                upload: None,
            })
        })
    };
    let result = store
        .update_resource(&key("b", "db", "slow"), None, edit, Some(soon))
        .await;
    assert!(matches!(result, Err(StoreError::Timeout)), "{result:?}");
    assert_eq!(
        store.get_resource(&key("b", "db", "slow")).await.unwrap(),
        record
    );
    let changes = store.list_changes("b").await.unwrap();
    assert_eq!(changes.len(), 1, "{changes:?}");
}

/// Edits of one resource running side by side lose nothing: each adds its own key to the
/// body it reads, and the last body holds every key (PostgreSQL: the row lock; the shared
/// boundary lock alone would let two edits read the same body).
pub async fn concurrent_edits_of_one_resource_lose_nothing(db: TestDb) {
    const TASKS: usize = 6;
    const EDITS: usize = 15;
    let store = db.connect().await;
    store.create_boundary("edits", None).await.unwrap();
    store
        .create_resource(new_resource("edits", "svc", "one", "{}"), None, None)
        .await
        .unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                for edit in 0..EDITS {
                    let adds: Editor = Box::new(move |current: &ResourceRecord| {
                        let mut body: serde_json::Map<String, serde_json::Value> =
                            serde_json::from_str(&current.body_json).unwrap();
                        body.insert(format!("t{task}-{edit}"), true.into());
                        Ok(Edit {
                            body_json: serde_json::Value::Object(body).to_string(),
                            guard: None,
                            cluster: None,
                            upload: None,
                        })
                    });
                    store
                        .update_resource(&key("edits", "svc", "one"), None, adds, None)
                        .await
                        .unwrap();
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap();
    }
    let last = store
        .get_resource(&key("edits", "svc", "one"))
        .await
        .unwrap();
    let body: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&last.body_json).unwrap();
    assert_eq!(body.len(), TASKS * EDITS, "lost edits: {}", last.body_json);
}

/// Creates of one name running side by side: exactly one is written, every other is a
/// conflict naming the resource.
pub async fn concurrent_creates_of_one_name_conflict(db: TestDb) {
    const TASKS: usize = 8;
    let store = db.connect().await;
    store.create_boundary("names", None).await.unwrap();
    let tasks: Vec<_> = (0..TASKS)
        .map(|task| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let body = format!(r#"{{"task":{task}}}"#);
                store
                    .create_resource(new_resource("names", "svc", "web", &body), None, None)
                    .await
            })
        })
        .collect();
    let mut written = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => written += 1,
            other => assert_conflict(other, "resource svc/web already exists"),
        }
    }
    assert_eq!(written, 1);
    let changes = store.list_changes("names").await.unwrap();
    assert_eq!(kinds(&changes), [("resource.create", "svc/web")]);
}

/// PostgreSQL: an open resource write (a transaction holding the boundary's row `FOR SHARE`,
/// as every create and plan move does until it commits) does not hold up another create of
/// the boundary, and does hold up a policy change until it commits.
pub async fn postgres_resource_writes_wait_for_policies_not_for_each_other(url: &str) {
    use sqlx::Connection;
    let store = palisade_store::connect(url).await.unwrap();
    store.create_boundary("shared", None).await.unwrap();
    let mut open = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("BEGIN").execute(&mut open).await.unwrap();
    sqlx::query("SELECT name FROM boundaries WHERE name = 'shared' FOR SHARE")
        .execute(&mut open)
        .await
        .unwrap();

    let create = store.create_resource(new_resource("shared", "svc", "a", "{}"), None, None);
    tokio::time::timeout(Duration::from_secs(5), create)
        .await
        .expect("a create does not wait for another resource write")
        .unwrap();

    let policy = {
        let store = Arc::clone(&store);
        tokio::spawn(async move {
            store
                .put_policy(policy_write("shared", "p", "{}"), "test")
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !policy.is_finished(),
        "a policy change must wait for the open resource write"
    );
    sqlx::query("COMMIT").execute(&mut open).await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), policy)
        .await
        .expect("the policy change goes on once the resource write commits")
        .unwrap()
        .unwrap();
}
