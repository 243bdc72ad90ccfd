//! Exceptions and their history (SPEC 7). Every write locks the exception's boundary first:
//! it changes the boundary's policies' version (a trigger), so a guarded resource write
//! decides with or without it, never half.

use super::documents::{self, Change, DocumentKind, HistoryRow};
use super::{boundaries, changes, check_if_match, find_all};
use crate::sql::record;
use crate::sql::{
    Arg::{OptText, Text},
    Conn, DbResult, Fields,
};
use crate::{
    ExceptionHistoryEntry, ExceptionInstall, ExceptionRecord, ExceptionWrite, Result, StoreError,
    WriteAction,
};

pub(crate) const REQUESTED: &str = "requested";
pub(crate) const APPROVED: &str = "approved";

/// The boundary's exceptions in one state (approved, or requested), but one.
const COUNT: &str = "SELECT COUNT(*) AS n FROM exceptions \
     WHERE boundary = $1 AND state = $2 AND name <> $3";

/// Exceptions as versioned documents: their history names what was done (`put`, `approve`,
/// `delete`).
pub(crate) struct Exceptions;

impl DocumentKind for Exceptions {
    type Record = ExceptionRecord;
    type HistoryEntry = ExceptionHistoryEntry;
    const NOUN: &'static str = "exception";
    const TABLE: &'static str = "exceptions";
    const COLUMNS: &'static str = "boundary, name, policy, spec_json, expires_at, etag, state, \
         requested_by, approved_by, approved_at, created_at, updated_at, updated_by";
    const HISTORY_TABLE: &'static str = "exception_history";
    const HISTORY_ACTIONS: bool = true;
    const VERSIONED: bool = false;
    const PUT_CHANGE: &'static str = changes::EXCEPTION_PUT;
    const DELETE_CHANGE: &'static str = changes::EXCEPTION_DELETE;
    const INSERT: &'static str = "INSERT INTO exceptions (boundary, name, policy, spec_json, \
         expires_at, etag, state, requested_by, approved_by, approved_at, created_at, updated_at, \
         updated_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11, $12)";
    const UPDATE: &'static str = "UPDATE exceptions SET policy = $3, spec_json = $4, \
         expires_at = $5, etag = $6, state = $7, requested_by = $8, approved_by = $9, \
         approved_at = $10, updated_at = $11, updated_by = $12 WHERE boundary = $1 AND name = $2";

    fn record(row: &dyn Fields) -> sqlx::Result<ExceptionRecord> {
        record! { row, ExceptionRecord {
            boundary: text, name: text, policy: text, spec_json: text, expires_at: text,
            etag: text, state: text, requested_by: text, approved_by: opt_text,
            approved_at: opt_text, created_at: text, updated_at: text, updated_by: text,
        } }
    }

    fn history_entry(e: HistoryRow) -> ExceptionHistoryEntry {
        let (seq, actor, at, action) = (e.seq, e.actor, e.at, e.action.unwrap_or_default());
        let (before_json, after_json) = (e.before_json, e.after_json);
        ExceptionHistoryEntry {
            seq,
            actor,
            at,
            action,
            before_json,
            after_json,
        }
    }

    fn version(record: &ExceptionRecord) -> (&str, &str) {
        (&record.etag, &record.spec_json)
    }
}

/// Every exception of every boundary, by boundary and name (the reconciler's snapshot).
pub(crate) async fn read_every<C: Conn>(c: &mut C) -> DbResult<Vec<ExceptionRecord>> {
    documents::read_every::<Exceptions, C>(c).await
}

/// Every exception of the boundary, as stored (a guard's input).
pub(crate) async fn read_all<C: Conn>(c: &mut C, boundary: &str) -> DbResult<Vec<ExceptionRecord>> {
    documents::read_all::<Exceptions, C>(c, boundary).await
}

/// Every approved exception of every boundary not expired at `now` (the reconciler's input).
pub(crate) async fn read_in_force<C: Conn>(c: &mut C, now: &str) -> Result<Vec<ExceptionRecord>> {
    let statement = format!(
        "SELECT {} FROM exceptions WHERE state = '{APPROVED}' AND expires_at > $1 \
         ORDER BY boundary, name",
        Exceptions::COLUMNS
    );
    find_all(c, &statement, &[Text(now)], Exceptions::record).await
}

/// Saves an exception. The same spec is `Unchanged` (an approver's write of a request
/// approves it). Otherwise the spec is saved approved by the writer, or as a request; a
/// request again when a developer changes an approved exception. Approved exceptions and
/// pending requests count apart: one entering either state past its limit is `Conflict`.
pub(crate) async fn put<C: Conn>(
    c: &mut C,
    write: &ExceptionWrite,
    actor: &str,
) -> Result<(ExceptionRecord, WriteAction)> {
    let (boundary, name) = (write.boundary.as_str(), write.name.as_str());
    boundaries::lock(c, boundary).await?;
    let current = documents::read::<Exceptions, C>(c, boundary, name).await?;
    match &current {
        Some(_) if write.create_only => {
            return Err(StoreError::Conflict(format!(
                "exception '{name}' already exists in boundary '{boundary}'"
            )))
        }
        Some(current) => {
            check_if_match(write.if_match.as_deref(), &current.etag)?;
            let approved_already = current.state == APPROVED || !write.approve;
            if current.spec_json == write.spec_json && approved_already {
                return Ok((current.clone(), WriteAction::Unchanged));
            }
        }
        None if write.if_match.is_some() => return Err(StoreError::PreconditionFailed),
        None => {}
    }
    let now = crate::now();
    let (state, approved_by, approved_at) = if write.approve {
        (APPROVED, Some(actor), Some(now.as_str()))
    } else {
        (REQUESTED, None, None)
    };
    if current.as_ref().is_none_or(|c| c.state != state) {
        check_room(c, write, state).await?;
    }
    // An approver's write of the same spec approves the request: the requester stays.
    let same_spec = current
        .as_ref()
        .is_some_and(|c| c.spec_json == write.spec_json);
    let requested_by = match &current {
        Some(current) if same_spec => current.requested_by.clone(),
        _ => actor.to_owned(),
    };
    let etag = crate::etag_of(&[&write.spec_json, state]);
    let row = [
        Text(boundary),
        Text(name),
        Text(&write.policy),
        Text(&write.spec_json),
        Text(&write.expires_at),
        Text(&etag),
        Text(state),
        Text(&requested_by),
        OptText(approved_by),
        OptText(approved_at),
        Text(&now),
        Text(actor),
    ];
    let action = documents::write_row::<Exceptions, C>(c, current.is_some(), name, &row).await?;
    let change = Change {
        boundary,
        name,
        actor,
        at: &now,
        action: if same_spec && write.approve {
            "approve"
        } else {
            "put"
        },
        before_json: current.as_ref().map(|e| e.spec_json.as_str()),
        after_json: Some(&write.spec_json),
        version: None,
        restored_version: None,
    };
    documents::written::<Exceptions, C>(c, &change).await?;
    let record = ExceptionRecord {
        boundary: boundary.to_owned(),
        name: name.to_owned(),
        policy: write.policy.clone(),
        spec_json: write.spec_json.clone(),
        expires_at: write.expires_at.clone(),
        etag,
        state: state.to_owned(),
        requested_by,
        approved_by: approved_by.map(str::to_owned),
        approved_at: approved_at.map(str::to_owned),
        created_at: current.map_or_else(|| now.clone(), |e| e.created_at),
        updated_at: now,
        updated_by: actor.to_owned(),
    };
    Ok((record, action))
}

/// `Conflict` unless the boundary has room for one more exception in `state`: at most
/// `max_per_boundary` approved ones and, apart from them, `max_requests_per_boundary` pending
/// requests.
async fn check_room<C: Conn>(c: &mut C, write: &ExceptionWrite, state: &str) -> Result<()> {
    let boundary = write.boundary.as_str();
    let args = [Text(boundary), Text(state), Text(&write.name)];
    let count = c
        .fetch_optional(COUNT, &args, |row| row.int("n"))
        .await?
        .unwrap_or(0);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if state == APPROVED && count >= write.max_per_boundary {
        return Err(StoreError::Conflict(format!(
            "boundary '{boundary}' holds {count} approved exceptions, the most it may hold"
        )));
    }
    if state == REQUESTED && count >= write.max_requests_per_boundary {
        return Err(StoreError::Conflict(format!(
            "boundary '{boundary}' holds {count} pending exception requests, the most it may \
             hold: an admin or boundary-admin of '{boundary}' must approve or delete one first"
        )));
    }
    Ok(())
}

const DELETE_INSTALLS: &str = "DELETE FROM exception_installs WHERE cluster = $1";
const INSERT_INSTALL: &str = "INSERT INTO exception_installs \
     (cluster, boundary, exception, expires_at, installed_at, status) \
     VALUES ($1, $2, $3, $4, $5, $6)";
const SELECT_INSTALLS: &str = "SELECT cluster, boundary, exception, expires_at, installed_at, \
     status FROM exception_installs WHERE boundary = $1 ORDER BY exception, cluster";
const SELECT_CLUSTER_INSTALLS: &str = "SELECT cluster, boundary, exception, expires_at, \
     installed_at, status FROM exception_installs WHERE cluster = $1 ORDER BY boundary, exception";

fn install(row: &dyn Fields) -> sqlx::Result<ExceptionInstall> {
    record! { row, ExceptionInstall {
        cluster: text, boundary: text, exception: text, expires_at: text, installed_at: text,
        status: text,
    } }
}

/// Replaces what is installed in `cluster` with `installs`.
pub(crate) async fn replace_installs<C: Conn>(
    c: &mut C,
    cluster: &str,
    installs: &[ExceptionInstall],
) -> Result<()> {
    c.execute(DELETE_INSTALLS, &[Text(cluster)]).await?;
    for i in installs {
        let args = [
            Text(cluster),
            Text(&i.boundary),
            Text(&i.exception),
            Text(&i.expires_at),
            Text(&i.installed_at),
            Text(&i.status),
        ];
        c.execute(INSERT_INSTALL, &args).await?;
    }
    Ok(())
}

/// Where the boundary's exceptions are installed, by exception and cluster.
pub(crate) async fn installs_of<C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<ExceptionInstall>> {
    find_all(c, SELECT_INSTALLS, &[Text(boundary)], install).await
}

/// What is installed in `cluster`.
pub(crate) async fn installs_in<C: Conn>(
    c: &mut C,
    cluster: &str,
) -> Result<Vec<ExceptionInstall>> {
    find_all(c, SELECT_CLUSTER_INSTALLS, &[Text(cluster)], install).await
}
