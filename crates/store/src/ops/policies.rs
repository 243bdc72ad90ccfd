//! Policies and their history: where a policy is saved (`put`, `apply`), deleted and read.
//! Every write locks the policy's boundary first, so it cannot interleave with a guarded
//! resource write checking the same boundary's policies.

use std::collections::BTreeSet;

use super::documents::{self, Change, DocumentKind, HistoryRow};
use super::{boundaries, changes, check_if_match};
use crate::sql::record;
use crate::sql::{
    Arg::{Int, OptText, Text},
    Conn, DbResult, Fields,
};
use crate::{
    PolicyHistoryEntry, PolicyRecord, PolicyWrite, Result, RolloutMove, StoreError, WriteAction,
};

/// Policies as versioned documents.
pub(crate) struct Policies;

impl DocumentKind for Policies {
    type Record = PolicyRecord;
    type HistoryEntry = PolicyHistoryEntry;
    const NOUN: &'static str = "policy";
    const TABLE: &'static str = "policies";
    const COLUMNS: &'static str = "boundary, name, spec_json, metadata_json, \
         etag, created_at, updated_at, updated_by, version, rollout_json";
    const HISTORY_TABLE: &'static str = "policy_history";
    const HISTORY_ACTIONS: bool = false;
    const VERSIONED: bool = true;
    const PUT_CHANGE: &'static str = changes::POLICY_PUT;
    const DELETE_CHANGE: &'static str = changes::POLICY_DELETE;
    const INSERT: &'static str = "INSERT INTO policies \
         (boundary, name, spec_json, metadata_json, etag, created_at, updated_at, updated_by, \
          version, rollout_json) \
         VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9)";
    const UPDATE: &'static str = "UPDATE policies \
         SET spec_json = $3, metadata_json = $4, etag = $5, updated_at = $6, updated_by = $7, \
         version = $8, rollout_json = $9 \
         WHERE boundary = $1 AND name = $2";

    fn record(row: &dyn Fields) -> sqlx::Result<PolicyRecord> {
        record! { row, PolicyRecord {
            boundary: text, name: text, spec_json: text, metadata_json: text, etag: text,
            created_at: text, updated_at: text, updated_by: text, version: int,
            rollout_json: opt_text,
        } }
    }

    fn history_entry(e: HistoryRow) -> PolicyHistoryEntry {
        let (seq, actor, at, version) = (e.seq, e.actor, e.at, e.version);
        let (before_json, after_json) = (e.before_json, e.after_json);
        PolicyHistoryEntry {
            seq,
            actor,
            at,
            version,
            restored_version: e.restored_version,
            event: e.event,
            before_json,
            after_json,
        }
    }

    fn version(record: &PolicyRecord) -> (&str, &str) {
        (&record.etag, &record.spec_json)
    }
}

/// Every policy of every boundary, by boundary and name (the reconciler's snapshot).
pub(crate) async fn read_every<C: Conn>(c: &mut C) -> DbResult<Vec<PolicyRecord>> {
    documents::read_every::<Policies, C>(c).await
}

/// Every policy of the boundary, as stored (a guard's input: its failure is the caller's to
/// name).
pub(crate) async fn read_all<C: Conn>(c: &mut C, boundary: &str) -> DbResult<Vec<PolicyRecord>> {
    documents::read_all::<Policies, C>(c, boundary).await
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
/// writes nothing (unless `rewrite_identical`); otherwise the row, a history entry and a `policy.put` change.
async fn save<C: Conn>(
    c: &mut C,
    write: &PolicyWrite,
    actor: &str,
) -> Result<(PolicyRecord, WriteAction)> {
    let (boundary, name) = (write.boundary.as_str(), write.name.as_str());
    let current = documents::read::<Policies, C>(c, boundary, name).await?;
    match (&current, &write.if_match) {
        (Some(_), _) if write.create_only => return Err(StoreError::PreconditionFailed),
        (None, Some(_)) => return Err(StoreError::PreconditionFailed),
        (Some(current), if_match) => {
            check_if_match(if_match.as_deref(), &current.etag)?;
            if current.spec_json == write.spec_json
                && current.metadata_json == write.metadata_json
                && !write.rewrite_identical
            {
                return Ok((current.clone(), WriteAction::Unchanged));
            }
        }
        (None, None) => {}
    }

    let now = crate::now();
    let etag = crate::etag_of(&[&write.spec_json, &write.metadata_json]);
    let version = next_version(c, boundary, name, current.as_ref()).await?;
    let rollout_json = write
        .rollout
        .as_ref()
        .and_then(|decide| (decide.0)(current.as_ref(), version));
    let row = [
        Text(boundary),
        Text(name),
        Text(&write.spec_json),
        Text(&write.metadata_json),
        Text(&etag),
        Text(&now),
        Text(actor),
        Int(version),
        OptText(rollout_json.as_deref()),
    ];
    let action = documents::write_row::<Policies, C>(c, current.is_some(), name, &row).await?;
    let change = Change {
        boundary,
        name,
        actor,
        at: &now,
        action: "put",
        before_json: current.as_ref().map(|p| p.spec_json.as_str()),
        after_json: Some(&write.spec_json),
        version: Some(version),
        restored_version: write.restores,
    };
    documents::written::<Policies, C>(c, &change).await?;

    let record = PolicyRecord {
        boundary: boundary.to_owned(),
        name: name.to_owned(),
        spec_json: write.spec_json.clone(),
        metadata_json: write.metadata_json.clone(),
        etag,
        created_at: current.map_or_else(|| now.clone(), |p| p.created_at),
        updated_at: now,
        updated_by: actor.to_owned(),
        version,
        rollout_json,
    };
    Ok((record, action))
}

/// The version a save of policy `name` makes: one after the policy's own, or after the last of
/// its history when it is new (a policy deleted and made again numbers on; SPEC 8).
async fn next_version<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    current: Option<&PolicyRecord>,
) -> Result<i64> {
    let last = c
        .fetch_optional(
            "SELECT MAX(version) AS version FROM policy_history WHERE boundary = $1 AND name = $2",
            &[Text(boundary), Text(name)],
            |row| row.opt_int("version"),
        )
        .await?
        .flatten()
        .unwrap_or(0);
    Ok(last.max(current.map_or(0, |p| p.version)) + 1)
}

/// The spec that version `version` of policy `name` saved, from its history; `None` when the
/// history holds no such version (never made, or pruned).
pub(crate) async fn version_spec<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    version: i64,
) -> Result<Option<String>> {
    Ok(c.fetch_optional(
        "SELECT after_json FROM policy_history \
             WHERE boundary = $1 AND name = $2 AND version = $3 AND after_json IS NOT NULL",
        &[Text(boundary), Text(name), Int(version)],
        |row| row.text("after_json"),
    )
    .await?)
}

/// Moves the rollout of policy `name` (a promotion, a pause, an abort; SPEC 8) where it is
/// still at the move's version and as read, and records a `policy.rollout` change, so that the
/// clusters follow, and, with an `event`, an entry of the policy's history. `NotFound`: no such policy; `PreconditionFailed`: the policy is at another
/// version now, or its rollout changed since it was read.
pub(crate) async fn set_rollout<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    rollout: RolloutMove<'_>,
    at: &str,
) -> Result<PolicyRecord> {
    let RolloutMove {
        version,
        expected,
        rollout_json,
        event,
        actor,
    } = rollout;
    boundaries::lock(c, boundary).await?;
    let Some(mut current) = documents::read::<Policies, C>(c, boundary, name).await? else {
        return Err(StoreError::NotFound);
    };
    if current.version != version || current.rollout_json.as_deref() != expected {
        return Err(StoreError::PreconditionFailed);
    }
    c.execute(
        "UPDATE policies SET rollout_json = $3 WHERE boundary = $1 AND name = $2",
        &[Text(boundary), Text(name), OptText(rollout_json)],
    )
    .await?;
    changes::append(c, boundary, changes::POLICY_ROLLOUT, name, rollout_json, at).await?;
    if let Some(event) = event {
        c.execute(
            "INSERT INTO policy_history \
                 (boundary, name, actor, at, before_json, after_json, version, event) \
             VALUES ($1, $2, $3, $4, $5, $5, $6, $7)",
            &[
                Text(boundary),
                Text(name),
                Text(actor),
                Text(at),
                Text(&current.spec_json),
                Int(version),
                Text(event),
            ],
        )
        .await?;
    }
    current.rollout_json = rollout_json.map(str::to_owned);
    Ok(current)
}
