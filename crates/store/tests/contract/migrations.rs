//! A database made by an earlier version is carried over by the migrations: uploads stored
//! whole in their row before migration 0008 (bounded uploads) keep their content (now their
//! first chunk), are counted against their boundary's limit, and a resource that names one
//! keeps it from the sweeper; resources stored before migration 0017 get the plans their
//! bodies name. On SQLite and on PostgreSQL.

use std::borrow::Cow;

use palisade_store::StoreError;
use sqlx::migrate::Migrator;

/// The migrator `full` holds, with the migrations before `version` only.
fn before(full: Migrator, version: i64) -> Migrator {
    let migrations: Vec<_> = full
        .migrations
        .iter()
        .filter(|m| m.version < version)
        .cloned()
        .collect();
    Migrator {
        migrations: Cow::Owned(migrations),
        ..full
    }
}

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

/// One of `ROWS`, an upload's content (`hello`) bound.
fn insert<DB: sqlx::Database>(
    row: &'static str,
) -> sqlx::query::Query<'static, DB, DB::Arguments<'static>>
where
    &'static [u8]: sqlx::Encode<'static, DB> + sqlx::Type<DB>,
{
    let query = sqlx::query::<DB>(row);
    if row.contains("$1") {
        query.bind(b"hello".as_slice())
    } else {
        query
    }
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
    let (url, pool) = crate::support::new_sqlite_file(dir.path()).await;
    {
        before(sqlx::migrate!("./migrations/sqlite"), 8)
            .run(&pool)
            .await
            .unwrap();
        for row in ROWS {
            insert(row).execute(&pool).await.unwrap();
        }
        pool.close().await;
    }
    check(&url).await;
}

#[tokio::test]
async fn uploads_stored_whole_are_carried_over_on_postgres() {
    let url = palisade_testkit::postgres::test_database_url();
    {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        before(sqlx::migrate!("./migrations/postgres"), 8)
            .run(&pool)
            .await
            .unwrap();
        for row in ROWS {
            insert(row).execute(&pool).await.unwrap();
        }
        pool.close().await;
    }
    check(&url).await;
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

/// The groups of the resources stored before 0017 (read by the migration) are those of the
/// same bodies written now (read by the store): the two readings of a body agree.
async fn check_plans(url: &str) {
    let store = palisade_store::connect(url).await.unwrap();
    assert_eq!(store.plan_groups("old").await.unwrap(), expected_groups());
    store.create_boundary("new", None).await.unwrap();
    for (t, n, body) in BODIES {
        let resource = palisade_store::NewResource {
            boundary: "new".into(),
            resource_type: t.into(),
            name: n.into(),
            body_json: body.into(),
            cluster: None,
            upload: None,
        };
        store.create_resource(resource, None, None).await.unwrap();
    }
    assert_eq!(store.plan_groups("new").await.unwrap(), expected_groups());
}

#[tokio::test]
async fn the_plans_of_resources_stored_before_are_read_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let (url, pool) = crate::support::new_sqlite_file(dir.path()).await;
    {
        before(sqlx::migrate!("./migrations/sqlite"), 17)
            .run(&pool)
            .await
            .unwrap();
        sqlx::query(OLD_BOUNDARY).execute(&pool).await.unwrap();
        for (t, n, body) in BODIES {
            let row = old_resource(t, n, body);
            sqlx::query(&row).execute(&pool).await.unwrap();
        }
        pool.close().await;
    }
    check_plans(&url).await;
}

#[tokio::test]
async fn the_plans_of_resources_stored_before_are_read_on_postgres() {
    let url = palisade_testkit::postgres::test_database_url();
    {
        let pool = sqlx::PgPool::connect(&url).await.unwrap();
        before(sqlx::migrate!("./migrations/postgres"), 17)
            .run(&pool)
            .await
            .unwrap();
        sqlx::query(OLD_BOUNDARY).execute(&pool).await.unwrap();
        for (t, n, body) in BODIES {
            let row = old_resource(t, n, body);
            sqlx::query(&row).execute(&pool).await.unwrap();
        }
        pool.close().await;
    }
    check_plans(&url).await;
}
