//! Uploads (SPEC 5, v3.1 "Uploads are bounded"): written in chunks and stored at once (a
//! failed upload leaves nothing visible), counted against their boundary's limit, named by
//! resources, and swept once no resource has named them for a while.

use crate::support::*;
use palisade_store::{counted_upload_bytes, NewUpload, SharedStore};

/// Writes `content` as upload `id` of `boundary` in chunks of `chunk` bytes; the upload to
/// store.
async fn write_chunks(
    store: &SharedStore,
    boundary: &str,
    id: &str,
    content: &[u8],
    chunk: usize,
    created_at: &str,
) -> NewUpload {
    let mut chunks = 0;
    for (seq, piece) in content.chunks(chunk).enumerate() {
        store
            .put_upload_chunk(boundary, id, seq as i64, piece)
            .await
            .unwrap();
        chunks += 1;
    }
    NewUpload {
        boundary: boundary.into(),
        id: id.into(),
        sha256: format!("sha-of-{id}"),
        size: content.len() as u64,
        chunks,
        created_at: created_at.into(),
    }
}

/// The content of a stored upload, read chunk by chunk.
async fn content(store: &SharedStore, boundary: &str, id: &str) -> Vec<u8> {
    let mut content = Vec::new();
    let mut seq = 0;
    while let Some(chunk) = store.upload_chunk(boundary, id, seq).await.unwrap() {
        content.extend_from_slice(&chunk);
        seq += 1;
    }
    content
}

const LONG_AGO: &str = "2026-01-01T00:00:00.000Z";
const LATER: &str = "2026-06-01T00:00:00.000Z";
const LATER_STILL: &str = "9000-01-01T00:00:00.000Z";
const FAR_AHEAD: &str = "9999-01-01T00:00:00.000Z";
const NO_LIMIT: u64 = u64::MAX >> 2;

/// An upload exists once it is stored: its chunks are invisible before, it never changes
/// after, and it must have every chunk it says it has.
pub async fn uploads_are_stored_from_chunks(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    let bytes: Vec<u8> = (0..=255u8).cycle().take(1000).collect();

    let upload = write_chunks(&store, "b", "u1", &bytes, 300, LONG_AGO).await;
    assert_eq!(upload.chunks, 4);
    assert_not_found(store.get_upload("b", "u1").await);
    assert_eq!(store.upload_chunk("b", "u1", 0).await.unwrap(), None);
    assert_conflict(store.put_upload_chunk("b", "u1", 1, b"again").await, "u1");

    store.store_upload(upload.clone(), NO_LIMIT).await.unwrap();
    let record = store.get_upload("b", "u1").await.unwrap();
    assert_eq!(
        record,
        UploadRecord {
            boundary: "b".into(),
            id: "u1".into(),
            sha256: "sha-of-u1".into(),
            size: 1000,
            created_at: LONG_AGO.into(),
            named_at: None,
        }
    );
    assert_eq!(content(&store, "b", "u1").await, bytes);
    assert_eq!(store.upload_chunk("b", "u1", 4).await.unwrap(), None);
    assert_not_found(store.get_upload("c", "u1").await);
    // A stored upload never changes.
    assert_conflict(store.put_upload_chunk("b", "u1", 4, b"more").await, "u1");
    assert_conflict(store.store_upload(upload.clone(), NO_LIMIT).await, "u1");
    assert_eq!(store.discard_upload("b", "u1", 100).await.unwrap(), 0);
    assert_eq!(content(&store, "b", "u1").await, bytes);

    // A chunk missing: nothing is stored.
    let gap = write_chunks(&store, "b", "u2", &bytes, 500, LONG_AGO).await;
    let result = store
        .store_upload(NewUpload { chunks: 3, ..gap }, NO_LIMIT)
        .await;
    assert!(matches!(result, Err(StoreError::Corrupt(_))), "{result:?}");
    assert_not_found(store.get_upload("b", "u2").await);
    // A failed upload's chunks are discarded, a few at a time.
    assert_eq!(store.discard_upload("b", "u2", 1).await.unwrap(), 1);
    assert_eq!(store.discard_upload("b", "u2", 5).await.unwrap(), 1);
    assert_eq!(store.discard_upload("b", "u2", 5).await.unwrap(), 0);

    // No boundary: nothing is stored.
    let stray = write_chunks(&store, "nope", "u3", b"x", 10, LONG_AGO).await;
    assert_not_found(store.store_upload(stray, NO_LIMIT).await);
    assert_eq!(
        store.upload_usage("b").await.unwrap(),
        4096,
        "it counts 4 KiB at least"
    );
}

/// Each boundary's uploads count against the limit the store is given (an upload counts at
/// least 4 KiB); an upload that would pass it is refused with what they count now, and
/// nothing of it is stored.
pub async fn uploads_count_against_their_boundarys_limit(db: TestDb) {
    const LIMIT: u64 = 12_000;
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    store.create_boundary("c", None).await.unwrap();
    assert_eq!(store.upload_usage("b").await.unwrap(), 0);
    assert_eq!(counted_upload_bytes(100), 4096);
    assert_eq!(counted_upload_bytes(6000), 6000);

    let first = write_chunks(&store, "b", "u1", &[1; 6000], 4096, LONG_AGO).await;
    store.store_upload(first, LIMIT).await.unwrap();
    assert_eq!(store.upload_usage("b").await.unwrap(), 6000);

    let over = write_chunks(&store, "b", "u2", &[2; 6001], 4096, LONG_AGO).await;
    let result = store.store_upload(over, LIMIT).await;
    assert!(
        matches!(result, Err(StoreError::UploadQuota { stored: 6000 })),
        "{result:?}"
    );
    assert_not_found(store.get_upload("b", "u2").await);
    assert_eq!(store.upload_usage("b").await.unwrap(), 6000);

    let small = write_chunks(&store, "b", "u3", &[3; 100], 4096, LONG_AGO).await;
    store.store_upload(small, LIMIT).await.unwrap();
    assert_eq!(store.upload_usage("b").await.unwrap(), 10_096);
    let another = write_chunks(&store, "b", "u4", &[4; 100], 4096, LONG_AGO).await;
    let result = store.store_upload(another, LIMIT).await;
    assert!(
        matches!(result, Err(StoreError::UploadQuota { stored: 10_096 })),
        "{result:?}"
    );
    // Exactly up to the limit is within it.
    let exact = write_chunks(&store, "c", "u5", &[5; 12_000], 4096, LONG_AGO).await;
    store.store_upload(exact, LIMIT).await.unwrap();
    assert_eq!(store.upload_usage("c").await.unwrap(), 12_000);
    // A limit smaller than one upload refuses it even when nothing is stored.
    store.create_boundary("d", None).await.unwrap();
    let big = write_chunks(&store, "d", "u6", &[6; 5000], 4096, LONG_AGO).await;
    let result = store.store_upload(big, 4999).await;
    assert!(
        matches!(result, Err(StoreError::UploadQuota { stored: 0 })),
        "{result:?}"
    );

    // A boundary deleted and made again starts with nothing stored.
    store.delete_boundary("b").await.unwrap();
    store.create_boundary("b", None).await.unwrap();
    assert_eq!(store.upload_usage("b").await.unwrap(), 0);
    assert_not_found(store.get_upload("b", "u1").await);
    // Its uploads' chunks are left to the sweeper.
    assert_eq!(store.upload_chunk("b", "u1", 0).await.unwrap(), None);
    assert!(
        store
            .delete_orphan_upload_chunks(FAR_AHEAD, 100)
            .await
            .unwrap()
            >= 2
    );
}

/// A resource that names an upload marks it named (create and update alike); naming one that
/// is not stored writes nothing. The sweeper deletes uploads that no resource names, made or
/// last named before its cutoff, and then their chunks, a few at a time; it keeps the others.
pub async fn unnamed_uploads_are_swept_and_named_ones_stay(db: TestDb) {
    let store = db.connect().await;
    store.create_boundary("b", None).await.unwrap();
    for id in ["old", "named", "renamed", "recent"] {
        let created_at = if id == "recent" {
            LATER_STILL
        } else {
            LONG_AGO
        };
        let upload = write_chunks(&store, "b", id, &[7; 10_000], 4096, created_at).await;
        store.store_upload(upload, NO_LIMIT).await.unwrap();
    }
    assert_eq!(store.upload_usage("b").await.unwrap(), 40_000);

    // Created naming `named`: marked named now.
    let named = |name: &str, upload: &str| NewResource {
        upload: Some(upload.into()),
        ..new_resource(
            "b",
            "function",
            name,
            &format!(r#"{{"upload":"{upload}"}}"#),
        )
    };
    store
        .create_resource(named("fn", "named"), None, None)
        .await
        .unwrap();
    let record = store.get_upload("b", "named").await.unwrap();
    assert!(
        record.named_at.as_deref().is_some_and(|at| at > LATER),
        "{record:?}"
    );
    // Updated to name `renamed`, then updated again to name `named`: `renamed` was named.
    let names = |upload: &'static str| -> Editor {
        Box::new(move |_: &ResourceRecord| {
            Ok(Edit {
                body_json: format!(r#"{{"upload":"{upload}"}}"#),
                guard: None,
                cluster: None,
                upload: Some(upload.into()),
            })
        })
    };
    let k = key("b", "function", "fn");
    store
        .update_resource(&k, None, names("renamed"), None)
        .await
        .unwrap();
    store
        .update_resource(&k, None, names("named"), None)
        .await
        .unwrap();
    assert!(store
        .get_upload("b", "renamed")
        .await
        .unwrap()
        .named_at
        .is_some());

    // Naming an upload that is not stored: nothing is written.
    let result = store
        .create_resource(named("other", "missing"), None, None)
        .await;
    assert!(
        matches!(&result, Err(StoreError::UploadMissing(id)) if id == "missing"),
        "{result:?}"
    );
    assert_not_found(store.get_resource(&key("b", "function", "other")).await);
    let result = store
        .update_resource(&k, None, names("missing"), None)
        .await;
    assert!(
        matches!(&result, Err(StoreError::UploadMissing(_))),
        "{result:?}"
    );
    assert!(store
        .get_resource(&k)
        .await
        .unwrap()
        .body_json
        .contains(r#""named""#));
    let changes_before = store.list_changes("b").await.unwrap().len();

    // The sweep at LATER: `old` was made before and never named; the others were named since
    // or made after.
    assert_eq!(store.delete_unnamed_uploads(LATER, 10).await.unwrap(), 1);
    assert_not_found(store.get_upload("b", "old").await);
    assert_eq!(store.upload_usage("b").await.unwrap(), 30_000);
    for id in ["named", "renamed", "recent"] {
        store.get_upload("b", id).await.unwrap();
    }
    assert_eq!(store.delete_unnamed_uploads(LATER, 10).await.unwrap(), 0);

    // Far ahead: everything is old, but a resource names `named`; a few at a time.
    assert_eq!(store.delete_unnamed_uploads(FAR_AHEAD, 1).await.unwrap(), 1);
    assert_eq!(
        store.delete_unnamed_uploads(FAR_AHEAD, 10).await.unwrap(),
        1
    );
    assert_eq!(
        store.delete_unnamed_uploads(FAR_AHEAD, 10).await.unwrap(),
        0
    );
    store.get_upload("b", "named").await.unwrap();
    assert_eq!(store.upload_usage("b").await.unwrap(), 10_000);
    // Once its resource is gone, it goes too.
    store.delete_resource(&k, None).await.unwrap();
    assert_eq!(
        store.delete_unnamed_uploads(FAR_AHEAD, 10).await.unwrap(),
        1
    );
    assert_not_found(store.get_upload("b", "named").await);
    assert_eq!(store.upload_usage("b").await.unwrap(), 0);
    assert_eq!(
        store.list_changes("b").await.unwrap().len(),
        changes_before + 1,
        "the sweep writes no change; the delete does"
    );

    // Their chunks (3 each), and those of an upload never stored, are orphans now; the newest
    // chunks were written now, so a cutoff long ago deletes none.
    write_chunks(&store, "b", "unfinished", &[8; 10], 4, LONG_AGO).await;
    assert_eq!(
        store
            .delete_orphan_upload_chunks(LONG_AGO, 100)
            .await
            .unwrap(),
        0
    );
    let mut deleted = Vec::new();
    loop {
        let n = store
            .delete_orphan_upload_chunks(FAR_AHEAD, 5)
            .await
            .unwrap();
        deleted.push(n);
        if n < 5 {
            break;
        }
    }
    assert_eq!(deleted.iter().sum::<u64>(), 4 * 3 + 3, "{deleted:?}");
    assert!(deleted.iter().all(|n| *n <= 5), "{deleted:?}");
}
