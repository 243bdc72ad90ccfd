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

/// A new SQLite file `palisade.db` in `dir`: its URL, and a pool on it.
pub async fn new_sqlite_file(dir: &std::path::Path) -> (String, sqlx::SqlitePool) {
    let url = format!("sqlite://{}", dir.join("palisade.db").display());
    let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
    let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
        .await
        .unwrap();
    (url, pool)
}

pub const META: &str = r#"{"labels":{},"annotations":{}}"#;

pub fn policy_write(boundary: &str, name: &str, spec: &str) -> PolicyWrite {
    PolicyWrite {
        boundary: boundary.into(),
        name: name.into(),
        spec_json: spec.into(),
        metadata_json: META.into(),
        if_match: None,
        create_only: false,
    }
}

pub fn with_if_match(write: PolicyWrite, if_match: &str) -> PolicyWrite {
    PolicyWrite {
        if_match: Some(if_match.into()),
        ..write
    }
}

pub fn new_resource(boundary: &str, resource_type: &str, name: &str, body: &str) -> NewResource {
    NewResource {
        boundary: boundary.into(),
        resource_type: resource_type.into(),
        name: name.into(),
        body_json: body.into(),
        cluster: None,
        upload: None,
    }
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
