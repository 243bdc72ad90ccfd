//! A database made by an earlier version is carried over by the migrations: uploads stored
//! whole in their row before migration 0008 (bounded uploads) keep their content (now their
//! first chunk), are counted against their boundary's limit, and a resource that names one
//! keeps it from the sweeper. On SQLite and on PostgreSQL.

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
    let url = format!("sqlite://{}", dir.path().join("palisade.db").display());
    {
        let options: sqlx::sqlite::SqliteConnectOptions = url.parse().unwrap();
        let pool = sqlx::SqlitePool::connect_with(options.create_if_missing(true))
            .await
            .unwrap();
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
