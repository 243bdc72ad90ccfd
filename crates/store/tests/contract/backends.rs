//! The store as a whole and what is particular to one backend: which backend a URL opens,
//! reconnecting, SQLite's URL forms and unreadable rows, PostgreSQL's restart.

use crate::support::*;

pub async fn reports_its_backend(db: TestDb) {
    let store = db.connect().await;
    let expected = if db.url.starts_with("sqlite") {
        "sqlite"
    } else {
        "postgres"
    };
    assert_eq!(store.backend(), expected);
    store.ping().await.unwrap();
}

pub async fn reconnects_to_existing_data(db: TestDb) {
    let store = db.connect().await;
    let created = store.create_boundary("kept", Some("Kept")).await.unwrap();
    drop(store);
    let store = db.connect().await; // the migrations run again and change nothing
    assert_eq!(store.get_boundary("kept").await.unwrap(), created);
}

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
    put(&store, "b", "p", "{}", "a").await;
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
    let created = store
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
    let mut server = match TempPostgres::start() {
        Ok(server) => server,
        Err(error) => panic!("cannot start a private PostgreSQL cluster: {error}"),
    };
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
