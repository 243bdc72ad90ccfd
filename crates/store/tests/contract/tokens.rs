//! Tokens, and the admin token made once at bootstrap.

use crate::support::*;

pub async fn tokens(db: TestDb) {
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

pub async fn bootstrap_admin_token(db: TestDb) {
    let store = db.connect().await;
    let first = token("first", None, "2024-01-01T00:00:00.000Z");
    assert!(store.bootstrap_admin_token(first.clone()).await.unwrap());
    assert!(!store
        .bootstrap_admin_token(token("second", None, "2024-01-02T00:00:00.000Z"))
        .await
        .unwrap());
    assert_eq!(store.list_tokens(None).await.unwrap(), [first]);
}

pub async fn bootstrap_admin_token_concurrently(db: TestDb) {
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

/// The last admin token that has not expired cannot be deleted (no one could manage tokens
/// again); expired admin tokens do not count, and two deletes at once leave one.
pub async fn the_last_admin_token_stays(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let expired = TokenRecord {
        expires_at: Some("2020-01-01T00:00:00.000Z".into()),
        ..token("expired", None, "2019-01-01T00:00:00.000Z")
    };
    let later = TokenRecord {
        expires_at: Some("2999-01-01T00:00:00.000Z".into()),
        ..token("later", None, "2024-01-01T00:00:00.000Z")
    };
    for t in [
        &expired,
        &later,
        &token("only", None, "2024-01-01T00:00:00.000Z"),
        &token("dev", Some("b"), "2024-01-01T00:00:00.000Z"),
    ] {
        store.create_token(t.clone()).await.unwrap();
    }
    store.delete_token("later").await.unwrap();
    assert_conflict(
        store.delete_token("only").await,
        "token 'only' is the last admin token",
    );
    assert!(store.get_token("only").await.is_ok(), "it stays");
    // An expired admin token may go, and others than admin tokens too.
    store.delete_token("expired").await.unwrap();
    store.delete_token("dev").await.unwrap();
    assert_not_found(store.delete_token("nope").await);

    // Two admin tokens deleted at once from two replicas: one delete wins, one admin stays.
    store
        .create_token(token("second", None, "2024-01-02T00:00:00.000Z"))
        .await
        .unwrap();
    for round in 0..5 {
        let (a, b) = (db.connect().await, db.connect().await);
        let first = tokio::spawn(async move { a.delete_token("only").await });
        let second = tokio::spawn(async move { b.delete_token("second").await });
        let results = [first.await.unwrap(), second.await.unwrap()];
        assert_eq!(
            results.iter().filter(|r| r.is_ok()).count(),
            1,
            "round {round}: {results:?}"
        );
        let left = store.list_tokens(None).await.unwrap();
        assert_eq!(left.len(), 1, "round {round}: {left:?}");
        let gone = if left[0].id == "only" {
            "second"
        } else {
            "only"
        };
        store
            .create_token(token(gone, None, "2024-01-02T00:00:00.000Z"))
            .await
            .unwrap();
    }
}

/// A signed-out session is remembered until it would have expired; then it is forgotten.
pub async fn ended_sessions_are_remembered_until_they_expire(db: TestDb) {
    let store = db.connect().await;
    assert!(!store.session_ended("s1").await.unwrap());
    store
        .end_session("s1", "2999-01-01T00:00:00.000Z")
        .await
        .unwrap();
    store
        .end_session("s1", "2999-01-01T00:00:00.000Z")
        .await
        .unwrap();
    store
        .end_session("old", "2020-01-01T00:00:00.000Z")
        .await
        .unwrap();
    assert!(store.session_ended("s1").await.unwrap());
    assert!(!store.session_ended("s2").await.unwrap());
    // The next end forgets those past their expiry.
    store
        .end_session("s2", "2999-01-01T00:00:00.000Z")
        .await
        .unwrap();
    assert!(!store.session_ended("old").await.unwrap());
    assert!(store.session_ended("s2").await.unwrap());
    assert!(db.connect().await.session_ended("s1").await.unwrap());
}
