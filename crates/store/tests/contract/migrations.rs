//! A database made by an earlier version is carried over by the migrations: uploads stored
//! whole in their row before migration 0008 (bounded uploads) keep their content (now their
//! first chunk), are counted against their boundary's limit, and a resource that names one
//! keeps it from the sweeper; resources stored before migration 0017 get the plans their
//! bodies name. On SQLite and on PostgreSQL.

use palisade_store::StoreError;

use crate::support::RawDatabase;

const ROWS: [&str; 4] = [
    "INSERT INTO boundaries (name, created_at) VALUES ('shop', '2026-01-01T00:00:00.000Z')",
    "INSERT INTO resources (boundary, resource_type, name, body_json, etag, created_at, updated_at) \
     VALUES ('shop', 'function', 'hook', '{\"type\":\"function\",\"name\":\"hook\",\"upload\":\"u-named\"}', 'e', \
     '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')",
    "INSERT INTO uploads (boundary, id, sha256, size, content, created_at) \
     VALUES ('shop', 'u-named', 'sha', 5, $1, '2026-01-01T00:00:00.000Z')",
    "INSERT INTO uploads (boundary, id, sha256, size, content, created_at) \
     VALUES ('shop', 'u-unnamed', 'sha', 5, $1, '2026-01-01T00:00:00.000Z')",
];

/// A database of `backend` as the version before migration `version` left it, holding
/// `rows` (each a statement, and what its `$1` binds if anything): its URL.
async fn made_before(
    backend: &str,
    dir: &std::path::Path,
    version: i64,
    rows: impl IntoIterator<Item = (String, Option<&'static [u8]>)>,
) -> String {
    let (url, database) = RawDatabase::new(backend, dir).await;
    database.migrate_before(version).await;
    for (row, content) in rows {
        database.execute(&row, content).await;
    }
    database.close().await;
    url
}

/// A database as the version before migration 0008 left it, holding `ROWS` (an upload's
/// content is `hello`): its URL.
async fn before_bounded_uploads(backend: &str, dir: &std::path::Path) -> String {
    let rows = ROWS.map(|row| {
        let content = row.contains("$1").then_some(b"hello".as_slice());
        (row.to_owned(), content)
    });
    made_before(backend, dir, 8, rows).await
}

async fn check(url: &str) {
    let store = palisade_store::connect(url).await.unwrap();
    let named = store.get_upload("shop", "u-named").await.unwrap();
    assert_eq!((named.size, named.named_at), (5, None));
    assert_eq!(
        store.upload_chunk("shop", "u-named", 0).await.unwrap(),
        Some(b"hello".to_vec())
    );
    assert_eq!(
        store.upload_chunk("shop", "u-named", 1).await.unwrap(),
        None
    );
    assert_eq!(store.upload_usage("shop").await.unwrap(), 2 * 4096);
    // Both are older than any cutoff; the resource keeps the one it names.
    let swept = store
        .delete_unnamed_uploads("9999-01-01T00:00:00.000Z", 10)
        .await
        .unwrap();
    assert_eq!(swept, 1);
    store.get_upload("shop", "u-named").await.unwrap();
    assert!(matches!(
        store.get_upload("shop", "u-unnamed").await,
        Err(StoreError::NotFound)
    ));
    assert_eq!(store.upload_usage("shop").await.unwrap(), 4096);
}

#[tokio::test]
async fn uploads_stored_whole_are_carried_over_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    check(&before_bounded_uploads("sqlite", dir.path()).await).await;
}

#[tokio::test]
async fn uploads_stored_whole_are_carried_over_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    check(&before_bounded_uploads("postgres", dir.path()).await).await;
}

/// Bodies as the resources of a database made before migration 0017 (the plans a body names)
/// hold them, with the groups they make.
const BODIES: [(&str, &str, &str); 7] = [
    (
        "app",
        "web",
        r#"{"type":"app","name":"web","plan":"large"}"#,
    ),
    (
        "container_instance",
        "batch",
        r#"{"components":[{"name":"a","plan":"small"},{"name":"b","plan":"large"},{"name":"c","plan":"small"}]}"#,
    ),
    (
        "container_instance",
        "empty",
        r#"{"components":[],"plan":"large"}"#,
    ),
    (
        "container_instance",
        "partly",
        r#"{"components":[{"name":"a"},{"name":"b","plan":"medium"}]}"#,
    ),
    ("function", "hook", r#"{"plan":"small","upload":"u-1"}"#),
    ("postgresql", "odd", r#"{"plan":5}"#),
    ("static_web_app", "site", r#"{"upload":"u-2"}"#),
];

fn expected_groups() -> Vec<palisade_store::PlanGroup> {
    [
        ("app", &["large"][..]),
        ("container_instance", &[][..]),
        ("container_instance", &["large", "small"][..]),
        ("container_instance", &["medium"][..]),
        ("function", &["small"][..]),
        ("postgresql", &[][..]),
        ("static_web_app", &[][..]),
    ]
    .into_iter()
    .map(|(t, plans)| palisade_store::PlanGroup {
        resource_type: t.into(),
        plans: plans.iter().map(|p| (*p).to_owned()).collect(),
        resources: 1,
    })
    .collect()
}

fn old_resource(t: &str, n: &str, body: &str) -> String {
    format!(
        "INSERT INTO resources (boundary, resource_type, name, body_json, etag, created_at, \
         updated_at) VALUES ('old', '{t}', '{n}', '{body}', 'e', '2026-01-01T00:00:00.000Z', \
         '2026-01-01T00:00:00.000Z')"
    )
}

const OLD_BOUNDARY: &str =
    "INSERT INTO boundaries (name, created_at) VALUES ('old', '2026-01-01T00:00:00.000Z')";

/// A database as the version before migration 0017 left it, holding `BODIES` in boundary
/// `old`: its URL.
async fn before_plans(backend: &str, dir: &std::path::Path) -> String {
    let resources = BODIES.map(|(t, n, body)| (old_resource(t, n, body), None));
    let rows = std::iter::once((OLD_BOUNDARY.to_owned(), None)).chain(resources);
    made_before(backend, dir, 17, rows).await
}

/// The groups of the resources stored before 0017 (read by the migration) are those of the
/// same bodies written now (read by the store): the two readings of a body agree.
async fn check_plans(url: &str) {
    let store = palisade_store::connect(url).await.unwrap();
    assert_eq!(store.plan_groups("old").await.unwrap(), expected_groups());
    store.create_boundary("new", None).await.unwrap();
    for (t, n, body) in BODIES {
        let resource = palisade_store::NewResource::unplaced("new", t, n, body);
        store.create_resource(resource, None, None).await.unwrap();
    }
    assert_eq!(store.plan_groups("new").await.unwrap(), expected_groups());
}

#[tokio::test]
async fn the_plans_of_resources_stored_before_are_read_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    check_plans(&before_plans("sqlite", dir.path()).await).await;
}

#[tokio::test]
async fn the_plans_of_resources_stored_before_are_read_on_postgres() {
    let dir = tempfile::tempdir().unwrap();
    check_plans(&before_plans("postgres", dir.path()).await).await;
}
