//! The storage contract, one suite run against both backends: SQLite (a file in a temporary
//! directory) and PostgreSQL (a fresh database on the test server named by
//! `PALISADE_TEST_POSTGRES_URL`, else on the test kit's own; see `palisade_testkit::postgres`).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly"
)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use palisade_store::{
    etag_of, ChangeRecord, Edit, Editor, Guard, NewResource, PolicyRecord, PolicyWrite,
    ResourceKey, ResourceQuery, ResourceRecord, SharedStore, StoreError, TokenRecord, Veto,
    WriteAction,
};
use palisade_testkit::postgres::{test_database_url, TempPostgres};

/// A database for one test: its URL, and the temporary directory of a SQLite file.
struct TestDb {
    url: String,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
        Self {
            url,
            _dir: Some(dir),
        }
    }

    fn postgres() -> Self {
        Self {
            url: test_database_url(),
            _dir: None,
        }
    }

    async fn connect(&self) -> SharedStore {
        palisade_store::connect(&self.url).await.unwrap()
    }
}

/// Runs each contract function once per backend: `sqlite::<name>` and `postgres::<name>`.
macro_rules! contract {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::TestDb::sqlite()).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(super::TestDb::postgres()).await;
                }
            )*
        }
    };
}

contract!(
    reports_its_backend,
    reconnects_to_existing_data,
    boundaries,
    deleting_a_boundary_takes_its_attachments_and_tokens,
    policies,
    policy_if_match,
    apply_policies_is_all_or_nothing,
    apply_policies_in_order,
    create_resource_with_guards,
    create_resource_checks_before_the_guard,
    update_resource,
    unchanged_body_writes_nothing,
    delete_resource,
    pagination,
    changes_share_one_sequence,
    tokens,
    bootstrap_admin_token,
    bootstrap_admin_token_concurrently,
    clusters_and_attachments,
    guarded_creates_race_policy_changes,
    installation_id_is_made_once,
    namespaces,
    policy_statuses,
    changes_wake_subscribers,
    one_lease_per_installation,
    a_deadline_passed_before_the_commit_writes_nothing,
);

// ---- helpers ----

const META: &str = r#"{"labels":{},"annotations":{}}"#;

fn policy_write(boundary: &str, name: &str, spec: &str) -> PolicyWrite {
    PolicyWrite {
        boundary: boundary.into(),
        name: name.into(),
        spec_json: spec.into(),
        metadata_json: META.into(),
        if_match: None,
        create_only: false,
    }
}

fn with_if_match(write: PolicyWrite, if_match: &str) -> PolicyWrite {
    PolicyWrite {
        if_match: Some(if_match.into()),
        ..write
    }
}

fn new_resource(boundary: &str, resource_type: &str, name: &str, body: &str) -> NewResource {
    NewResource {
        boundary: boundary.into(),
        resource_type: resource_type.into(),
        name: name.into(),
        body_json: body.into(),
    }
}

fn key(boundary: &str, resource_type: &str, name: &str) -> ResourceKey {
    ResourceKey {
        boundary: boundary.into(),
        resource_type: resource_type.into(),
        name: name.into(),
    }
}

fn token(id: &str, boundary: Option<&str>, created_at: &str) -> TokenRecord {
    TokenRecord {
        id: id.into(),
        secret_sha256: format!("sha-of-{id}"),
        role: if boundary.is_some() {
            "developer".into()
        } else {
            "admin".into()
        },
        boundary: boundary.map(Into::into),
        created_at: created_at.into(),
        expires_at: None,
        created_by: "tester".into(),
    }
}

/// A guard that records the policy names it saw and then answers `answer`.
fn recording_guard(
    seen: &Arc<Mutex<Vec<Vec<String>>>>,
    answer: Result<Vec<String>, &'static str>,
) -> Guard {
    let seen = Arc::clone(seen);
    Box::new(
        move |policies: &[PolicyRecord]| -> Result<Vec<String>, Veto> {
            seen.lock()
                .unwrap()
                .push(policies.iter().map(|p| p.name.clone()).collect());
            answer.map_err(Into::into)
        },
    )
}

/// A guard that counts its calls and allows.
fn counting_guard(calls: &Arc<AtomicUsize>) -> Guard {
    let calls = Arc::clone(calls);
    Box::new(move |_: &[PolicyRecord]| -> Result<Vec<String>, Veto> {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(Vec::new())
    })
}

fn editor(body: &str, guard: Option<Guard>) -> Editor {
    let body = body.to_owned();
    Box::new(move |_: &ResourceRecord| -> Result<Edit, Veto> {
        Ok(Edit {
            body_json: body,
            guard,
        })
    })
}

fn assert_conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, contains: &str) {
    match result {
        Err(StoreError::Conflict(message)) => {
            assert!(message.contains(contains), "{message:?} lacks {contains:?}")
        }
        other => panic!("expected Conflict({contains:?}), got {other:?}"),
    }
}

fn assert_not_found<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::NotFound)),
        "expected NotFound, got {result:?}"
    );
}

fn assert_precondition_failed<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::PreconditionFailed)),
        "expected PreconditionFailed, got {result:?}"
    );
}

fn assert_vetoed<T: std::fmt::Debug>(result: Result<T, StoreError>, message: &str) {
    match result {
        Err(StoreError::Vetoed(veto)) => assert_eq!(veto.to_string(), message),
        other => panic!("expected Vetoed({message:?}), got {other:?}"),
    }
}

fn kinds(changes: &[ChangeRecord]) -> Vec<(&str, &str)> {
    changes
        .iter()
        .map(|c| (c.kind.as_str(), c.subject.as_str()))
        .collect()
}

// ---- the contract ----

async fn reports_its_backend(db: TestDb) {
    let store = db.connect().await;
    let expected = if db.url.starts_with("sqlite") {
        "sqlite"
    } else {
        "postgres"
    };
    assert_eq!(store.backend(), expected);
    store.ping().await.unwrap();
}

async fn reconnects_to_existing_data(db: TestDb) {
    let store = db.connect().await;
    let created = store.create_boundary("kept", Some("Kept")).await.unwrap();
    drop(store);
    let store = db.connect().await; // the migrations run again and change nothing
    assert_eq!(store.get_boundary("kept").await.unwrap(), created);
}

async fn boundaries(db: TestDb) {
    let store = db.connect().await;
    let b1 = store.create_boundary("b1", Some("One")).await.unwrap();
    assert_eq!(b1.name, "b1");
    assert_eq!(b1.display_name.as_deref(), Some("One"));
    assert!(b1.created_at.ends_with('Z'), "{}", b1.created_at);
    let a0 = store.create_boundary("a0", None).await.unwrap();
    assert_eq!(a0.display_name, None);

    assert_eq!(store.get_boundary("b1").await.unwrap(), b1);
    assert_not_found(store.get_boundary("nope").await);
    assert_conflict(store.create_boundary("b1", None).await, "b1");

    // Byte order, the same on both backends: upper case first, then `-` < `B` < `_`.
    for name in ["a-b", "a_b", "aB", "Z"] {
        store.create_boundary(name, None).await.unwrap();
    }
    let names: Vec<String> = store
        .list_boundaries()
        .await
        .unwrap()
        .into_iter()
        .map(|b| b.name)
        .collect();
    assert_eq!(names, ["Z", "a-b", "a0", "aB", "a_b", "b1"]);

    // Refused while it holds policies, then resources.
    store
        .put_policy(policy_write("b1", "p", r#"{"allow":true}"#), "alice")
        .await
        .unwrap();
    assert_conflict(store.delete_boundary("b1").await, "boundary has policies");
    store.delete_policy("b1", "p", None, "alice").await.unwrap();
    store
        .create_resource(new_resource("b1", "db", "r", "{}"), None, None)
        .await
        .unwrap();
    assert_conflict(store.delete_boundary("b1").await, "boundary has resources");
    store
        .delete_resource(&key("b1", "db", "r"), None)
        .await
        .unwrap();

    store.delete_boundary("b1").await.unwrap();
    assert_not_found(store.get_boundary("b1").await);
    assert_not_found(store.delete_boundary("b1").await);
    assert_not_found(store.list_policies("b1").await);
    assert_eq!(store.list_boundaries().await.unwrap().len(), 5);
}

async fn deleting_a_boundary_takes_its_attachments_and_tokens(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.put_cluster("c", b"sealed").await.unwrap();
    assert!(store.attach_cluster("b", "c").await.unwrap());
    store
        .create_token(token("dev", Some("b"), "2024-01-01T00:00:00.000Z"))
        .await
        .unwrap();
    store
        .create_token(token("admin", None, "2024-01-01T00:00:00.000Z"))
        .await
        .unwrap();

    store.delete_boundary("b").await.unwrap();
    assert_not_found(store.get_token("dev").await);
    assert_eq!(store.get_token("admin").await.unwrap().id, "admin");
    assert_eq!(store.get_cluster("c").await.unwrap().name, "c");

    // A boundary created again under the name inherits nothing.
    store.create_boundary("b", None).await.unwrap();
    assert!(store.boundary_clusters("b").await.unwrap().is_empty());
    assert!(store.list_tokens(Some("b")).await.unwrap().is_empty());
}

async fn policies(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let spec1 = r#"{"allow":true}"#;
    let spec2 = r#"{"allow":false}"#;

    let (created, action) = store
        .put_policy(policy_write("b", "p", spec1), "alice")
        .await
        .unwrap();
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
    let (same, action) = store
        .put_policy(policy_write("b", "p", spec1), "bob")
        .await
        .unwrap();
    assert_eq!(action, WriteAction::Unchanged);
    assert_eq!(same, created);
    assert_eq!(store.get_policy("b", "p").await.unwrap(), created);

    let (configured, action) = store
        .put_policy(policy_write("b", "p", spec2), "bob")
        .await
        .unwrap();
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

    store
        .put_policy(policy_write("b", "a-first", spec1), "alice")
        .await
        .unwrap();
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

    let history = store.policy_history("b", "p").await.unwrap();
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
    let history = store.policy_history("b", "p").await.unwrap();
    assert_eq!(history.len(), 4);
    assert_eq!(history[3].actor, "dave");
    assert_eq!(history[3].before_json.as_deref(), Some(spec2));
    assert_eq!(history[3].after_json, None);
    assert_not_found(store.policy_history("b", "never").await);

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

async fn policy_if_match(db: TestDb) {
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
    let (p1, _) = store
        .put_policy(policy_write("b", "p", v1), "a")
        .await
        .unwrap();

    assert_precondition_failed(
        store
            .put_policy(with_if_match(policy_write("b", "p", v2), "stale"), "a")
            .await,
    );
    assert_eq!(store.get_policy("b", "p").await.unwrap(), p1);
    assert_eq!(store.policy_history("b", "p").await.unwrap().len(), 1);

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

async fn apply_policies_is_all_or_nothing(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b1", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    let (existing, _) = store
        .put_policy(policy_write("b1", "keep", r#"{"v":1}"#), "a")
        .await
        .unwrap();
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
    assert_not_found(store.policy_history("b1", "new").await);
    assert_not_found(store.policy_history("b2", "other").await);
    assert_eq!(store.policy_history("b1", "keep").await.unwrap().len(), 1);
}

async fn apply_policies_in_order(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b1", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    let (keep, _) = store
        .put_policy(policy_write("b1", "keep", r#"{"v":1}"#), "a")
        .await
        .unwrap();
    let (edit, _) = store
        .put_policy(policy_write("b1", "edit", r#"{"v":1}"#), "a")
        .await
        .unwrap();

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
    assert_eq!(store.policy_history("b1", "edit").await.unwrap().len(), 3);
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

async fn create_resource_with_guards(db: TestDb) {
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

    // A pass returns the guard's warnings.
    let body = r#"{"plan":"small"}"#;
    let (record, warnings) = store
        .create_resource(
            new_resource("b", "db", "ok", body),
            Some(recording_guard(&seen, Ok(vec!["audit: would deny".into()]))),
            None,
        )
        .await
        .unwrap();
    assert_eq!(warnings, ["audit: would deny"]);
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

    // Without a guard: no warnings.
    let (_, warnings) = store
        .create_resource(new_resource("b", "db", "unguarded", "{}"), None, None)
        .await
        .unwrap();
    assert!(warnings.is_empty());

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

async fn create_resource_checks_before_the_guard(db: TestDb) {
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

async fn update_resource(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let k = key("b", "db", "r");
    let (original, _) = store
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
    let guard = recording_guard(&seen, Ok(vec!["warned".into()]));
    let edit: Editor = Box::new(move |current: &ResourceRecord| -> Result<Edit, Veto> {
        *from.lock().unwrap() = Some(current.clone());
        Ok(Edit {
            body_json: r#"{"plan":"medium"}"#.into(),
            guard: Some(guard),
        })
    });
    let (updated, warnings) = store
        .update_resource(&k, Some(&original.etag), edit, None)
        .await
        .unwrap();
    assert_eq!(edited_from.lock().unwrap().as_ref(), Some(&original));
    assert_eq!(warnings, ["warned"]);
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

async fn unchanged_body_writes_nothing(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let k = key("b", "db", "r");
    let (original, _) = store
        .create_resource(new_resource("b", "db", "r", r#"{"a":1}"#), None, None)
        .await
        .unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let (same, warnings) = store
        .update_resource(
            &k,
            Some(&original.etag),
            editor(r#"{"a":1}"#, Some(counting_guard(&calls))),
            None,
        )
        .await
        .unwrap();
    assert_eq!(same, original);
    assert!(warnings.is_empty());
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the guard still runs");
    assert_eq!(store.get_resource(&k).await.unwrap(), original);
    assert_eq!(
        kinds(&store.list_changes("b").await.unwrap()),
        [("resource.create", "db/r")]
    );
}

async fn delete_resource(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let k = key("b", "db", "r");
    let (record, _) = store
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

async fn pagination(db: TestDb) {
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
    };
    let names = |items: &[ResourceRecord]| -> Vec<String> {
        items
            .iter()
            .map(|r| format!("{}/{}", r.resource_type, r.name))
            .collect()
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

    assert_not_found(
        store
            .list_resources("b", &page(None, 2, Some("no-slash".into())))
            .await,
    );
    assert_not_found(store.list_resources("nope", &page(None, 2, None)).await);
}

async fn changes_share_one_sequence(db: TestDb) {
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

async fn tokens(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let admin = token("admin", None, "2024-03-01T00:00:00.000Z");
    let dev_b = token("dev-b", Some("b"), "2024-01-01T00:00:00.000Z");
    let dev_a = TokenRecord {
        expires_at: Some("2025-01-01T00:00:00.000Z".into()),
        role: "boundary-admin".into(),
        ..token("dev-a", Some("b"), "2024-01-01T00:00:00.000Z")
    };
    for t in [&admin, &dev_b, &dev_a] {
        store.create_token(t.clone()).await.unwrap();
    }

    // By creation time, then id.
    assert_eq!(
        store.list_tokens(None).await.unwrap(),
        [dev_a.clone(), dev_b.clone(), admin.clone()]
    );
    assert_eq!(
        store.list_tokens(Some("b")).await.unwrap(),
        [dev_a.clone(), dev_b.clone()]
    );
    assert!(store.list_tokens(Some("nope")).await.unwrap().is_empty());

    assert_eq!(
        store.token_by_secret_hash("sha-of-dev-a").await.unwrap(),
        dev_a
    );
    assert_not_found(store.token_by_secret_hash("unknown").await);
    assert_eq!(store.get_token("admin").await.unwrap(), admin);
    assert_not_found(store.get_token("nope").await);

    assert_conflict(
        store
            .create_token(TokenRecord {
                secret_sha256: "fresh".into(),
                ..admin.clone()
            })
            .await,
        "token",
    );
    assert_conflict(
        store
            .create_token(TokenRecord {
                id: "fresh".into(),
                ..admin.clone()
            })
            .await,
        "token",
    );
    assert_not_found(
        store
            .create_token(token("lost", Some("nope"), "2024-01-01T00:00:00.000Z"))
            .await,
    );

    store.delete_token("dev-b").await.unwrap();
    assert_not_found(store.get_token("dev-b").await);
    assert_not_found(store.delete_token("dev-b").await);
    assert_eq!(store.list_tokens(None).await.unwrap(), [dev_a, admin]);
}

async fn bootstrap_admin_token(db: TestDb) {
    let store = db.connect().await;
    let first = token("first", None, "2024-01-01T00:00:00.000Z");
    assert!(store.bootstrap_admin_token(first.clone()).await.unwrap());
    assert!(!store
        .bootstrap_admin_token(token("second", None, "2024-01-02T00:00:00.000Z"))
        .await
        .unwrap());
    assert_eq!(store.list_tokens(None).await.unwrap(), [first]);
}

async fn bootstrap_admin_token_concurrently(db: TestDb) {
    // Separate stores (pools), as separate replicas would have.
    let mut stores = Vec::new();
    for _ in 0..4 {
        stores.push(db.connect().await);
    }
    let tasks: Vec<_> = stores
        .into_iter()
        .enumerate()
        .map(|(i, store)| {
            tokio::spawn(async move {
                let t = token(&format!("t{i}"), None, "2024-01-01T00:00:00.000Z");
                store.bootstrap_admin_token(t).await.unwrap()
            })
        })
        .collect();
    let mut created = 0;
    for task in tasks {
        if task.await.unwrap() {
            created += 1;
        }
    }
    assert_eq!(created, 1);
    assert_eq!(db.connect().await.list_tokens(None).await.unwrap().len(), 1);
}

async fn clusters_and_attachments(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();

    assert!(store.put_cluster("kind-2", b"two").await.unwrap());
    assert!(store
        .put_cluster("kind-1", b"\x00sealed\xff")
        .await
        .unwrap());
    let c1 = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(c1.kubeconfig_sealed, b"\x00sealed\xff");
    assert_eq!(c1.kubernetes_version, None);
    assert_eq!(c1.admission_enforced, None);
    assert_eq!(c1.admission_reason, None);

    assert!(!store.put_cluster("kind-1", b"rotated").await.unwrap());
    let rotated = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(rotated.kubeconfig_sealed, b"rotated");
    assert_eq!(rotated.created_at, c1.created_at);

    store
        .set_cluster_status("kind-1", Some("1.33.1"), Some(false), Some("webhook down"))
        .await
        .unwrap();
    let status = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(status.kubernetes_version.as_deref(), Some("1.33.1"));
    assert_eq!(status.admission_enforced, Some(false));
    assert_eq!(status.admission_reason.as_deref(), Some("webhook down"));
    store
        .set_cluster_status("kind-1", Some("1.33.1"), Some(true), None)
        .await
        .unwrap();
    let status = store.get_cluster("kind-1").await.unwrap();
    assert_eq!(status.admission_enforced, Some(true));
    assert_eq!(status.admission_reason, None);
    assert_not_found(store.set_cluster_status("nope", None, None, None).await);
    assert_not_found(store.get_cluster("nope").await);

    let names: Vec<String> = store
        .list_clusters()
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(names, ["kind-1", "kind-2"]);

    assert!(store.attach_cluster("b", "kind-2").await.unwrap());
    assert!(store.attach_cluster("b", "kind-1").await.unwrap());
    assert!(!store.attach_cluster("b", "kind-1").await.unwrap());
    assert!(store.attach_cluster("b2", "kind-1").await.unwrap());
    assert_not_found(store.attach_cluster("nope", "kind-1").await);
    assert_not_found(store.attach_cluster("b", "nope").await);
    let attached: Vec<String> = store
        .boundary_clusters("b")
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(attached, ["kind-1", "kind-2"]);
    assert_not_found(store.boundary_clusters("nope").await);

    store.detach_cluster("b", "kind-2").await.unwrap();
    assert_not_found(store.detach_cluster("b", "kind-2").await);
    assert_eq!(store.boundary_clusters("b").await.unwrap().len(), 1);

    // Deleting a cluster detaches it everywhere.
    store.delete_cluster("kind-1").await.unwrap();
    assert!(store.boundary_clusters("b").await.unwrap().is_empty());
    assert!(store.boundary_clusters("b2").await.unwrap().is_empty());
    assert_not_found(store.get_cluster("kind-1").await);
    assert_not_found(store.delete_cluster("kind-1").await);
    assert_eq!(store.list_clusters().await.unwrap().len(), 1);
}

async fn installation_id_is_made_once(db: TestDb) {
    let store = db.connect().await;
    assert_eq!(store.installation_id("first").await.unwrap(), "first");
    assert_eq!(store.installation_id("second").await.unwrap(), "first");
    let again = db.connect().await;
    assert_eq!(again.installation_id("third").await.unwrap(), "first");
}

async fn namespaces(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("b2", None).await.unwrap();
    store.put_cluster("c1", b"x").await.unwrap();
    store.put_cluster("c2", b"x").await.unwrap();
    // Not attached yet.
    assert_not_found(store.put_namespace("b", "c1", "shop").await);
    store.attach_cluster("b", "c1").await.unwrap();
    store.attach_cluster("b2", "c1").await.unwrap();
    store.attach_cluster("b", "c2").await.unwrap();
    assert_not_found(store.put_namespace("nope", "c1", "shop").await);

    assert!(store.put_namespace("b", "c1", "shop").await.unwrap());
    assert!(!store.put_namespace("b", "c1", "shop").await.unwrap());
    assert!(store.put_namespace("b", "c2", "shop").await.unwrap());
    assert!(store.put_namespace("b", "c1", "a-shop").await.unwrap());
    match store.put_namespace("b2", "c1", "shop").await {
        Err(StoreError::Conflict(message)) => assert_eq!(
            message,
            "namespace 'shop' in cluster 'c1' belongs to boundary 'b'"
        ),
        other => panic!("expected a conflict, got {other:?}"),
    }
    let listed: Vec<(String, String)> = store
        .list_namespaces("b")
        .await
        .unwrap()
        .into_iter()
        .map(|n| (n.cluster, n.name))
        .collect();
    assert_eq!(
        listed,
        [
            ("c1".to_owned(), "a-shop".to_owned()),
            ("c1".to_owned(), "shop".to_owned()),
            ("c2".to_owned(), "shop".to_owned())
        ]
    );
    assert_eq!(store.cluster_namespaces("c1").await.unwrap().len(), 2);
    assert_eq!(
        store
            .get_namespace("b", "c1", "shop")
            .await
            .unwrap()
            .boundary,
        "b"
    );
    assert_not_found(store.get_namespace("b2", "c1", "shop").await);

    // A boundary or an attachment with namespaces cannot go.
    match store.delete_boundary("b").await {
        Err(StoreError::Conflict(message)) => assert_eq!(message, "boundary has namespaces"),
        other => panic!("expected a conflict, got {other:?}"),
    }
    match store.detach_cluster("b", "c2").await {
        Err(StoreError::Conflict(message)) => assert_eq!(
            message,
            "boundary 'b' has namespaces in cluster 'c2'; delete them first"
        ),
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_not_found(store.delete_namespace("b2", "c1", "shop").await);
    store.delete_namespace("b", "c2", "shop").await.unwrap();
    assert_not_found(store.delete_namespace("b", "c2", "shop").await);
    store.detach_cluster("b", "c2").await.unwrap();

    // Deleting a cluster forgets its namespaces.
    store.delete_cluster("c1").await.unwrap();
    assert!(store.list_namespaces("b").await.unwrap().is_empty());
    store.delete_boundary("b").await.unwrap();
}

async fn policy_statuses(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.put_cluster("c1", b"x").await.unwrap();
    store.put_cluster("c2", b"x").await.unwrap();
    store.attach_cluster("b", "c1").await.unwrap();
    store.attach_cluster("b", "c2").await.unwrap();
    let status = |policy: &str, cluster: &str, text: &str| palisade_store::PolicyStatusRecord {
        boundary: "b".into(),
        policy: policy.into(),
        cluster: cluster.into(),
        policy_etag: "e1".into(),
        status: text.into(),
        updated_at: palisade_store::now(),
    };
    store
        .replace_policy_statuses(
            "c1",
            "b",
            vec![
                status("p", "c1", "enforced"),
                status("q", "c1", "installed"),
            ],
        )
        .await
        .unwrap();
    store
        .replace_policy_statuses("c2", "b", vec![status("p", "c2", "error: unreachable")])
        .await
        .unwrap();
    let read = |records: Vec<palisade_store::PolicyStatusRecord>| -> Vec<(String, String, String)> {
        records
            .into_iter()
            .map(|r| (r.policy, r.cluster, r.status))
            .collect()
    };
    assert_eq!(
        read(store.policy_statuses("b").await.unwrap()),
        [
            ("p".into(), "c1".into(), "enforced".into()),
            ("p".into(), "c2".into(), "error: unreachable".into()),
            ("q".into(), "c1".into(), "installed".into()),
        ]
    );
    // Replacing one cluster's statuses leaves the other's.
    store
        .replace_policy_statuses(
            "c1",
            "b",
            vec![status(
                "p",
                "c1",
                "not enforced: Kubernetes 1.29 is older than 1.30",
            )],
        )
        .await
        .unwrap();
    assert_eq!(store.policy_statuses("b").await.unwrap().len(), 2);
    // Detaching a cluster drops its statuses; so does deleting one.
    store.detach_cluster("b", "c2").await.unwrap();
    assert_eq!(
        read(store.policy_statuses("b").await.unwrap()),
        [(
            "p".into(),
            "c1".into(),
            "not enforced: Kubernetes 1.29 is older than 1.30".into()
        )]
    );
    store.delete_cluster("c1").await.unwrap();
    assert!(store.policy_statuses("b").await.unwrap().is_empty());
}

/// Waits until the counter moves past `seen` (at most 10 s); the new value.
async fn next_change(changes: &mut tokio::sync::watch::Receiver<u64>) -> u64 {
    tokio::time::timeout(Duration::from_secs(10), changes.changed())
        .await
        .expect("a change arrives within 10 s")
        .unwrap();
    *changes.borrow_and_update()
}

async fn changes_wake_subscribers(db: TestDb) {
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

async fn one_lease_per_installation(db: TestDb) {
    let store = db.connect().await;
    let first = store.try_lease("i1").await.unwrap();
    assert!(first.is_some());
    assert!(first.as_ref().unwrap().held().await);
    let replica = db.connect().await;
    let second = replica.try_lease("i1").await.unwrap();
    let other = replica.try_lease("i2").await.unwrap();
    assert!(other.is_some());
    if store.backend() == "postgres" {
        assert!(second.is_none(), "a second replica must stand by");
        drop(first);
        // The lock goes with the lease's connection.
        let mut taken = None;
        for _ in 0..50 {
            taken = replica.try_lease("i1").await.unwrap();
            if taken.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(taken.is_some(), "the lease is free once its holder is gone");
    } else {
        assert!(second.is_some());
    }
}

/// The race the guard exists for: creates checked against a policy that keeps flipping
/// between allow and deny. Replaying the committed changes proves that every create was
/// checked against the latest policy committed before it, and none passed a deny.
async fn guarded_creates_race_policy_changes(db: TestDb) {
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
                    match store
                        .create_resource(resource, Some(Box::new(gate_guard)), None)
                        .await
                    {
                        Ok((_, warnings)) => {
                            let n: u64 = warnings[0].parse().unwrap();
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

/// Allows when the `gate` policy says `"allow": true`, and hands back its counter `n` as the
/// only warning, so the test knows which version each create was checked against.
fn gate_guard(policies: &[PolicyRecord]) -> Result<Vec<String>, Veto> {
    let gate = policies
        .iter()
        .find(|p| p.name == "gate")
        .ok_or("no gate policy")?;
    let spec: serde_json::Value = serde_json::from_str(&gate.spec_json)?;
    let n = spec["n"].as_u64().ok_or("no counter")?;
    if spec["allow"] == serde_json::Value::Bool(true) {
        Ok(vec![n.to_string()])
    } else {
        Err(format!("denied by gate {n}").into())
    }
}

// ---- backend-specific ----

#[tokio::test]
async fn sqlite_accepts_every_url_form() {
    let dir = tempfile::tempdir().unwrap();
    let nested = dir.path().join("new/sub/dir/a.db");
    let plain = dir.path().join("b.db");
    let short = dir.path().join("c.db");
    let urls = [
        format!("sqlite://{}", nested.display()),
        plain.display().to_string(),
        format!("sqlite:{}", short.display()),
    ];
    for url in &urls {
        let store = palisade_store::connect(url).await.unwrap();
        assert_eq!(store.backend(), "sqlite");
        store.create_boundary("b", None).await.unwrap();
    }
    for path in [&nested, &plain, &short] {
        assert!(path.exists(), "{} was not created", path.display());
    }
    // The file is in WAL mode (a property of the file, visible to any connection).
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(&urls[0]).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "wal");
}

/// A policy row the store cannot read back stops a guarded create before the guard runs,
/// and nothing is written; an unguarded create goes on.
#[tokio::test]
async fn sqlite_unreadable_policies_stop_guarded_writes() {
    use sqlx::Connection;
    let db = TestDb::sqlite();
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store
        .put_policy(policy_write("b", "p", "{}"), "a")
        .await
        .unwrap();
    let mut conn = sqlx::SqliteConnection::connect(&db.url).await.unwrap();
    sqlx::query("UPDATE policies SET spec_json = X'00FF'")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();

    let calls = Arc::new(AtomicUsize::new(0));
    let result = store
        .create_resource(
            new_resource("b", "db", "r", "{}"),
            Some(counting_guard(&calls)),
            None,
        )
        .await;
    assert!(
        matches!(result, Err(StoreError::PolicyUnavailable(_))),
        "expected PolicyUnavailable, got {result:?}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert_not_found(store.get_resource(&key("b", "db", "r")).await);
    let (created, _) = store
        .create_resource(new_resource("b", "db", "unguarded", "{}"), None, None)
        .await
        .unwrap();
    assert_eq!(
        kinds(&store.list_changes("b").await.unwrap()),
        [("policy.put", "p"), ("resource.create", "db/unguarded")]
    );
    let edit = editor("{\"v\":2}", Some(counting_guard(&calls)));
    let result = store
        .update_resource(&key("b", "db", "unguarded"), None, edit, None)
        .await;
    assert!(matches!(result, Err(StoreError::PolicyUnavailable(_))));
    assert_eq!(
        store
            .get_resource(&key("b", "db", "unguarded"))
            .await
            .unwrap(),
        created
    );
}

/// The store reports a stopped server as a database error and recovers once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_recovers_after_a_restart() {
    let mut server = TempPostgres::start()
        .unwrap_or_else(|error| panic!("cannot start a private PostgreSQL cluster: {error}"));
    let store = palisade_store::connect(&server.url()).await.unwrap();
    assert_eq!(store.backend(), "postgres");
    let created = store.create_boundary("b", None).await.unwrap();

    server.stop().unwrap();
    let down = store.get_boundary("b").await;
    assert!(
        matches!(down, Err(StoreError::Database(_))),
        "expected a database error, got {down:?}"
    );

    server.restart().unwrap();
    let mut result = store.get_boundary("b").await;
    for _ in 0..20 {
        if result.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        result = store.get_boundary("b").await;
    }
    assert_eq!(result.unwrap(), created);
}

/// A guarded write whose deadline passes before its commit is `Timeout` and writes nothing,
/// whichever step ran late (the write lock, the guard); with time left it commits as usual.
async fn a_deadline_passed_before_the_commit_writes_nothing(db: TestDb) {
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
            Ok(Vec::new())
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
    let (record, _) = store
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
