//! Boundaries: create, read, list, delete, and what goes with a deleted boundary.

use crate::support::*;

pub async fn boundaries(db: TestDb) {
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
    put(&store, "b1", "p", r#"{"allow":true}"#, "alice").await;
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

pub async fn deleting_a_boundary_takes_its_attachments_and_tokens(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.put_cluster("c", b"sealed", None).await.unwrap();
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
