//! The log of committed changes in boundaries, in commit order (one sequence per store).
//! Every write of a policy or a resource appends to it in its own transaction.

use super::find_all;
use crate::sql::record;
use crate::sql::{
    Arg::{Int, OptText, Text},
    Conn, Fields,
};
use crate::{ChangeRecord, Result};

pub(crate) const POLICY_PUT: &str = "policy.put";
pub(crate) const POLICY_DELETE: &str = "policy.delete";
pub(crate) const POLICY_ROLLOUT: &str = "policy.rollout";
pub(crate) const EXCEPTION_PUT: &str = "exception.put";
pub(crate) const EXCEPTION_DELETE: &str = "exception.delete";
pub(crate) const RESOURCE_CREATE: &str = "resource.create";
pub(crate) const RESOURCE_UPDATE: &str = "resource.update";
pub(crate) const RESOURCE_DELETE: &str = "resource.delete";

const INSERT: &str =
    "INSERT INTO changes (boundary, kind, subject, body_json, at) VALUES ($1, $2, $3, $4, $5)";
/// Changes outlive their boundary (they are the audit trail), so this reads whatever rows
/// carry the name, without looking the boundary up.
const SELECT: &str = "SELECT seq, boundary, kind, subject, body_json, at \
     FROM changes WHERE boundary = $1 ORDER BY seq";

fn change(row: &dyn Fields) -> sqlx::Result<ChangeRecord> {
    record! { row, ChangeRecord {
        seq: int, boundary: text, kind: text, subject: text, body_json: opt_text, at: text,
    } }
}

/// One change: `kind` one of the constants above, `subject` a policy name or
/// `<type>/<name>`, `body_json` the document after the change (`None` for a delete).
pub(crate) async fn append<C: Conn>(
    c: &mut C,
    boundary: &str,
    kind: &str,
    subject: &str,
    body_json: Option<&str>,
    at: &str,
) -> Result<()> {
    let args = [
        Text(boundary),
        Text(kind),
        Text(subject),
        OptText(body_json),
        Text(at),
    ];
    c.execute(INSERT, &args).await?;
    Ok(())
}

/// Per boundary, the sequence number of its latest change (0 when none is left): one index
/// lookup of `changes_by_boundary` per boundary.
const LATEST_BY_BOUNDARY: &str = "SELECT name AS boundary, \
     COALESCE((SELECT MAX(seq) FROM changes WHERE changes.boundary = boundaries.name), 0) AS seq \
     FROM boundaries";

/// Every boundary with the sequence number of its latest change (see `LATEST_BY_BOUNDARY`).
pub(crate) async fn latest_by_boundary<C: Conn>(c: &mut C) -> Result<Vec<(String, i64)>> {
    find_all(c, LATEST_BY_BOUNDARY, &[], |row| {
        Ok((row.text("boundary")?, row.int("seq")?))
    })
    .await
}

pub(crate) async fn list<C: Conn>(c: &mut C, boundary: &str) -> Result<Vec<ChangeRecord>> {
    find_all(c, SELECT, &[Text(boundary)], change).await
}

/// Deletes up to `batch` of the oldest rows of `table` made before `before` (RFC 3339, as
/// `crate::now` writes it). Rows are appended in time order, so the oldest sequence numbers
/// come first and the scan stops after the batch. Of a policy's or an exception's history the
/// newest entry always stays, however old: a live object's history is never empty.
pub(crate) async fn prune<C: Conn>(
    c: &mut C,
    table: HistoryTable,
    before: &str,
    batch: i64,
) -> Result<u64> {
    let statement = match table {
        HistoryTable::Changes => PRUNE_CHANGES,
        HistoryTable::PolicyHistory => PRUNE_POLICY_HISTORY,
        HistoryTable::ExceptionHistory => PRUNE_EXCEPTION_HISTORY,
    };
    Ok(c.execute(statement, &[Text(before), Int(batch)]).await?)
}

/// The tables history retention prunes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum HistoryTable {
    Changes,
    PolicyHistory,
    ExceptionHistory,
}

const PRUNE_CHANGES: &str = "DELETE FROM changes WHERE seq IN \
     (SELECT seq FROM changes WHERE at < $1 ORDER BY seq LIMIT $2)";
/// Old rows that a newer row of the same policy follows (the index by policy finds it).
const PRUNE_POLICY_HISTORY: &str = "DELETE FROM policy_history WHERE seq IN \
     (SELECT h.seq FROM policy_history h WHERE h.at < $1 AND EXISTS \
       (SELECT 1 FROM policy_history n \
        WHERE n.boundary = h.boundary AND n.name = h.name AND n.seq > h.seq) \
      ORDER BY h.seq LIMIT $2)";
/// Old rows that a newer row of the same exception follows.
const PRUNE_EXCEPTION_HISTORY: &str = "DELETE FROM exception_history WHERE seq IN \
     (SELECT h.seq FROM exception_history h WHERE h.at < $1 AND EXISTS \
       (SELECT 1 FROM exception_history n \
        WHERE n.boundary = h.boundary AND n.name = h.name AND n.seq > h.seq) \
      ORDER BY h.seq LIMIT $2)";
