//! Boundaries, and the lock that serialises a boundary's writes.

use super::{exists, find, find_all, name, on_insert};
use crate::sql::record;
use crate::sql::{
    Arg::{Int, OptText, Text},
    Conn, Fields,
};
use crate::{BoundaryRecord, PoliciesVersion, Result, StoreError};

const INSERT: &str = "INSERT INTO boundaries (name, display_name, created_at, policies_version) \
     VALUES ($1, $2, $3, $4)";
const SELECT: &str = "SELECT name, display_name, created_at FROM boundaries WHERE name = $1";
const SELECT_ALL: &str = "SELECT name, display_name, created_at FROM boundaries ORDER BY name";
const HAS_RESOURCES: &str = "SELECT EXISTS (SELECT 1 FROM resources WHERE boundary = $1) AS found";
const HAS_POLICIES: &str = "SELECT EXISTS (SELECT 1 FROM policies WHERE boundary = $1) AS found";
const HAS_NAMESPACES: &str =
    "SELECT EXISTS (SELECT 1 FROM namespaces WHERE boundary = $1) AS found";
const DELETE_STATUSES: &str = "DELETE FROM policy_status WHERE boundary = $1";
const DELETE_EXCEPTIONS: &str = "DELETE FROM exceptions WHERE boundary = $1";
const DELETE_REPORTS: &str = "DELETE FROM audit_report WHERE boundary = $1";
const DELETE_ATTACHMENTS: &str = "DELETE FROM boundary_clusters WHERE boundary = $1";
/// A boundary's tokens go with it: a boundary created later under the same name must not
/// inherit them.
const DELETE_TOKENS: &str = "DELETE FROM tokens WHERE boundary = $1";
/// Its uploads' rows and usage; their chunks are left to the sweeper, which deletes them in
/// small batches (a boundary may hold a gigabyte of them).
const DELETE_UPLOADS: &str = "DELETE FROM uploads WHERE boundary = $1";
const DELETE_UPLOAD_USAGE: &str = "DELETE FROM upload_usage WHERE boundary = $1";
const DELETE: &str = "DELETE FROM boundaries WHERE name = $1";

fn boundary(row: &dyn Fields) -> sqlx::Result<BoundaryRecord> {
    record! { row, BoundaryRecord {
        name: text, display_name: opt_text, created_at: text,
    } }
}

pub(crate) async fn create<C: Conn>(
    c: &mut C,
    name: &str,
    display_name: Option<&str>,
) -> Result<BoundaryRecord> {
    let created_at = crate::now();
    // Random, below 2^53: far from overflowing however often its policies change, and unlike
    // the numbers of an earlier boundary of the same name (see `PoliciesVersion`).
    let first_version = (rand::random::<u64>() >> 11) as i64;
    c.execute(
        INSERT,
        &[
            Text(name),
            OptText(display_name),
            Text(&created_at),
            Int(first_version),
        ],
    )
    .await
    .map_err(|e| on_insert(e, &format!("boundary {name}")))?;
    Ok(BoundaryRecord {
        name: name.to_owned(),
        display_name: display_name.map(str::to_owned),
        created_at,
    })
}

pub(crate) async fn get<C: Conn>(c: &mut C, name: &str) -> Result<BoundaryRecord> {
    find(c, SELECT, &[Text(name)], boundary).await
}

/// Every boundary, by name.
pub(crate) async fn list<C: Conn>(c: &mut C) -> Result<Vec<BoundaryRecord>> {
    find_all(c, SELECT_ALL, &[], boundary).await
}

/// Refused while the boundary holds resources, policies or namespaces. Its statuses,
/// exceptions, cluster attachments, tokens and uploads go with it; its history (`policy_history`, `changes`) stays, as
/// the audit trail.
pub(crate) async fn delete<C: Conn>(c: &mut C, name: &str) -> Result<()> {
    lock(c, name).await?;
    let dependents = [
        (HAS_RESOURCES, "boundary has resources"),
        (HAS_POLICIES, "boundary has policies"),
        (HAS_NAMESPACES, "boundary has namespaces"),
    ];
    for (statement, refusal) in dependents {
        if exists(c, statement, &[Text(name)]).await? {
            return Err(StoreError::Conflict(refusal.into()));
        }
    }
    for statement in [
        DELETE_STATUSES,
        DELETE_EXCEPTIONS,
        DELETE_REPORTS,
        DELETE_ATTACHMENTS,
        DELETE_TOKENS,
        DELETE_UPLOADS,
        DELETE_UPLOAD_USAGE,
        DELETE,
    ] {
        c.execute(statement, &[Text(name)]).await?;
    }
    Ok(())
}

/// `NotFound` when the boundary does not exist; otherwise locks it until the transaction
/// ends (`Conn::LOCK_BOUNDARY`), which serialises the boundary's guarded writes and policy
/// changes.
pub(crate) async fn lock<C: Conn>(c: &mut C, boundary: &str) -> Result<()> {
    lock_with(c, C::LOCK_BOUNDARY, boundary).await
}

/// As [`lock`], in a shared lock (`Conn::SHARE`): resource writes hold it, so they wait for
/// a policy change of the boundary (and it for them) but not for each other. Answers the
/// boundary's policies' version.
pub(crate) async fn lock_shared<C: Conn>(c: &mut C, boundary: &str) -> Result<PoliciesVersion> {
    let statement = format!("{LOCK_SHARED}{}", C::SHARE);
    find(c, &statement, &[Text(boundary)], version).await
}

const LOCK_SHARED: &str = "SELECT policies_version FROM boundaries WHERE name = $1";

fn version(row: &dyn Fields) -> sqlx::Result<PoliciesVersion> {
    Ok(PoliciesVersion(row.int("policies_version")?))
}

async fn lock_with<C: Conn>(c: &mut C, statement: &str, boundary: &str) -> Result<()> {
    match c.fetch_optional(statement, &[Text(boundary)], name).await? {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound),
    }
}
