//! Exceptions: a request, its approval by another, history, the limit per boundary, the
//! policies' version they change, and what a guard reads.

use palisade_store::{ExceptionInstall, ExceptionWrite, WriteAction};

use crate::support::*;

fn write(boundary: &str, name: &str, spec: &str, approve: bool) -> ExceptionWrite {
    ExceptionWrite {
        boundary: boundary.into(),
        name: name.into(),
        policy: "size".into(),
        spec_json: spec.into(),
        expires_at: "2027-01-31T00:00:00.000Z".into(),
        approve,
        if_match: None,
        create_only: false,
        max_per_boundary: 3,
        max_requests_per_boundary: 2,
    }
}

/// How many exceptions of every boundary are in force at `now`.
async fn in_force(store: &palisade_store::SharedStore, now: &str) -> usize {
    store.exceptions_in_force(now).await.unwrap().len()
}

pub async fn exceptions(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let spec = r#"{"policy":"size"}"#;

    // A developer's request: applies nothing, records the requester.
    let (requested, action) = store
        .put_exception(write("b", "legacy", spec, false), "dev")
        .await
        .unwrap();
    assert_eq!(action, WriteAction::Created);
    assert_eq!(requested.state, "requested");
    assert_eq!(requested.requested_by, "dev");
    assert_eq!(requested.approved_by, None);
    assert_eq!(in_force(&store, "2027-01-01T00:00:00.000Z").await, 0);

    // The same spec written by an approver approves it; the requester stays.
    let (approved, action) = store
        .put_exception(write("b", "legacy", spec, true), "admin")
        .await
        .unwrap();
    assert_eq!(action, WriteAction::Configured);
    assert_eq!(approved.state, "approved");
    assert_eq!(approved.requested_by, "dev");
    assert_eq!(approved.approved_by.as_deref(), Some("admin"));
    assert_ne!(approved.etag, requested.etag);
    assert_eq!(store.get_exception("b", "legacy").await.unwrap(), approved);

    // Unchanged: nothing written.
    let (same, action) = store
        .put_exception(write("b", "legacy", spec, true), "admin2")
        .await
        .unwrap();
    assert_eq!(action, WriteAction::Unchanged);
    assert_eq!(same, approved);

    // In force until expiresAt, not at it.
    assert_eq!(in_force(&store, "2027-01-30T23:59:59.999Z").await, 1);
    assert_eq!(in_force(&store, "2027-01-31T00:00:00.000Z").await, 0);

    // A developer's change makes it a request again.
    let (changed, _) = store
        .put_exception(
            write("b", "legacy", r#"{"policy":"size","x":1}"#, false),
            "dev",
        )
        .await
        .unwrap();
    assert_eq!(changed.state, "requested");
    assert_eq!(changed.approved_by, None);

    // If-Match: a stale etag is refused.
    let stale = ExceptionWrite {
        if_match: Some(approved.etag.clone()),
        ..write("b", "legacy", spec, true)
    };
    assert!(matches!(
        store.put_exception(stale, "admin").await,
        Err(StoreError::PreconditionFailed)
    ));

    // The limits per boundary: approved exceptions, and apart from them pending requests
    // (`legacy` is one: it takes none of the approved ones' room).
    for name in ["two", "three", "four"] {
        store
            .put_exception(write("b", name, spec, true), "admin")
            .await
            .unwrap();
    }
    let conflict = |answer: palisade_store::Result<_>| match answer {
        Err(StoreError::Conflict(reason)) => reason,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        conflict(
            store
                .put_exception(write("b", "five", spec, true), "admin")
                .await
        ),
        "boundary 'b' holds 3 approved exceptions, the most it may hold"
    );
    store
        .put_exception(write("b", "asked", spec, false), "dev")
        .await
        .unwrap();
    assert_eq!(
        conflict(
            store
                .put_exception(write("b", "more", spec, false), "dev")
                .await
        ),
        "boundary 'b' holds 2 pending exception requests, the most it may hold: \
         an admin or boundary-admin of 'b' must approve or delete one first"
    );
    // Approving a request needs room among the approved ones.
    assert_eq!(
        conflict(
            store
                .put_exception(write("b", "asked", spec, true), "admin")
                .await
        ),
        "boundary 'b' holds 3 approved exceptions, the most it may hold"
    );
    // Create only: an existing exception is never replaced.
    let create = ExceptionWrite {
        create_only: true,
        ..write("b", "two", r#"{"policy":"size","other":1}"#, true)
    };
    assert_eq!(
        conflict(store.put_exception(create, "admin").await),
        "exception 'two' already exists in boundary 'b'"
    );
    for name in ["asked", "four"] {
        store
            .delete_exception("b", name, None, "admin")
            .await
            .unwrap();
    }
    let names: Vec<String> = store
        .list_exceptions("b")
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["legacy", "three", "two"]);

    store
        .delete_exception("b", "two", None, "admin")
        .await
        .unwrap();
    assert!(matches!(
        store.get_exception("b", "two").await,
        Err(StoreError::NotFound)
    ));
    let actions: Vec<(String, String)> = store
        .exception_history("b", "legacy", None, 1000)
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.actor, e.action))
        .collect();
    assert_eq!(
        actions,
        [
            ("dev".to_owned(), "put".to_owned()),
            ("admin".to_owned(), "approve".to_owned()),
            ("dev".to_owned(), "put".to_owned()),
        ]
    );
    assert_eq!(
        store
            .exception_history("b", "two", None, 1000)
            .await
            .unwrap()
            .len(),
        2
    );
    assert!(matches!(
        store.list_exceptions("nope").await,
        Err(StoreError::NotFound)
    ));

    // A boundary's exceptions go with it; their history stays.
    for name in ["legacy", "three"] {
        store
            .delete_exception("b", name, None, "admin")
            .await
            .unwrap();
    }
    store
        .put_exception(write("b", "left", spec, true), "admin")
        .await
        .unwrap();
    store.delete_boundary("b").await.unwrap();
    assert_eq!(
        store
            .exception_history("b", "left", None, 1000)
            .await
            .unwrap()
            .len(),
        1
    );
}

/// What the reconciler records of a cluster's exceptions is replaced whole per cluster, with
/// each probe's finding, and read back per boundary and per cluster.
pub async fn exception_installs(db: TestDb) {
    let store = db.connect().await;
    let install = |cluster: &str, exception: &str, status: &str| ExceptionInstall {
        cluster: cluster.into(),
        boundary: "b".into(),
        exception: exception.into(),
        expires_at: "2027-01-31T00:00:00.000Z".into(),
        installed_at: "2027-01-01T00:00:00.000Z".into(),
        status: status.into(),
    };
    store
        .replace_exception_installs(
            "c1",
            vec![
                install("c1", "legacy", "enforced"),
                install("c1", "old", "pending"),
            ],
        )
        .await
        .unwrap();
    store
        .replace_exception_installs(
            "c2",
            vec![install(
                "c2",
                "legacy",
                "not enforced: the API server denied an object the exception matches",
            )],
        )
        .await
        .unwrap();
    assert_eq!(
        store.exception_installs("b").await.unwrap(),
        [
            install("c1", "legacy", "enforced"),
            install(
                "c2",
                "legacy",
                "not enforced: the API server denied an object the exception matches"
            ),
            install("c1", "old", "pending"),
        ]
    );
    store
        .replace_exception_installs("c1", vec![install("c1", "legacy", "installed")])
        .await
        .unwrap();
    assert_eq!(
        store.exception_installs_in("c1").await.unwrap(),
        [install("c1", "legacy", "installed")]
    );
}

/// A write of an exception changes the boundary's policies' version, so a guard that decided
/// at the earlier version reads again (and sees the exception).
pub async fn exceptions_change_the_policies_version(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    // A create of an app, its guard recording into `seen`.
    let create = async |name: &str| {
        let guard: palisade_store::Guard = Box::new(Reading(seen.clone()));
        let resource = new_resource("b", "app", name, "{}");
        store
            .create_resource(resource, Some(guard), None)
            .await
            .unwrap();
    };
    create("one").await;
    store
        .put_exception(write("b", "legacy", r#"{"policy":"size"}"#, true), "admin")
        .await
        .unwrap();
    create("two").await;
    assert_eq!(*seen.lock().unwrap(), [0, 1]);
}

/// A guard that records how many exceptions it was handed.
struct Reading(std::sync::Arc<std::sync::Mutex<Vec<usize>>>);

impl palisade_store::Check for Reading {
    fn check(
        self: Box<Self>,
        _boundary: &str,
        _version: palisade_store::PoliciesVersion,
        _policies: &[palisade_store::PolicyRecord],
        exceptions: &[palisade_store::ExceptionRecord],
    ) -> Result<(), palisade_store::Veto> {
        self.0.lock().unwrap().push(exceptions.len());
        Ok(())
    }
}

/// The reconciler's snapshot holds every cluster and every boundary with exactly its own
/// policies, attachments, namespaces and exceptions, the same rows the per-boundary lists give.
pub async fn the_snapshot_is_every_boundary_s_own_lists(db: TestDb) {
    let store = db.connect().await;
    for b in ["a", "b", "empty"] {
        store.create_boundary(b, None).await.unwrap();
    }
    store.put_cluster("c1", b"k", None).await.unwrap();
    store.put_cluster("c2", b"k", None).await.unwrap();
    for (b, c) in [("a", "c1"), ("a", "c2"), ("b", "c2")] {
        store.attach_cluster(b, c).await.unwrap();
    }
    for (b, p) in [("a", "p1"), ("a", "p2"), ("b", "q")] {
        put(&store, b, p, "{}", "admin").await;
    }
    store.put_namespace("a", "c1", "web", None).await.unwrap();
    store.put_namespace("b", "c2", "api", None).await.unwrap();
    store
        .put_exception(write("b", "legacy", r#"{"policy":"size"}"#, true), "admin")
        .await
        .unwrap();
    let snapshot = store.snapshot().await.unwrap();
    let clusters: Vec<&str> = snapshot.clusters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(clusters, ["c1", "c2"]);
    let names: Vec<&str> = snapshot
        .boundaries
        .iter()
        .map(|b| b.boundary.name.as_str())
        .collect();
    assert_eq!(names, ["a", "b", "empty"]);
    for b in &snapshot.boundaries {
        let name = b.boundary.name.as_str();
        assert_eq!(
            b.policies,
            store.list_policies(name).await.unwrap(),
            "{name}"
        );
        let attached: Vec<String> = store
            .boundary_clusters(name)
            .await
            .unwrap()
            .into_iter()
            .map(|c| c.name)
            .collect();
        assert_eq!(b.clusters, attached, "{name}");
        assert_eq!(
            b.namespaces,
            store.list_namespaces(name).await.unwrap(),
            "{name}"
        );
        assert_eq!(
            b.exceptions,
            store.list_exceptions(name).await.unwrap(),
            "{name}"
        );
    }
    assert_eq!(snapshot.boundaries[0].policies.len(), 2);
    assert_eq!(snapshot.boundaries[1].exceptions.len(), 1);
    assert!(snapshot.boundaries[2].policies.is_empty());
}
