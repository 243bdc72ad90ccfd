//! Code uploaded for builds: written by the application in chunks, each in a short
//! transaction of its own, then stored (made visible) in one transaction that counts it
//! against its boundary's limit; read chunk by chunk by the build Job's fetch; deleted by the
//! sweeper once no resource has named it for a while.
//!
//! An upload exists once its row in `uploads` does. Chunks without a row are an upload that
//! failed or is still being received: nobody reads them, and the sweeper deletes those older
//! than its cutoff (so do a boundary's deletion and an expired upload's, which delete rows
//! only and leave the chunks to it, in small batches).

use crate::sql::{
    Arg::{Bytes, Int, Text},
    Conn, Fields,
};
use crate::{NewUpload, Result, StoreError, UploadRecord};

use super::{boundaries, find, on_insert};

/// The least an upload counts against its boundary's limit, however small it is, so that a
/// boundary cannot store a great many tiny uploads below its limit.
pub const LEAST_COUNTED_UPLOAD_BYTES: u64 = 4096;

/// A chunk of an upload that is not stored yet (a stored upload never changes).
const INSERT_CHUNK: &str = "INSERT INTO upload_chunks (boundary, id, seq, content, written_at) \
     SELECT $1, $2, $3, $4, $5 \
     WHERE NOT EXISTS (SELECT 1 FROM uploads WHERE boundary = $1 AND id = $2)";
const COUNT_CHUNKS: &str =
    "SELECT COUNT(*) AS chunks FROM upload_chunks WHERE boundary = $1 AND id = $2";
/// `$2` more bytes for the boundary, only while its total stays at most `$3`: one row, or
/// none when the limit would be passed.
const ADD_USAGE: &str = "INSERT INTO upload_usage (boundary, bytes) SELECT $1, $2 WHERE $2 <= $3 \
     ON CONFLICT (boundary) DO UPDATE SET bytes = upload_usage.bytes + excluded.bytes \
     WHERE upload_usage.bytes + excluded.bytes <= $3";
const USAGE: &str = "SELECT bytes FROM upload_usage WHERE boundary = $1";
const SUBTRACT_USAGE: &str = "UPDATE upload_usage SET bytes = bytes - $2 WHERE boundary = $1";
const INSERT: &str = "INSERT INTO uploads (boundary, id, sha256, size, created_at) \
     VALUES ($1, $2, $3, $4, $5)";
const SELECT: &str = "SELECT boundary, id, sha256, size, created_at, named_at \
     FROM uploads WHERE boundary = $1 AND id = $2";
/// Only of a stored upload.
const SELECT_CHUNK: &str = "SELECT c.content FROM upload_chunks c \
     JOIN uploads u ON u.boundary = c.boundary AND u.id = c.id \
     WHERE c.boundary = $1 AND c.id = $2 AND c.seq = $3";
const NAME: &str = "UPDATE uploads SET named_at = $3 WHERE boundary = $1 AND id = $2";
/// At most `$3` chunks of an upload that was never stored.
const DISCARD: &str = "DELETE FROM upload_chunks WHERE boundary = $1 AND id = $2 AND seq IN \
     (SELECT seq FROM upload_chunks WHERE boundary = $1 AND id = $2 \
      AND NOT EXISTS (SELECT 1 FROM uploads WHERE boundary = $1 AND id = $2) \
      ORDER BY seq LIMIT $3)";
/// Uploads no resource names, made or last named before `$1`; at most `$2`.
const UNNAMED: &str = "SELECT u.boundary, u.id FROM uploads u \
     WHERE COALESCE(u.named_at, u.created_at) < $1 \
       AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.boundary = u.boundary AND r.upload = u.id) \
     ORDER BY u.boundary, u.id LIMIT $2";
/// The same conditions again, on the one row, as the delete decides: a resource that named
/// the upload meanwhile keeps it.
const DELETE_UNNAMED: &str = "DELETE FROM uploads \
     WHERE boundary = $1 AND id = $2 AND COALESCE(named_at, created_at) < $3 \
       AND NOT EXISTS (SELECT 1 FROM resources r WHERE r.boundary = $1 AND r.upload = $2) \
     RETURNING size";
/// At most `$2` chunks written before `$1` of uploads that are not stored.
const DELETE_ORPHAN_CHUNKS: &str = "DELETE FROM upload_chunks WHERE (boundary, id, seq) IN \
     (SELECT c.boundary, c.id, c.seq FROM upload_chunks c WHERE c.written_at < $1 \
      AND NOT EXISTS (SELECT 1 FROM uploads u WHERE u.boundary = c.boundary AND u.id = c.id) \
      LIMIT $2)";

/// What an upload of `size` bytes counts against its boundary's limit.
pub fn counted(size: u64) -> u64 {
    size.max(LEAST_COUNTED_UPLOAD_BYTES)
}

fn upload(row: &dyn Fields) -> sqlx::Result<UploadRecord> {
    Ok(UploadRecord {
        boundary: row.text("boundary")?,
        id: row.text("id")?,
        sha256: row.text("sha256")?,
        size: u64::try_from(row.int("size")?).unwrap_or(0),
        created_at: row.text("created_at")?,
        named_at: row.opt_text("named_at")?,
    })
}

fn int(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn limit(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Writes chunk `seq` of upload `id`; `Conflict` when it is written already or the upload is
/// stored.
pub(crate) async fn put_chunk<C: Conn>(
    c: &mut C,
    boundary: &str,
    id: &str,
    seq: i64,
    content: &[u8],
) -> Result<()> {
    let args = [
        Text(boundary),
        Text(id),
        Int(seq),
        Bytes(content),
        Text(&crate::now()),
    ];
    let written = c
        .execute(INSERT_CHUNK, &args)
        .await
        .map_err(|e| on_insert(e, &format!("chunk {seq} of upload {id}")))?;
    if written == 0 {
        return Err(StoreError::Conflict(format!("upload {id} already exists")));
    }
    Ok(())
}

/// Stores an upload whose chunks are written: checks that they all are, counts it against the
/// boundary's `limit` and writes its row.
pub(crate) async fn store<C: Conn>(c: &mut C, upload: &NewUpload, limit: u64) -> Result<()> {
    boundaries::lock_shared(c, &upload.boundary).await?;
    let key = [Text(&upload.boundary), Text(&upload.id)];
    let chunks = c
        .fetch_optional(COUNT_CHUNKS, &key, |row| row.int("chunks"))
        .await?
        .unwrap_or(0);
    if chunks != upload.chunks {
        return Err(StoreError::Corrupt(format!(
            "upload {} has {chunks} of its {} chunks",
            upload.id, upload.chunks
        )));
    }
    let added = c
        .execute(
            ADD_USAGE,
            &[
                Text(&upload.boundary),
                Int(int(counted(upload.size))),
                Int(int(limit)),
            ],
        )
        .await?;
    if added == 0 {
        let stored = usage(c, &upload.boundary).await?;
        return Err(StoreError::UploadQuota { stored });
    }
    let args = [
        Text(&upload.boundary),
        Text(&upload.id),
        Text(&upload.sha256),
        Int(int(upload.size)),
        Text(&upload.created_at),
    ];
    c.execute(INSERT, &args)
        .await
        .map_err(|e| on_insert(e, &format!("upload {}", upload.id)))?;
    Ok(())
}

pub(crate) async fn get<C: Conn>(c: &mut C, boundary: &str, id: &str) -> Result<UploadRecord> {
    find(c, SELECT, &[Text(boundary), Text(id)], upload).await
}

pub(crate) async fn chunk<C: Conn>(
    c: &mut C,
    boundary: &str,
    id: &str,
    seq: i64,
) -> Result<Option<Vec<u8>>> {
    let args = [Text(boundary), Text(id), Int(seq)];
    Ok(
        c.fetch_optional(SELECT_CHUNK, &args, |row| row.bytes("content"))
            .await?,
    )
}

/// The bytes the boundary's uploads count against its limit (0 without any).
pub(crate) async fn usage<C: Conn>(c: &mut C, boundary: &str) -> Result<u64> {
    let bytes = c
        .fetch_optional(USAGE, &[Text(boundary)], |row| row.int("bytes"))
        .await?;
    Ok(bytes.map_or(0, |b| u64::try_from(b).unwrap_or(0)))
}

/// Marks the upload named now by a resource written in this transaction; `UploadMissing`
/// when it is not (or no longer) stored.
pub(crate) async fn name<C: Conn>(c: &mut C, boundary: &str, id: &str, now: &str) -> Result<()> {
    let named = c
        .execute(NAME, &[Text(boundary), Text(id), Text(now)])
        .await?;
    if named == 0 {
        return Err(StoreError::UploadMissing(id.to_owned()));
    }
    Ok(())
}

/// Deletes at most `max` chunks of an upload that was never stored; how many.
pub(crate) async fn discard<C: Conn>(
    c: &mut C,
    boundary: &str,
    id: &str,
    max: usize,
) -> Result<u64> {
    Ok(
        c.execute(DISCARD, &[Text(boundary), Text(id), Int(limit(max))])
            .await?,
    )
}

/// Deletes at most `max` uploads that no resource names, made or last named before
/// `named_before`, and takes them off their boundaries' usage; how many. Their chunks are
/// left to [`delete_orphan_chunks`].
pub(crate) async fn delete_unnamed<C: Conn>(
    c: &mut C,
    named_before: &str,
    max: usize,
) -> Result<u64> {
    let candidates = c
        .fetch_all(UNNAMED, &[Text(named_before), Int(limit(max))], |row| {
            Ok((row.text("boundary")?, row.text("id")?))
        })
        .await?;
    let mut deleted = 0;
    for (boundary, id) in candidates {
        let size = c
            .fetch_optional(
                DELETE_UNNAMED,
                &[Text(&boundary), Text(&id), Text(named_before)],
                |row| row.int("size"),
            )
            .await?;
        if let Some(size) = size {
            let counted = counted(u64::try_from(size).unwrap_or(0));
            c.execute(SUBTRACT_USAGE, &[Text(&boundary), Int(int(counted))])
                .await?;
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// Deletes at most `max` chunks written before `written_before` that belong to no stored
/// upload; how many.
pub(crate) async fn delete_orphan_chunks<C: Conn>(
    c: &mut C,
    written_before: &str,
    max: usize,
) -> Result<u64> {
    Ok(c.execute(
        DELETE_ORPHAN_CHUNKS,
        &[Text(written_before), Int(limit(max))],
    )
    .await?)
}
