//! Policies and their history: where a policy is saved (`put`, `apply`), deleted and read.
//! Every write locks the policy's boundary first, so it cannot interleave with a guarded
//! resource write checking the same boundary's policies.

use std::collections::BTreeSet;

use super::{boundaries, changes, check_if_match, on_insert};
use crate::sql::{
    Arg::{Int, OptText, Text},
    Conn, DbResult, Fields,
};
use crate::{PolicyHistoryEntry, PolicyRecord, PolicyWrite, Result, StoreError, WriteAction};

const SELECT_ALL: &str = "SELECT boundary, name, spec_json, metadata_json, \
     etag, created_at, updated_at, updated_by \
     FROM policies WHERE boundary = $1 ORDER BY name";
const SELECT: &str = "SELECT boundary, name, spec_json, metadata_json, \
     etag, created_at, updated_at, updated_by \
     FROM policies WHERE boundary = $1 AND name = $2";
const INSERT: &str = "INSERT INTO policies \
     (boundary, name, spec_json, metadata_json, etag, created_at, updated_at, updated_by) \
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7)";
const UPDATE: &str = "UPDATE policies \
     SET spec_json = $3, metadata_json = $4, etag = $5, updated_at = $6, updated_by = $7 \
     WHERE boundary = $1 AND name = $2";
const DELETE: &str = "DELETE FROM policies WHERE boundary = $1 AND name = $2";
const INSERT_HISTORY: &str = "INSERT INTO policy_history \
     (boundary, name, actor, at, before_json, after_json) VALUES ($1, $2, $3, $4, $5, $6)";
/// One page: the entries after sequence number `$3`, at most `$4` of them.
const SELECT_HISTORY: &str = "SELECT seq, actor, at, before_json, after_json \
     FROM policy_history WHERE boundary = $1 AND name = $2 AND seq > $3 ORDER BY seq LIMIT $4";

fn policy(row: &dyn Fields) -> sqlx::Result<PolicyRecord> {
    Ok(PolicyRecord {
        boundary: row.text("boundary")?,
        name: row.text("name")?,
        spec_json: row.text("spec_json")?,
        metadata_json: row.text("metadata_json")?,
        etag: row.text("etag")?,
        created_at: row.text("created_at")?,
        updated_at: row.text("updated_at")?,
        updated_by: row.text("updated_by")?,
    })
}

fn history_entry(row: &dyn Fields) -> sqlx::Result<PolicyHistoryEntry> {
    Ok(PolicyHistoryEntry {
        seq: row.int("seq")?,
        actor: row.text("actor")?,
        at: row.text("at")?,
        before_json: row.opt_text("before_json")?,
        after_json: row.opt_text("after_json")?,
    })
}

/// The boundary's policies by name; `NotFound` when the boundary does not exist.
pub(crate) async fn list<C: Conn>(c: &mut C, boundary: &str) -> Result<Vec<PolicyRecord>> {
    boundaries::get(c, boundary).await?;
    Ok(read_all(c, boundary).await?)
}

/// Every policy of every boundary, by boundary and name (the reconciler's snapshot).
pub(crate) async fn read_every<C: Conn>(c: &mut C) -> DbResult<Vec<PolicyRecord>> {
    const EVERY: &str = "SELECT boundary, name, spec_json, metadata_json, \
         etag, created_at, updated_at, updated_by FROM policies ORDER BY boundary, name";
    c.fetch_all(EVERY, &[], policy).await
}

/// Every policy of the boundary, as stored (a guard's input: its failure is the caller's to
/// name).
pub(crate) async fn read_all<C: Conn>(c: &mut C, boundary: &str) -> DbResult<Vec<PolicyRecord>> {
    c.fetch_all(SELECT_ALL, &[Text(boundary)], policy).await
}

async fn read<C: Conn>(c: &mut C, boundary: &str, name: &str) -> Result<Option<PolicyRecord>> {
    Ok(
        c.fetch_optional(SELECT, &[Text(boundary), Text(name)], policy)
            .await?,
    )
}

pub(crate) async fn get<C: Conn>(c: &mut C, boundary: &str, name: &str) -> Result<PolicyRecord> {
    read(c, boundary, name).await?.ok_or(StoreError::NotFound)
}

pub(crate) async fn put<C: Conn>(
    c: &mut C,
    write: &PolicyWrite,
    actor: &str,
) -> Result<(PolicyRecord, WriteAction)> {
    boundaries::lock(c, &write.boundary).await?;
    save(c, write, actor).await
}

/// Locks every boundary the writes touch, in name order, then applies them in the order
/// given. Any error leaves the caller's transaction to be rolled back whole.
pub(crate) async fn apply<C: Conn>(
    c: &mut C,
    writes: &[PolicyWrite],
    actor: &str,
) -> Result<Vec<(PolicyRecord, WriteAction)>> {
    let locked: BTreeSet<&str> = writes.iter().map(|w| w.boundary.as_str()).collect();
    for boundary in locked {
        boundaries::lock(c, boundary).await?;
    }
    let mut results = Vec::with_capacity(writes.len());
    for write in writes {
        results.push(save(c, write, actor).await?);
    }
    Ok(results)
}

/// One policy write, its boundary already locked. Identical content is `Unchanged` and
/// writes nothing; otherwise the row, a history entry and a `policy.put` change.
async fn save<C: Conn>(
    c: &mut C,
    write: &PolicyWrite,
    actor: &str,
) -> Result<(PolicyRecord, WriteAction)> {
    let (boundary, name) = (write.boundary.as_str(), write.name.as_str());
    let current = read(c, boundary, name).await?;
    match (&current, &write.if_match) {
        (Some(_), _) if write.create_only => return Err(StoreError::PreconditionFailed),
        (None, Some(_)) => return Err(StoreError::PreconditionFailed),
        (Some(current), if_match) => {
            check_if_match(if_match.as_deref(), &current.etag)?;
            if current.spec_json == write.spec_json && current.metadata_json == write.metadata_json
            {
                return Ok((current.clone(), WriteAction::Unchanged));
            }
        }
        (None, None) => {}
    }

    let now = crate::now();
    let etag = crate::etag_of(&[&write.spec_json, &write.metadata_json]);
    let row = [
        Text(boundary),
        Text(name),
        Text(&write.spec_json),
        Text(&write.metadata_json),
        Text(&etag),
        Text(&now),
        Text(actor),
    ];
    let action = if current.is_some() {
        c.execute(UPDATE, &row).await?;
        WriteAction::Configured
    } else {
        c.execute(INSERT, &row)
            .await
            .map_err(|e| on_insert(e, &format!("policy {name}")))?;
        WriteAction::Created
    };
    let before = current.as_ref().map(|p| p.spec_json.as_str());
    let after = Some(write.spec_json.as_str());
    record_history(c, boundary, name, actor, &now, before, after).await?;
    changes::append(c, boundary, changes::POLICY_PUT, name, after, &now).await?;

    let record = PolicyRecord {
        boundary: boundary.to_owned(),
        name: name.to_owned(),
        spec_json: write.spec_json.clone(),
        metadata_json: write.metadata_json.clone(),
        etag,
        created_at: current.map_or_else(|| now.clone(), |p| p.created_at),
        updated_at: now,
        updated_by: actor.to_owned(),
    };
    Ok((record, action))
}

/// Records that the policy changed from `before_json` to `after_json` (`None`: absent).
async fn record_history<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    actor: &str,
    at: &str,
    before_json: Option<&str>,
    after_json: Option<&str>,
) -> Result<()> {
    let args = [
        Text(boundary),
        Text(name),
        Text(actor),
        Text(at),
        OptText(before_json),
        OptText(after_json),
    ];
    c.execute(INSERT_HISTORY, &args).await?;
    Ok(())
}

pub(crate) async fn delete<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    if_match: Option<&str>,
    actor: &str,
) -> Result<()> {
    boundaries::lock(c, boundary).await?;
    let current = get(c, boundary, name).await?;
    check_if_match(if_match, &current.etag)?;
    c.execute(DELETE, &[Text(boundary), Text(name)]).await?;
    let now = crate::now();
    let before = Some(current.spec_json.as_str());
    record_history(c, boundary, name, actor, &now, before, None).await?;
    changes::append(c, boundary, changes::POLICY_DELETE, name, None, &now).await
}

/// A page of the history, oldest first: at most `limit` entries after sequence number
/// `after` (from the first without it). `NotFound` when the first page is empty (neither the
/// policy nor any history of it exists).
pub(crate) async fn history<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    after: Option<i64>,
    limit: u32,
) -> Result<Vec<PolicyHistoryEntry>> {
    let args = [
        Text(boundary),
        Text(name),
        Int(after.unwrap_or(-1)),
        Int(i64::from(limit)),
    ];
    let entries = c.fetch_all(SELECT_HISTORY, &args, history_entry).await?;
    if entries.is_empty() && after.is_none() {
        return Err(StoreError::NotFound);
    }
    Ok(entries)
}
