//! Versioned, historied boundary documents, written once: a document lives in a boundary under
//! a name, carries an etag, and every change to it adds a history entry and a committed change.
//! Policies and exceptions are its kinds (`DocumentKind`); what a kind adds (a policy's
//! metadata, an exception's approval) stays in its own module, which saves the row and calls
//! `written` for the rest.

use super::{boundaries, changes, check_if_match, on_insert};
use crate::sql::{
    Arg::{self, Int, OptInt, OptText, Text},
    Conn, DbResult, Fields,
};
use crate::{Result, StoreError, WriteAction};

/// What makes one kind of document: its name in messages, its tables and the decoding of its
/// rows. Every table is keyed by `(boundary, name)`; every history table has the columns
/// `seq, actor, at, before_json, after_json`, and `action` when `HISTORY_ACTIONS`.
pub(crate) trait DocumentKind {
    type Record: Clone + Send;
    type HistoryEntry: Send;
    /// The kind in messages (`policy {name} already exists`).
    const NOUN: &'static str;
    const TABLE: &'static str;
    /// The columns `record` reads, in the order the kind's `INSERT`/`UPDATE` write them.
    const COLUMNS: &'static str;
    const HISTORY_TABLE: &'static str;
    /// Whether a history entry names what was done (`put`, `approve`, `delete`).
    const HISTORY_ACTIONS: bool;
    /// Whether every saved spec is numbered (`version` on the row and in the history).
    const VERSIONED: bool;
    /// The kinds of the committed changes a save and a delete append.
    const PUT_CHANGE: &'static str;
    const DELETE_CHANGE: &'static str;
    /// Inserts a row: `$1` boundary, `$2` name, then the kind's own columns.
    const INSERT: &'static str;
    /// Updates the row of boundary `$1` and name `$2`, with the arguments of `INSERT`.
    const UPDATE: &'static str;

    fn record(row: &dyn Fields) -> sqlx::Result<Self::Record>;
    fn history_entry(entry: HistoryRow) -> Self::HistoryEntry;
    /// The record's etag and its spec (as JSON).
    fn version(record: &Self::Record) -> (&str, &str);
}

/// A history entry of any kind, as read (`action`: of kinds with `HISTORY_ACTIONS`).
pub(crate) struct HistoryRow {
    pub seq: i64,
    pub actor: String,
    pub at: String,
    pub action: Option<String>,
    /// Of kinds that are `VERSIONED`: the version an entry saved (none for a deletion), and
    /// the earlier version a rollback restored.
    pub version: Option<i64>,
    pub restored_version: Option<i64>,
    /// Of kinds that are `VERSIONED`: a move of a staged rollout, in words.
    pub event: Option<String>,
    pub before_json: Option<String>,
    pub after_json: Option<String>,
}

fn history_row<K: DocumentKind>(row: &dyn Fields) -> sqlx::Result<K::HistoryEntry> {
    Ok(K::history_entry(HistoryRow {
        seq: row.int("seq")?,
        actor: row.text("actor")?,
        at: row.text("at")?,
        action: if K::HISTORY_ACTIONS {
            Some(row.text("action")?)
        } else {
            None
        },
        version: if K::VERSIONED {
            row.opt_int("version")?
        } else {
            None
        },
        restored_version: if K::VERSIONED {
            row.opt_int("restored_version")?
        } else {
            None
        },
        event: if K::VERSIONED {
            row.opt_text("event")?
        } else {
            None
        },
        before_json: row.opt_text("before_json")?,
        after_json: row.opt_text("after_json")?,
    }))
}

/// The boundary's documents by name; `NotFound` when the boundary does not exist.
pub(crate) async fn list<K: DocumentKind, C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<K::Record>> {
    boundaries::get(c, boundary).await?;
    Ok(read_all::<K, C>(c, boundary).await?)
}

/// Every document of every boundary, by boundary and name (the reconciler's snapshot).
pub(crate) async fn read_every<K: DocumentKind, C: Conn>(c: &mut C) -> DbResult<Vec<K::Record>> {
    let statement = format!(
        "SELECT {} FROM {} ORDER BY boundary, name",
        K::COLUMNS,
        K::TABLE
    );
    c.fetch_all(&statement, &[], K::record).await
}

/// Every document of the boundary, as stored (a guard's input: its failure is the caller's
/// to name).
pub(crate) async fn read_all<K: DocumentKind, C: Conn>(
    c: &mut C,
    boundary: &str,
) -> DbResult<Vec<K::Record>> {
    let statement = format!(
        "SELECT {} FROM {} WHERE boundary = $1 ORDER BY name",
        K::COLUMNS,
        K::TABLE
    );
    c.fetch_all(&statement, &[Text(boundary)], K::record).await
}

/// The document, or `None`.
pub(crate) async fn read<K: DocumentKind, C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
) -> Result<Option<K::Record>> {
    let statement = format!(
        "SELECT {} FROM {} WHERE boundary = $1 AND name = $2",
        K::COLUMNS,
        K::TABLE
    );
    Ok(
        c.fetch_optional(&statement, &[Text(boundary), Text(name)], K::record)
            .await?,
    )
}

pub(crate) async fn get<K: DocumentKind, C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
) -> Result<K::Record> {
    read::<K, C>(c, boundary, name)
        .await?
        .ok_or(StoreError::NotFound)
}

/// Writes the row of document `name`, `row` being the arguments of the kind's `INSERT` and
/// `UPDATE`: an update when the document `exists`, else an insert (`Conflict` when the name is
/// taken meanwhile, `NotFound` when the boundary is gone).
pub(crate) async fn write_row<K: DocumentKind, C: Conn>(
    c: &mut C,
    exists: bool,
    name: &str,
    row: &[Arg<'_>],
) -> Result<WriteAction> {
    if exists {
        c.execute(K::UPDATE, row).await?;
        return Ok(WriteAction::Configured);
    }
    c.execute(K::INSERT, row)
        .await
        .map_err(|e| on_insert(e, &format!("{} {name}", K::NOUN)))?;
    Ok(WriteAction::Created)
}

/// A change of one document, as its history and the change log record it.
pub(crate) struct Change<'a> {
    pub boundary: &'a str,
    pub name: &'a str,
    pub actor: &'a str,
    pub at: &'a str,
    /// What was done, in the history of kinds with `HISTORY_ACTIONS`.
    pub action: &'a str,
    pub before_json: Option<&'a str>,
    /// `None`: the document was deleted.
    pub after_json: Option<&'a str>,
    /// The version saved, of kinds that are `VERSIONED`, and the earlier version a rollback
    /// restored.
    pub version: Option<i64>,
    pub restored_version: Option<i64>,
}

/// Records a change: a history entry and a committed change (the kind's put or delete).
pub(crate) async fn written<K: DocumentKind, C: Conn>(
    c: &mut C,
    change: &Change<'_>,
) -> Result<()> {
    let mut columns = String::from("boundary, name, actor, at, before_json, after_json");
    let mut args = vec![
        Text(change.boundary),
        Text(change.name),
        Text(change.actor),
        Text(change.at),
        OptText(change.before_json),
        OptText(change.after_json),
    ];
    if K::HISTORY_ACTIONS {
        columns.push_str(", action");
        args.push(Text(change.action));
    }
    if K::VERSIONED {
        columns.push_str(", version, restored_version");
        args.push(OptInt(change.version));
        args.push(OptInt(change.restored_version));
    }
    let values: Vec<String> = (1..=args.len()).map(|i| format!("${i}")).collect();
    let statement = format!(
        "INSERT INTO {} ({columns}) VALUES ({})",
        K::HISTORY_TABLE,
        values.join(", ")
    );
    c.execute(&statement, &args).await?;
    let kind = if change.after_json.is_some() {
        K::PUT_CHANGE
    } else {
        K::DELETE_CHANGE
    };
    changes::append(
        c,
        change.boundary,
        kind,
        change.name,
        change.after_json,
        change.at,
    )
    .await
}

/// Deletes a document as `if_match` read it (`PreconditionFailed` otherwise), its boundary
/// locked first, and records the deletion.
pub(crate) async fn delete<K: DocumentKind, C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    if_match: Option<&str>,
    actor: &str,
) -> Result<()> {
    boundaries::lock(c, boundary).await?;
    let current = get::<K, C>(c, boundary, name).await?;
    let (etag, spec_json) = K::version(&current);
    check_if_match(if_match, etag)?;
    let statement = format!("DELETE FROM {} WHERE boundary = $1 AND name = $2", K::TABLE);
    c.execute(&statement, &[Text(boundary), Text(name)]).await?;
    let now = crate::now();
    let change = Change {
        boundary,
        name,
        actor,
        at: &now,
        action: "delete",
        before_json: Some(spec_json),
        after_json: None,
        version: None,
        restored_version: None,
    };
    written::<K, C>(c, &change).await
}

/// A page of the history, oldest first: at most `limit` entries after sequence number
/// `after` (from the first without it). `NotFound` when the first page is empty (neither the
/// document nor any history of it exists).
pub(crate) async fn history<K: DocumentKind, C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    after: Option<i64>,
    limit: u32,
) -> Result<Vec<K::HistoryEntry>> {
    let action = if K::HISTORY_ACTIONS { "action, " } else { "" };
    let version = if K::VERSIONED {
        "version, restored_version, event, "
    } else {
        ""
    };
    let statement = format!(
        "SELECT seq, actor, at, {action}{version}before_json, after_json FROM {} \
         WHERE boundary = $1 AND name = $2 AND seq > $3 ORDER BY seq LIMIT $4",
        K::HISTORY_TABLE
    );
    let args = [
        Text(boundary),
        Text(name),
        Int(after.unwrap_or(-1)),
        Int(i64::from(limit)),
    ];
    let entries = c.fetch_all(&statement, &args, history_row::<K>).await?;
    if entries.is_empty() && after.is_none() {
        return Err(StoreError::NotFound);
    }
    Ok(entries)
}
