//! Code uploaded for builds: written by the application, read by the build Job's fetch.

use crate::sql::{
    Arg::{Bytes, Int, Text},
    Conn, Fields,
};
use crate::{Result, UploadRecord};

use super::{boundaries, find, on_insert};

const INSERT: &str = "INSERT INTO uploads (boundary, id, sha256, size, content, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6)";
const SELECT: &str = "SELECT boundary, id, sha256, content, created_at \
     FROM uploads WHERE boundary = $1 AND id = $2";

fn upload(row: &dyn Fields) -> sqlx::Result<UploadRecord> {
    Ok(UploadRecord {
        boundary: row.text("boundary")?,
        id: row.text("id")?,
        sha256: row.text("sha256")?,
        content: row.bytes("content")?,
        created_at: row.text("created_at")?,
    })
}

pub(crate) async fn put<C: Conn>(c: &mut C, upload: &UploadRecord) -> Result<()> {
    boundaries::lock_shared(c, &upload.boundary).await?;
    let size = i64::try_from(upload.content.len()).unwrap_or(i64::MAX);
    let args = [
        Text(&upload.boundary),
        Text(&upload.id),
        Text(&upload.sha256),
        Int(size),
        Bytes(&upload.content),
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
