//! What the contract's modules share: the store's types, test data builders, guards and
//! assertions.

pub use std::collections::HashMap;
pub use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
pub use std::sync::{Arc, Mutex};
pub use std::time::Duration;

pub use palisade_store::{
    etag_of, ChangeRecord, Check, Edit, Editor, Guard, NewResource, PlanGroup, PoliciesVersion,
    PolicyRecord, PolicyWrite, ResourceKey, ResourceQuery, ResourceRecord, StoreError, TokenRecord,
    UploadRecord, Veto, WriteAction,
};
pub use palisade_testkit::postgres::TempPostgres;

pub use crate::TestDb;

/// A database written by hand, as an earlier or a later version left it, before the store
/// opens it: a pool of either backend.
pub enum RawDatabase {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

/// `$body` with `$pool` bound to the database's pool, whichever backend's it is.
macro_rules! on_pool {
    ($database:expr, |$pool:ident| $body:expr) => {
        match $database {
            RawDatabase::Sqlite($pool) => $body,
            RawDatabase::Postgres($pool) => $body,
        }
    };
}

impl RawDatabase {
    /// A new database of `backend` (`sqlite`: the file `palisade.db` in `dir`; `postgres`: a
    /// new test database): its URL, and a pool on it.
    pub async fn new(backend: &str, dir: &std::path::Path) -> (String, RawDatabase) {
        if backend == "sqlite" {
            let url = format!("sqlite://{}", dir.join("palisade.db").display());
            let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
            let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
                .await
                .unwrap();
            (url, RawDatabase::Sqlite(pool))
        } else {
            let url = palisade_testkit::postgres::test_database_url();
            let database = RawDatabase::connect(&url).await;
            (url, database)
        }
    }

    /// A pool on the existing database at `url`.
    pub async fn connect(url: &str) -> RawDatabase {
        if url.starts_with("sqlite") {
            RawDatabase::Sqlite(sqlx::SqlitePool::connect(url).await.unwrap())
        } else {
            RawDatabase::Postgres(sqlx::PgPool::connect(url).await.unwrap())
        }
    }

    /// Runs the backend's migrations before `version`, as a version of that time did.
    pub async fn migrate_before(&self, version: i64) {
        let full = match self {
            RawDatabase::Sqlite(_) => sqlx::migrate!("./migrations/sqlite"),
            RawDatabase::Postgres(_) => sqlx::migrate!("./migrations/postgres"),
        };
        let migrator = before(full, version);
        on_pool!(self, |pool| migrator.run(pool).await.unwrap());
    }

    /// Runs one statement, with `content` bound to its `$1` when given.
    pub async fn execute(&self, statement: &str, content: Option<&[u8]>) {
        on_pool!(self, |pool| {
            let query = sqlx::query(statement);
            let query = match content {
                Some(content) => query.bind(content),
                None => query,
            };
            query.execute(pool).await.unwrap();
        });
    }

    /// Runs a script of several statements.
    pub async fn run_script(&self, script: &str) {
        on_pool!(self, |pool| drop(
            sqlx::raw_sql(script).execute(pool).await.unwrap()
        ));
    }

    pub async fn close(self) {
        on_pool!(&self, |pool| pool.close().await);
    }
}

/// The migrator `full` holds, with the migrations before `version` only.
fn before(full: sqlx::migrate::Migrator, version: i64) -> sqlx::migrate::Migrator {
    let migrations: Vec<_> = full
        .migrations
        .iter()
        .filter(|m| m.version < version)
        .cloned()
        .collect();
    sqlx::migrate::Migrator {
        migrations: std::borrow::Cow::Owned(migrations),
        ..full
    }
}

pub const META: &str = r#"{"labels":{},"annotations":{}}"#;

pub fn policy_write(boundary: &str, name: &str, spec: &str) -> PolicyWrite {
    PolicyWrite::unconditional(boundary, name, spec, META)
}

/// Writes `spec` as the policy `name` of `boundary`, unconditionally, as `actor`: the record
/// stored and what the write did.
pub async fn put(
    store: &palisade_store::SharedStore,
    boundary: &str,
    name: &str,
    spec: &str,
    actor: &str,
) -> (PolicyRecord, WriteAction) {
    let write = policy_write(boundary, name, spec);
    store.put_policy(write, actor).await.unwrap()
}

pub fn with_if_match(write: PolicyWrite, if_match: &str) -> PolicyWrite {
    PolicyWrite {
        if_match: Some(if_match.into()),
        ..write
    }
}

pub fn new_resource(boundary: &str, resource_type: &str, name: &str, body: &str) -> NewResource {
    NewResource::unplaced(boundary, resource_type, name, body)
}

pub fn key(boundary: &str, resource_type: &str, name: &str) -> ResourceKey {
    ResourceKey {
        boundary: boundary.into(),
        resource_type: resource_type.into(),
        name: name.into(),
    }
}

pub fn token(id: &str, boundary: Option<&str>, created_at: &str) -> TokenRecord {
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
pub fn recording_guard(
    seen: &Arc<Mutex<Vec<Vec<String>>>>,
    answer: Result<(), &'static str>,
) -> Guard {
    let seen = Arc::clone(seen);
    Box::new(move |policies: &[PolicyRecord]| -> Result<(), Veto> {
        seen.lock()
            .unwrap()
            .push(policies.iter().map(|p| p.name.clone()).collect());
        answer.map_err(Into::into)
    })
}

/// A guard that counts its calls and allows.
pub fn counting_guard(calls: &Arc<AtomicUsize>) -> Guard {
    let calls = Arc::clone(calls);
    Box::new(move |_: &[PolicyRecord]| -> Result<(), Veto> {
        calls.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })
}

pub fn editor(body: &str, guard: Option<Guard>) -> Editor {
    let body = body.to_owned();
    Box::new(move |_: &ResourceRecord| -> Result<Edit, Veto> {
        Ok(Edit {
            body_json: body,
            guard,
            cluster: None,
            upload: None,
        })
    })
}

pub fn assert_conflict<T: std::fmt::Debug>(result: Result<T, StoreError>, contains: &str) {
    match result {
        Err(StoreError::Conflict(message)) => {
            assert!(message.contains(contains), "{message:?} lacks {contains:?}")
        }
        other => panic!("expected Conflict({contains:?}), got {other:?}"),
    }
}

pub fn assert_not_found<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::NotFound)),
        "expected NotFound, got {result:?}"
    );
}

pub fn assert_precondition_failed<T: std::fmt::Debug>(result: Result<T, StoreError>) {
    assert!(
        matches!(result, Err(StoreError::PreconditionFailed)),
        "expected PreconditionFailed, got {result:?}"
    );
}

pub fn assert_vetoed<T: std::fmt::Debug>(result: Result<T, StoreError>, message: &str) {
    match result {
        Err(StoreError::Vetoed(veto)) => assert_eq!(veto.to_string(), message),
        other => panic!("expected Vetoed({message:?}), got {other:?}"),
    }
}

pub fn kinds(changes: &[ChangeRecord]) -> Vec<(&str, &str)> {
    changes
        .iter()
        .map(|c| (c.kind.as_str(), c.subject.as_str()))
        .collect()
}
