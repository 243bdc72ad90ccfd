//! An upgrade from the earliest store: `testdata/store/0001` holds both stores as the
//! migrations of the first store (commit ef81048, migration 0001) left them, dumped with
//! their rows and the migration tool's record of what ran (`scripts/store-fixture.sh`). The
//! fixture is checked in, so these tests also fail when a migration that has shipped is
//! edited (its checksum no longer matches the one recorded) or removed: what `serve` would
//! refuse to start on after an upgrade. Each test loads a dump, opens it with today's store
//! (which runs every later migration) and reads every row back.

use palisade_store::{ResourceQuery, SharedStore};

use crate::support::RawDatabase;

fn fixture(backend: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/store/0001")
        .join(format!("{backend}.sql"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(text.as_bytes()))
}

/// What the earlier store held is read back, and the store takes writes.
async fn read_back(store: SharedStore) {
    let boundaries = store.list_boundaries().await.unwrap();
    let names: Vec<(&str, Option<&str>)> = boundaries
        .iter()
        .map(|b| (b.name.as_str(), b.display_name.as_deref()))
        .collect();
    assert_eq!(names, [("shop", Some("Shop team")), ("web", None)]);

    let policy = store.get_policy("shop", "trusted").await.unwrap();
    assert_eq!(
        policy.spec_json,
        r#"{"mode":"enforce","rules":[{"allowedRegistries":{"registries":["ghcr.io/acme"]}},{"disallowLatestTag":{}}]}"#
    );
    assert_eq!(policy.etag, "etag-trusted-2");
    assert_eq!(policy.updated_by, "tok-admin");
    assert_eq!(store.list_policies("shop").await.unwrap().len(), 2);
    let history = store
        .policy_history("shop", "trusted", None, 10)
        .await
        .unwrap();
    assert_eq!(history.len(), 2);
    // Migration 0018 numbered the history in the order it was written.
    let versions: Vec<Option<i64>> = history.iter().map(|h| h.version).collect();
    assert_eq!(versions, [Some(1), Some(2)]);
    assert_eq!(policy.version, 2);
    assert_eq!(
        store
            .policy_version_spec("shop", "trusted", 2)
            .await
            .unwrap()
            .as_deref(),
        Some(policy.spec_json.as_str())
    );

    // Migration 0017 read the plans of the resources stored before it.
    let groups: Vec<(String, Vec<String>, u64)> = store
        .plan_groups("shop")
        .await
        .unwrap()
        .into_iter()
        .map(|g| (g.resource_type, g.plans, g.resources))
        .collect();
    let group = |t: &str, plans: &[&str]| {
        (
            t.to_owned(),
            plans.iter().map(|p| (*p).to_owned()).collect::<Vec<_>>(),
            1,
        )
    };
    assert_eq!(
        groups,
        [
            group("app", &["small"]),
            group("container_instance", &["large", "small"]),
            group("postgresql", &["medium"]),
        ]
    );
    let resources = store
        .list_resources("shop", &ResourceQuery::default())
        .await
        .unwrap();
    assert_eq!(resources.items.len(), 3);

    let developer = store
        .token_by_secret_hash(&sha256_hex("fixture-developer"))
        .await
        .unwrap();
    assert_eq!(
        (developer.id.as_str(), developer.role.as_str()),
        ("tok-dev", "developer")
    );
    assert_eq!(developer.boundary.as_deref(), Some("shop"));
    let admin = store
        .token_by_secret_hash(&sha256_hex("fixture-admin"))
        .await
        .unwrap();
    assert_eq!(admin.role, "admin");

    let cluster = store.get_cluster("prod-1").await.unwrap();
    assert_eq!(cluster.kubeconfig_sealed, b"sealed kubeconfig");
    assert_eq!(cluster.kubernetes_version.as_deref(), Some("v1.30.14"));
    assert_eq!(cluster.admission_enforced, Some(true));
    // Columns added since: their defaults.
    assert_eq!(cluster.apiserver_restarts, 0);
    let attached = store.boundary_clusters("shop").await.unwrap();
    assert_eq!(attached.len(), 1);
    assert_eq!(attached[0].name, "prod-1");

    let changes = store.list_changes("shop").await.unwrap();
    assert_eq!(changes.len(), 4);

    // And it goes on: a boundary, a resource and a token written after the upgrade.
    store.create_boundary("after", None).await.unwrap();
    assert_eq!(store.list_boundaries().await.unwrap().len(), 3);
    let body = r#"{"type":"app","name":"admin-ui","plan":"small"}"#;
    let resource = palisade_store::NewResource::unplaced("shop", "app", "admin-ui", body);
    store.create_resource(resource, None, None).await.unwrap();
    let app = store.plan_groups("shop").await.unwrap();
    assert_eq!(
        (app[0].resource_type.as_str(), app[0].resources),
        ("app", 2)
    );
    store
        .create_token(palisade_store::TokenRecord {
            id: "tok-new".into(),
            secret_sha256: sha256_hex("after the upgrade"),
            role: "developer".into(),
            boundary: Some("web".into()),
            created_at: "2026-12-07T00:00:00.000Z".into(),
            expires_at: None,
            created_by: "tok-admin".into(),
        })
        .await
        .unwrap();
    assert_eq!(store.list_tokens(None).await.unwrap().len(), 3);
}

#[tokio::test]
async fn a_sqlite_store_of_the_first_version_is_upgraded_and_read() {
    upgraded_and_read("sqlite").await;
}

#[tokio::test]
async fn a_postgres_store_of_the_first_version_is_upgraded_and_read() {
    upgraded_and_read("postgres").await;
}

/// A database of `backend` as the first version left it (`fixture`) is upgraded and read.
async fn upgraded_and_read(backend: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (url, database) = RawDatabase::new(backend, dir.path()).await;
    database.run_script(&fixture(backend)).await;
    database.close().await;
    read_back(palisade_store::connect(&url).await.unwrap()).await;
}

/// What a rollback meets: a store that a later version migrated further is refused, naming
/// the migration this version does not have (docs/upgrade.md: restore the backup taken
/// before the upgrade, or run the later version again).
async fn refused_after_a_later_version(url: &str, insert: &str) {
    drop(palisade_store::connect(url).await.unwrap());
    let database = RawDatabase::connect(url).await;
    database.execute(insert, None).await;
    database.close().await;
    let Err(error) = palisade_store::connect(url).await else {
        panic!("a store with a later version's migration was opened");
    };
    // The error and its causes, as `palisade serve` prints them.
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    assert!(
        text.contains("migration 9999 was previously applied but is missing"),
        "{text}"
    );
}

#[tokio::test]
async fn a_sqlite_store_migrated_by_a_later_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (url, database) = RawDatabase::new("sqlite", dir.path()).await;
    database.close().await;
    refused_after_a_later_version(
        &url,
        "INSERT INTO _sqlx_migrations VALUES (9999, 'later', '2027-01-01 00:00:00', 1, X'00', 1)",
    )
    .await;
}

#[tokio::test]
async fn a_postgres_store_migrated_by_a_later_version_is_refused() {
    let url = palisade_testkit::postgres::test_database_url();
    refused_after_a_later_version(
        &url,
        "INSERT INTO _sqlx_migrations VALUES (9999, 'later', now(), true, '\\x00', 1)",
    )
    .await;
}
