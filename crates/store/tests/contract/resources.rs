//! Resources: guarded creates, updates and plan moves, deletes, pages.

use crate::support::*;

pub async fn create_resource_with_guards(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store
        .put_policy(policy_write("b", "p2", "{}"), "a")
        .await
        .unwrap();
    store
        .put_policy(policy_write("b", "p1", "{}"), "a")
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));

    // A veto writes nothing.
    let result = store
        .create_resource(
            new_resource("b", "db", "denied", r#"{"plan":"large"}"#),
            Some(recording_guard(&seen, Err("plan large is not allowed"))),
            None,
        )
        .await;
    assert_vetoed(result, "plan large is not allowed");
    assert_not_found(store.get_resource(&key("b", "db", "denied")).await);
    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [vec!["p1".to_owned(), "p2".to_owned()]]
    );

    // A pass writes.
    let body = r#"{"plan":"small"}"#;
    let record = store
        .create_resource(
            new_resource("b", "db", "ok", body),
            Some(recording_guard(&seen, Ok(()))),
            None,
        )
        .await
        .unwrap();
    assert_eq!(record.boundary, "b");
    assert_eq!(record.resource_type, "db");
    assert_eq!(record.name, "ok");
    assert_eq!(record.body_json, body);
    assert_eq!(record.etag, etag_of(&[body]));
    assert_eq!(record.created_at, record.updated_at);
    assert_eq!(
        store.get_resource(&key("b", "db", "ok")).await.unwrap(),
        record
    );

    // Without a guard.
    store
        .create_resource(new_resource("b", "db", "unguarded", "{}"), None, None)
        .await
        .unwrap();

    let changes = store.list_changes("b").await.unwrap();
    let resource_changes: Vec<&ChangeRecord> = changes
        .iter()
        .filter(|c| c.kind.starts_with("resource."))
        .collect();
    assert_eq!(resource_changes.len(), 2);
    assert_eq!(resource_changes[0].kind, "resource.create");
    assert_eq!(resource_changes[0].subject, "db/ok");
    assert_eq!(resource_changes[0].body_json.as_deref(), Some(body));
    assert_eq!(resource_changes[0].at, record.created_at);
    assert_eq!(resource_changes[1].subject, "db/unguarded");
}

pub async fn create_resource_checks_before_the_guard(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store
        .create_resource(new_resource("b", "db", "taken", "{}"), None, None)
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));

    let result = store
        .create_resource(
            new_resource("b", "db", "taken", r#"{"other":1}"#),
            Some(counting_guard(&calls)),
            None,
        )
        .await;
    assert_conflict(result, "db/taken");
    let result = store
        .create_resource(
            new_resource("nope", "db", "x", "{}"),
            Some(counting_guard(&calls)),
            None,
        )
        .await;
    assert_not_found(result);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "the guard must not run");

    // The same name under another type is free.
    store
        .create_resource(
            new_resource("b", "cache", "taken", "{}"),
            Some(counting_guard(&calls)),
            None,
        )
        .await
        .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(
        store
            .get_resource(&key("b", "db", "taken"))
            .await
            .unwrap()
            .body_json,
        "{}"
    );
}

pub async fn update_resource(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let k = key("b", "db", "r");
    let original = store
        .create_resource(
            new_resource("b", "db", "r", r#"{"plan":"small"}"#),
            None,
            None,
        )
        .await
        .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));

    // The editor sees the current record; the edit's guard runs on the policies.
    let edited_from = Arc::new(Mutex::new(None));
    let from = Arc::clone(&edited_from);
    let guard = recording_guard(&seen, Ok(()));
    let edit: Editor = Box::new(move |current: &ResourceRecord| -> Result<Edit, Veto> {
        *from.lock().unwrap() = Some(current.clone());
        Ok(Edit {
            body_json: r#"{"plan":"medium"}"#.into(),
            guard: Some(guard),
            cluster: None,
            upload: None,
        })
    });
    let updated = store
        .update_resource(&k, Some(&original.etag), edit, None)
        .await
        .unwrap();
    assert_eq!(edited_from.lock().unwrap().as_ref(), Some(&original));
    assert_eq!(seen.lock().unwrap().len(), 1);
    assert_eq!(updated.body_json, r#"{"plan":"medium"}"#);
    assert_eq!(updated.etag, etag_of(&[r#"{"plan":"medium"}"#]));
    assert_eq!(updated.created_at, original.created_at);
    assert_eq!(store.get_resource(&k).await.unwrap(), updated);

    // A stale If-Match: the editor does not run.
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&calls);
    let edit: Editor = Box::new(move |_: &ResourceRecord| -> Result<Edit, Veto> {
        counted.fetch_add(1, Ordering::SeqCst);
        Ok(Edit {
            body_json: "{}".into(),
            guard: None,
            cluster: None,
            upload: None,
        })
    });
    assert_precondition_failed(
        store
            .update_resource(&k, Some(&original.etag), edit, None)
            .await,
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);

    // The editor refuses; the guard refuses: nothing changes.
    let refuse: Editor =
        Box::new(|_: &ResourceRecord| -> Result<Edit, Veto> { Err("not like that".into()) });
    assert_vetoed(
        store.update_resource(&k, None, refuse, None).await,
        "not like that",
    );
    let result = store
        .update_resource(
            &k,
            None,
            editor(
                r#"{"plan":"huge"}"#,
                Some(recording_guard(&seen, Err("huge is not allowed"))),
            ),
            None,
        )
        .await;
    assert_vetoed(result, "huge is not allowed");
    assert_eq!(store.get_resource(&k).await.unwrap(), updated);

    assert_not_found(
        store
            .update_resource(&key("b", "db", "nope"), None, editor("{}", None), None)
            .await,
    );
    assert_not_found(
        store
            .update_resource(&key("nope", "db", "r"), None, editor("{}", None), None)
            .await,
    );

    let changes = store.list_changes("b").await.unwrap();
    assert_eq!(
        kinds(&changes),
        [("resource.create", "db/r"), ("resource.update", "db/r")]
    );
    assert_eq!(
        changes[1].body_json.as_deref(),
        Some(r#"{"plan":"medium"}"#)
    );
    assert_eq!(changes[1].at, updated.updated_at);
}

pub async fn unchanged_body_writes_nothing(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let k = key("b", "db", "r");
    let original = store
        .create_resource(new_resource("b", "db", "r", r#"{"a":1}"#), None, None)
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let same = store
        .update_resource(
            &k,
            Some(&original.etag),
            editor(r#"{"a":1}"#, Some(counting_guard(&calls))),
            None,
        )
        .await
        .unwrap();
    assert_eq!(same, original);
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the guard still runs");
    assert_eq!(store.get_resource(&k).await.unwrap(), original);
    assert_eq!(
        kinds(&store.list_changes("b").await.unwrap()),
        [("resource.create", "db/r")]
    );
}

pub async fn delete_resource(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let k = key("b", "db", "r");
    let record = store
        .create_resource(new_resource("b", "db", "r", "{}"), None, None)
        .await
        .unwrap();
    assert_precondition_failed(store.delete_resource(&k, Some("other")).await);
    assert_eq!(store.get_resource(&k).await.unwrap(), record);
    store.delete_resource(&k, Some(&record.etag)).await.unwrap();
    assert_not_found(store.get_resource(&k).await);
    assert_not_found(store.delete_resource(&k, None).await);
    assert_not_found(store.delete_resource(&key("nope", "db", "r"), None).await);

    let changes = store.list_changes("b").await.unwrap();
    assert_eq!(
        kinds(&changes),
        [("resource.create", "db/r"), ("resource.delete", "db/r")]
    );
    assert_eq!(changes[1].body_json, None);

    // The name is free again.
    store
        .create_resource(new_resource("b", "db", "r", "{}"), None, None)
        .await
        .unwrap();
}

pub async fn pagination(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("other", None).await.unwrap();
    for (t, n) in [
        ("db", "r3"),
        ("db", "r1"),
        ("cache", "r9"),
        ("db", "r2"),
        ("cache", "r0"),
    ] {
        store
            .create_resource(new_resource("b", t, n, "{}"), None, None)
            .await
            .unwrap();
    }
    store
        .create_resource(new_resource("other", "db", "elsewhere", "{}"), None, None)
        .await
        .unwrap();

    let page = |resource_type: Option<&str>, limit: usize, after: Option<String>| ResourceQuery {
        resource_type: resource_type.map(Into::into),
        limit,
        after,
        plans: None,
    };

    let first = store
        .list_resources("b", &page(None, 2, None))
        .await
        .unwrap();
    assert_eq!(names(&first.items), ["cache/r0", "cache/r9"]);
    assert!(first.next.is_some());
    let second = store
        .list_resources("b", &page(None, 2, first.next.clone()))
        .await
        .unwrap();
    assert_eq!(names(&second.items), ["db/r1", "db/r2"]);
    assert!(second.next.is_some());
    let third = store
        .list_resources("b", &page(None, 2, second.next.clone()))
        .await
        .unwrap();
    assert_eq!(names(&third.items), ["db/r3"]);
    assert_eq!(third.next, None);

    // A page that ends exactly at the last item has no next.
    let exact = store
        .list_resources("b", &page(None, 5, None))
        .await
        .unwrap();
    assert_eq!(exact.items.len(), 5);
    assert_eq!(exact.next, None);
    // Limit 0: everything.
    let all = store
        .list_resources("b", &page(None, 0, None))
        .await
        .unwrap();
    assert_eq!(
        names(&all.items),
        ["cache/r0", "cache/r9", "db/r1", "db/r2", "db/r3"]
    );
    assert_eq!(all.next, None);

    // By type.
    let dbs = store
        .list_resources("b", &page(Some("db"), 2, None))
        .await
        .unwrap();
    assert_eq!(names(&dbs.items), ["db/r1", "db/r2"]);
    let rest = store
        .list_resources("b", &page(Some("db"), 2, dbs.next))
        .await
        .unwrap();
    assert_eq!(names(&rest.items), ["db/r3"]);
    assert_eq!(rest.next, None);
    // A token of the whole list on a list of one type: after a key of an earlier type the
    // type's first page, after a later type's nothing.
    let from_cache = store
        .list_resources("b", &page(Some("db"), 2, first.next.clone()))
        .await
        .unwrap();
    assert_eq!(names(&from_cache.items), ["db/r1", "db/r2"]);
    let after_db = store
        .list_resources("b", &page(Some("cache"), 2, second.next.clone()))
        .await
        .unwrap();
    assert_eq!(names(&after_db.items), Vec::<String>::new());
    assert_eq!(after_db.next, None);

    assert_not_found(
        store
            .list_resources("b", &page(None, 2, Some("no-slash".into())))
            .await,
    );
    assert_not_found(store.list_resources("nope", &page(None, 2, None)).await);
}

/// The plans a body names: each component's when it has a list of components, else its plan.
pub async fn plan_groups_and_their_pages(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("other", None).await.unwrap();
    for (boundary, t, n, body) in [
        ("b", "app", "a3", r#"{"plan":"large"}"#),
        ("b", "app", "a1", r#"{"plan":"large"}"#),
        ("b", "app", "a2", r#"{"plan":"small"}"#),
        (
            "b",
            "ci",
            "c2",
            r#"{"components":[{"plan":"small"},{"plan":"large"},{"plan":"small"}]}"#,
        ),
        (
            "b",
            "ci",
            "c1",
            r#"{"components":[{"plan":"large"},{"plan":"small"}]}"#,
        ),
        ("b", "ci", "c3", r#"{"components":[],"plan":"large"}"#),
        ("b", "site", "s1", r#"{"image":"x"}"#),
        ("other", "app", "a9", r#"{"plan":"large"}"#),
    ] {
        store
            .create_resource(new_resource(boundary, t, n, body), None, None)
            .await
            .unwrap();
    }
    let group = |t: &str, plans: &[&str], resources: u64| PlanGroup {
        resource_type: t.into(),
        plans: plans.iter().map(|p| (*p).to_owned()).collect(),
        resources,
    };
    assert_eq!(
        store.plan_groups("b").await.unwrap(),
        [
            group("app", &["large"], 2),
            group("app", &["small"], 1),
            group("ci", &[], 1),
            group("ci", &["large", "small"], 2),
            group("site", &[], 1),
        ]
    );

    let page =
        |t: Option<&str>, plans: &[&str], limit: usize, after: Option<String>| ResourceQuery {
            resource_type: t.map(Into::into),
            limit,
            after,
            plans: Some(plans.iter().map(|p| (*p).to_owned()).collect()),
        };
    let first = store
        .list_resources("b", &page(Some("app"), &["large"], 1, None))
        .await
        .unwrap();
    assert_eq!(names(&first.items), ["app/a1"]);
    let second = store
        .list_resources("b", &page(Some("app"), &["large"], 1, first.next))
        .await
        .unwrap();
    assert_eq!(names(&second.items), ["app/a3"]);
    assert_eq!(second.next, None);
    let both = store
        .list_resources("b", &page(Some("ci"), &["large", "small"], 0, None))
        .await
        .unwrap();
    assert_eq!(names(&both.items), ["ci/c1", "ci/c2"]);
    let none = store
        .list_resources("b", &page(Some("ci"), &[], 0, None))
        .await
        .unwrap();
    assert_eq!(names(&none.items), ["ci/c3"]);
    let any_type = store
        .list_resources("b", &page(None, &[], 0, Some("ci/c3".into())))
        .await
        .unwrap();
    assert_eq!(names(&any_type.items), ["site/s1"]);

    // A plan move moves the resource to its new group; a delete takes it out.
    let edit: Editor = Box::new(|_: &ResourceRecord| -> Result<Edit, Veto> {
        Ok(Edit {
            body_json: r#"{"plan":"large"}"#.into(),
            guard: None,
            cluster: None,
            upload: None,
        })
    });
    store
        .update_resource(&key("b", "app", "a2"), None, edit, None)
        .await
        .unwrap();
    store
        .delete_resource(&key("b", "app", "a1"), None)
        .await
        .unwrap();
    let groups = store.plan_groups("b").await.unwrap();
    assert_eq!(groups[0], group("app", &["large"], 2));
    assert_eq!(groups[1].resource_type, "ci");
    assert_not_found(store.plan_groups("nope").await);
}

/// Workloads placed in a cluster (SPEC 5): read by cluster, their writes wake the reconciler
/// (others do not), and the reconciler's status changes neither etag nor history.
pub async fn placed_workloads_and_statuses(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("c", None).await.unwrap();
    let mut changes = store.subscribe().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    changes.borrow_and_update();

    // A database (no cluster) wakes nobody.
    store
        .create_resource(new_resource("b", "postgresql", "db", "{}"), None, None)
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    if store.backend() == "sqlite" {
        assert!(!changes.has_changed().unwrap());
    }
    changes.borrow_and_update();

    let placed = |boundary: &str, name: &str| NewResource {
        cluster: Some("k1".into()),
        ..new_resource(boundary, "app", name, r#"{"image":"x:1"}"#)
    };
    let record = store
        .create_resource(placed("b", "web"), None, None)
        .await
        .unwrap();
    assert_eq!(record.cluster.as_deref(), Some("k1"));
    assert_eq!(record.status, None);
    tokio::time::timeout(std::time::Duration::from_secs(10), changes.changed())
        .await
        .expect("a placed workload wakes the reconciler")
        .unwrap();
    store
        .create_resource(placed("c", "api"), None, None)
        .await
        .unwrap();
    let in_k1: Vec<(String, String)> = store
        .resources_in_cluster("k1")
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.boundary, r.name))
        .collect();
    assert_eq!(
        in_k1,
        [
            ("b".to_owned(), "web".to_owned()),
            ("c".into(), "api".into())
        ]
    );
    assert!(store.resources_in_cluster("k2").await.unwrap().is_empty());

    // Where workloads can run: attached clusters, each with the boundary's namespaces in it.
    assert!(store.placements("b").await.unwrap().is_empty());
    for cluster in ["k1", "k2", "k3"] {
        store.put_cluster(cluster, b"sealed", None).await.unwrap();
    }
    store.attach_cluster("b", "k2").await.unwrap();
    store.attach_cluster("b", "k1").await.unwrap();
    store.put_namespace("b", "k1", "web", None).await.unwrap();
    store.put_namespace("b", "k1", "api", None).await.unwrap();
    store.attach_cluster("c", "k3").await.unwrap();
    store.put_namespace("c", "k3", "other", None).await.unwrap();
    assert_eq!(
        store.placements("b").await.unwrap(),
        [
            ("k1".to_owned(), Some("api".to_owned())),
            ("k1".into(), Some("web".into())),
            ("k2".into(), None),
        ]
    );
    assert!(store.placements("nope").await.unwrap().is_empty());

    let web = key("b", "app", "web");
    assert!(store.set_resource_status(&web, "deploying").await.unwrap());
    assert!(!store.set_resource_status(&web, "deploying").await.unwrap());
    assert!(store.set_resource_status(&web, "running").await.unwrap());
    let read = store.get_resource(&web).await.unwrap();
    assert_eq!(read.status.as_deref(), Some("running"));
    assert_eq!(read.etag, record.etag);
    assert_eq!(read.updated_at, record.updated_at);
    // A resource that is gone is left alone.
    assert!(!store
        .set_resource_status(&key("b", "app", "gone"), "running")
        .await
        .unwrap());
}

/// A guard that keeps what it saw per policies' version, as the application's plan guard
/// does: the store asks it first and reads the policies only for a version it has not seen.
/// Like the plan guard it tells the last version it saw (`Check::latest`), so on PostgreSQL
/// a create at that version runs as one statement, and one at any other version must not.
struct Memo {
    seen: Arc<Mutex<HashMap<i64, Vec<String>>>>,
    reads: Arc<AtomicUsize>,
    last: Arc<Mutex<Option<i64>>>,
    /// What it answered last: the policies it judged (`name=spec`).
    answered: Arc<Mutex<Vec<String>>>,
}

impl Check for Memo {
    fn known(&self, _boundary: &str, version: PoliciesVersion) -> Option<Result<(), Veto>> {
        let seen = self.seen.lock().unwrap();
        let names = seen.get(&version.0)?;
        *self.answered.lock().unwrap() = names.clone();
        Some(Ok(()))
    }

    fn latest(&self, _boundary: &str) -> Option<PoliciesVersion> {
        (*self.last.lock().unwrap()).map(PoliciesVersion)
    }

    fn check(
        self: Box<Self>,
        _boundary: &str,
        version: PoliciesVersion,
        policies: &[PolicyRecord],
        _exceptions: &[palisade_store::ExceptionRecord],
    ) -> Result<(), Veto> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let names: Vec<String> = policies
            .iter()
            .map(|p| format!("{}={}", p.name, p.spec_json))
            .collect();
        self.seen.lock().unwrap().insert(version.0, names.clone());
        *self.last.lock().unwrap() = Some(version.0);
        *self.answered.lock().unwrap() = names;
        Ok(())
    }
}

/// The policies' version changes with every write to them, by the store or behind its back,
/// and not otherwise; a guard that knows a version is not handed the policies again.
pub async fn a_guard_reads_the_policies_once_per_version(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let reads = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(Mutex::new(None));
    let n = AtomicUsize::new(0);
    let answered = Arc::new(Mutex::new(Vec::new()));
    let memo = || Memo {
        seen: seen.clone(),
        reads: reads.clone(),
        last: last.clone(),
        answered: answered.clone(),
    };
    // Creates one resource under the memo guard: what the guard answered, and how many times
    // it has been handed the policies so far.
    let create = || async {
        let name = format!("r{}", n.fetch_add(1, Ordering::SeqCst));
        answered.lock().unwrap().clear();
        store
            .create_resource(
                new_resource("b", "db", &name, "{}"),
                Some(Box::new(memo())),
                None,
            )
            .await
            .unwrap();
        let answer = answered.lock().unwrap().clone();
        (answer, reads.load(Ordering::SeqCst))
    };

    assert_eq!(create().await, (vec![], 1));
    assert_eq!(
        create().await,
        (vec![], 1),
        "the same version is not read again"
    );
    store
        .put_policy(policy_write("b", "p1", r#"{"v":1}"#), "a")
        .await
        .unwrap();
    assert_eq!(create().await, (vec![r#"p1={"v":1}"#.to_owned()], 2));
    assert_eq!(create().await, (vec![r#"p1={"v":1}"#.to_owned()], 2));
    // Resource writes and other boundaries' policies leave the version alone.
    store.create_boundary("other", None).await.unwrap();
    store
        .put_policy(policy_write("other", "p1", "{}"), "a")
        .await
        .unwrap();
    assert_eq!(create().await.1, 2);
    store
        .put_policy(policy_write("b", "p1", r#"{"v":2}"#), "a")
        .await
        .unwrap();
    assert_eq!(create().await, (vec![r#"p1={"v":2}"#.to_owned()], 3));

    // A row changed behind the store's back changes the version too (a database trigger).
    behind_the_back(
        &db.url,
        r#"UPDATE policies SET spec_json = '{"v":3}' WHERE boundary = 'b' AND name = 'p1'"#,
    )
    .await;
    assert_eq!(create().await, (vec![r#"p1={"v":3}"#.to_owned()], 4));

    store.delete_policy("b", "p1", None, "a").await.unwrap();
    assert_eq!(create().await, (vec![], 5));

    // A plan move is guarded the same way.
    answered.lock().unwrap().push("not judged".into());
    store
        .update_resource(
            &key("b", "db", "r0"),
            None,
            Box::new({
                let guard = memo();
                move |_: &ResourceRecord| {
                    Ok(Edit {
                        body_json: r#"{"plan":"large"}"#.into(),
                        guard: Some(Box::new(guard)),
                        cluster: None,
                        upload: None,
                    })
                }
            }),
            None,
        )
        .await
        .unwrap();
    assert_eq!(*answered.lock().unwrap(), Vec::<String>::new());
    assert_eq!(reads.load(Ordering::SeqCst), 5);

    // At a version the guard knows, a taken name is still a conflict and an unknown boundary
    // still not found, and neither writes a change.
    let changes = store.list_changes("b").await.unwrap().len();
    let taken = store
        .create_resource(
            new_resource("b", "db", "r0", "{}"),
            Some(Box::new(memo())),
            None,
        )
        .await;
    assert!(matches!(taken, Err(StoreError::Conflict(_))), "{taken:?}");
    let missing = store
        .create_resource(
            new_resource("nope", "db", "r0", "{}"),
            Some(Box::new(memo())),
            None,
        )
        .await;
    assert_not_found(missing);
    assert_eq!(store.list_changes("b").await.unwrap().len(), changes);
    assert_eq!(reads.load(Ordering::SeqCst), 5);
}

/// Runs one statement on the database directly, as an operator's script would.
async fn behind_the_back(url: &str, statement: &str) {
    if url.starts_with("postgres") {
        let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(url)
            .await
            .unwrap();
        sqlx::query(statement).execute(&mut conn).await.unwrap();
    } else {
        let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(url)
            .await
            .unwrap();
        sqlx::query(statement).execute(&mut conn).await.unwrap();
    }
}

/// A boundary deleted and created again under its name does not start at the version its
/// predecessor reached.
pub async fn a_boundary_made_again_starts_at_another_version(db: TestDb) {
    let store = db.connect().await;
    let mut versions = std::collections::HashSet::new();
    for _ in 0..5 {
        store.create_boundary("b", None).await.unwrap();
        let version = Arc::new(Mutex::new(None));
        let guard: Guard = Box::new(Peek(version.clone()));
        store
            .create_resource(new_resource("b", "db", "r", "{}"), Some(guard), None)
            .await
            .unwrap();
        store
            .delete_resource(&key("b", "db", "r"), None)
            .await
            .unwrap();
        store.delete_boundary("b").await.unwrap();
        let seen = version.lock().unwrap().take().unwrap();
        assert!(versions.insert(seen), "version {seen} seen twice");
    }
}

struct Peek(Arc<Mutex<Option<i64>>>);

impl Check for Peek {
    fn check(
        self: Box<Self>,
        _boundary: &str,
        version: PoliciesVersion,
        _policies: &[PolicyRecord],
        _exceptions: &[palisade_store::ExceptionRecord],
    ) -> Result<(), Veto> {
        *self.0.lock().unwrap() = Some(version.0);
        Ok(())
    }
}

/// The `<type>/<name>` of each resource, in order.
fn names(items: &[ResourceRecord]) -> Vec<String> {
    items
        .iter()
        .map(|r| format!("{}/{}", r.resource_type, r.name))
        .collect()
}
