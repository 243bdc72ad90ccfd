//! Resources: guarded creates and plan moves, pages of a boundary's resources, deletes.
//! Every write takes the resource's boundary in a shared lock first (policy changes take it
//! exclusively); a guard then reads every policy of the boundary in the same transaction, so
//! it sees the policies the write commits against. Writes of one boundary's resources do not
//! wait for each other: two creates of one name are decided by the unique index (409), two
//! edits of one resource by the lock on its row (the second reads what the first wrote). A
//! write of a resource that names an upload marks the upload named in the same transaction,
//! and writes nothing when the upload is not stored (`UploadMissing`).

use super::{boundaries, changes, check_if_match, find, find_all, on_insert, uploads};
use crate::sql::record;
use crate::sql::{
    Arg::{self, Int, OptText, Text},
    Conn, Fields,
};
use crate::{
    Edit, Editor, Guard, NewResource, Page, PlanGroup, PoliciesVersion, ResourceKey, ResourceQuery,
    ResourceRecord, Result, StoreError,
};

const SELECT: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, \
     status FROM resources WHERE boundary = $1 AND resource_type = $2 AND name = $3";
/// A page of the boundary's resources of every type, after (`$2`, `$3`) (`''`, `''` for the
/// first page: every type and name is longer), `$4` rows. Each page statement is one range
/// of the primary key's index, so a page reads its own rows only, wherever it starts.
const SELECT_PAGE: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, \
     status FROM resources \
     WHERE boundary = $1 AND (resource_type, name) > ($2, $3) \
     ORDER BY resource_type, name LIMIT $4";
/// A page of the boundary's resources of type `$2`, after the name `$3` (`''` for the first
/// page), `$4` rows.
const SELECT_PAGE_OF_TYPE: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, \
     status FROM resources \
     WHERE boundary = $1 AND resource_type = $2 AND name > $3 \
     ORDER BY name LIMIT $4";
/// A page of the boundary's resources of type `$2` whose body names the plans `$3` (see
/// `plans_named`), after the name `$4`, `$5` rows: one range of `resources_by_plans`.
const SELECT_PAGE_OF_PLANS: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, \
     status FROM resources \
     WHERE boundary = $1 AND resource_type = $2 AND plans = $3 AND name > $4 \
     ORDER BY name LIMIT $5";
/// As `SELECT_PAGE`, of the resources of every type whose body names the plans `$5`.
const SELECT_PAGE_OF_ANY_TYPE_AND_PLANS: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, \
     status FROM resources \
     WHERE boundary = $1 AND (resource_type, name) > ($2, $3) AND plans = $5 \
     ORDER BY resource_type, name LIMIT $4";
/// How many of the boundary's resources name each set of plans, by type: read from the
/// entries of `resources_by_plans`, not from the rows.
const SELECT_PLAN_GROUPS: &str = "SELECT resource_type, plans, COUNT(*) AS resources \
     FROM resources WHERE boundary = $1 \
     GROUP BY resource_type, plans ORDER BY resource_type, plans";
/// Followed by `Conn::SHARE`.
const LOCK_FOR_CREATE: &str = "SELECT policies_version, EXISTS (SELECT 1 FROM resources \
     WHERE boundary = $1 AND resource_type = $2 AND name = $3) AS found \
     FROM boundaries WHERE name = $1";
const INSERT: &str = "INSERT INTO resources \
     (boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, upload, \
      plans) \
     VALUES ($1, $2, $3, $4, $5, $6, $6, $7, $8, $9)";
/// PostgreSQL only (a data-modifying `WITH`): a create in one statement, its own transaction.
/// `lt` sets the lock wait limit (`$9`) before `b` takes the boundary in a shared lock (the
/// lock is taken on the joined row, so after `lt` ran); the row and its change are written
/// only when the boundary is at the policies' version `$8` the guard allowed at (any, when
/// NULL) and the name is free. `$11`: the channel that wakes every replica's reconciler,
/// notified only when a workload placed in a cluster (`$7`) was written; `$12`: the plans the
/// body names. `woke` is read by no one: a `WITH` query that only reads runs only if
/// referenced, so it keeps `w` running.
const CREATE_IN_ONE_STATEMENT: &str = "WITH \
     lt AS MATERIALIZED (SELECT set_config('lock_timeout', $9, true) AS v), \
     b AS (SELECT boundaries.policies_version FROM boundaries, lt \
           WHERE boundaries.name = $1 FOR SHARE OF boundaries), \
     ins AS (INSERT INTO resources \
             (boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, \
              plans) \
             SELECT $1, $2, $3, $4, $5, $6, $6, $7, $12 FROM b \
             WHERE $8::bigint IS NULL OR b.policies_version = $8::bigint \
             ON CONFLICT DO NOTHING RETURNING 1 AS one), \
     ch AS (INSERT INTO changes (boundary, kind, subject, body_json, at) \
            SELECT $1, 'resource.create', $10, $4, $6 FROM ins), \
     w AS (SELECT pg_notify($11, '') FROM ins WHERE $7::text IS NOT NULL) \
     SELECT (SELECT policies_version FROM b) AS version, \
            (SELECT count(*) FROM ins) AS inserted, (SELECT count(*) FROM w) AS woke";
const UPDATE: &str = "UPDATE resources \
     SET body_json = $4, etag = $5, updated_at = $6, cluster = $7, upload = $8, plans = $9 \
     WHERE boundary = $1 AND resource_type = $2 AND name = $3";
/// The workloads placed in a cluster, every boundary's.
const SELECT_IN_CLUSTER: &str =
    "SELECT boundary, resource_type, name, body_json, etag, created_at, updated_at, cluster, \
     status FROM resources WHERE cluster = $1 ORDER BY boundary, resource_type, name";
/// Only when it differs: an unchanged status writes nothing.
const SET_STATUS: &str = "UPDATE resources SET status = $4, status_at = $5 \
     WHERE boundary = $1 AND resource_type = $2 AND name = $3 \
       AND (status IS NULL OR status <> $4)";
const DELETE: &str =
    "DELETE FROM resources WHERE boundary = $1 AND resource_type = $2 AND name = $3";

fn resource(row: &dyn Fields) -> sqlx::Result<ResourceRecord> {
    record! { row, ResourceRecord {
        boundary: text, resource_type: text, name: text, body_json: text, etag: text,
        created_at: text, updated_at: text, cluster: opt_text, status: opt_text,
    } }
}

/// The plans a resource's body names, as the `plans` column keeps them (migration 0017 writes
/// the same for the bodies stored before it): each component's when the body has a list of
/// components, else its `plan`; distinct, in byte order, separated by a space; `""` for none
/// (and for a body that is not JSON). The store reads nothing else of a body.
pub(crate) fn plans_named(body_json: &str) -> String {
    let Ok(body) = serde_json::from_str::<serde_json::Value>(body_json) else {
        return String::new();
    };
    let mut plans: Vec<&str> = match body.get("components") {
        Some(serde_json::Value::Array(components)) => components
            .iter()
            .filter_map(|c| c.get("plan")?.as_str())
            .collect(),
        _ => body
            .get("plan")
            .and_then(|p| p.as_str())
            .into_iter()
            .collect(),
    };
    plans.sort_unstable();
    plans.dedup();
    plans.join(" ")
}

/// The plans of a `plans` column: `""` is none.
fn plans_of_column(column: &str) -> Vec<String> {
    if column.is_empty() {
        return Vec::new();
    }
    column.split(' ').map(str::to_owned).collect()
}

/// `<type>/<name>`: a resource's name in changes and continue tokens.
fn subject(resource_type: &str, name: &str) -> String {
    format!("{resource_type}/{name}")
}

/// Runs `guard` against the boundary's policies as stored at `version`: from what the guard
/// already knows of that version when it can, else on every policy, read now. A failed read
/// is `PolicyUnavailable`, a refusal `Vetoed`; either way the caller writes nothing.
async fn run_guard<C: Conn>(
    c: &mut C,
    boundary: &str,
    version: PoliciesVersion,
    guard: Option<Guard>,
) -> Result<()> {
    let Some(guard) = guard else {
        return Ok(());
    };
    if let Some(answer) = guard.known(boundary, version) {
        return answer.map_err(StoreError::Vetoed);
    }
    let policies = super::policies::read_all(c, boundary)
        .await
        .map_err(StoreError::PolicyUnavailable)?;
    let exceptions = super::exceptions::read_all(c, boundary)
        .await
        .map_err(StoreError::PolicyUnavailable)?;
    guard
        .check(boundary, version, &policies, &exceptions)
        .map_err(StoreError::Vetoed)
}

/// The boundary in a shared lock, its policies' version and whether the name is taken, in one
/// read; `NotFound` when the boundary is not there.
async fn lock_for_create<C: Conn>(
    c: &mut C,
    key: &[Arg<'_>; 3],
) -> Result<(PoliciesVersion, bool)> {
    let statement = format!("{LOCK_FOR_CREATE}{}", C::SHARE);
    find(c, &statement, key, |row| {
        Ok((
            PoliciesVersion(row.int("policies_version")?),
            row.flag("found")?,
        ))
    })
    .await
}

/// Checks in order: boundary exists, name free, then the guard; then writes the row and a
/// `resource.create` change.
pub(crate) async fn create<C: Conn>(
    c: &mut C,
    resource: NewResource,
    guard: Option<Guard>,
) -> Result<ResourceRecord> {
    let subject = subject(&resource.resource_type, &resource.name);
    let key = [
        Text(&resource.boundary),
        Text(&resource.resource_type),
        Text(&resource.name),
    ];
    let (version, taken) = lock_for_create(c, &key).await?;
    if taken {
        return Err(StoreError::Conflict(format!(
            "resource {subject} already exists"
        )));
    }
    run_guard(c, &resource.boundary, version, guard).await?;

    let now = crate::now();
    let etag = crate::etag_of(&[&resource.body_json]);
    let [b, t, n] = key;
    c.execute(
        INSERT,
        &[
            b,
            t,
            n,
            Text(&resource.body_json),
            Text(&etag),
            Text(&now),
            OptText(resource.cluster.as_deref()),
            OptText(resource.upload.as_deref()),
            Text(&plans_named(&resource.body_json)),
        ],
    )
    .await
    .map_err(|e| on_insert(e, &format!("resource {subject}")))?;
    if let Some(upload) = &resource.upload {
        uploads::name(c, &resource.boundary, upload, &now).await?;
    }
    let kind = changes::RESOURCE_CREATE;
    let body = Some(resource.body_json.as_str());
    changes::append(c, &resource.boundary, kind, &subject, body, &now).await?;
    Ok(created(resource, etag, now))
}

/// The record of `resource` as a create wrote it, with its etag and creation time.
fn created(resource: NewResource, etag: String, now: String) -> ResourceRecord {
    let NewResource {
        boundary,
        resource_type,
        name,
        body_json,
        cluster,
        upload: _,
    } = resource;
    ResourceRecord {
        boundary,
        resource_type,
        name,
        body_json,
        etag,
        created_at: now.clone(),
        updated_at: now,
        cluster,
        status: None,
    }
}

/// A create as one statement in a transaction of its own (PostgreSQL, see
/// `CREATE_IN_ONE_STATEMENT`), for a create whose guard allowed it at the boundary's policies'
/// `version` (or that has no guard, `None`): the same checks in the same order as [`create`]
/// (boundary, name, then the policies' version in place of the guard) and the same rows, in
/// one round trip instead of six. Waits for the boundary's lock until `deadline` at most
/// (`Timeout`, nothing written); the commit decides the answer. `None`: the boundary's
/// policies are no longer at `version`; nothing was written, and the create must run again in
/// a transaction of its own ([`create`]), which reads and decides anew.
pub(crate) async fn create_in_one_statement<C: Conn>(
    c: &mut C,
    resource: &NewResource,
    version: Option<PoliciesVersion>,
    deadline: Option<std::time::Instant>,
    wake_channel: &str,
) -> Result<Option<ResourceRecord>> {
    let lock_timeout = match deadline {
        Some(deadline) => format!("{}ms", crate::sql::remaining(deadline)?.as_millis().max(1)),
        None => "0".to_owned(),
    };
    let subject = subject(&resource.resource_type, &resource.name);
    let plans = plans_named(&resource.body_json);
    let now = crate::now();
    let etag = crate::etag_of(&[&resource.body_json]);
    let args = [
        Text(&resource.boundary),
        Text(&resource.resource_type),
        Text(&resource.name),
        Text(&resource.body_json),
        Text(&etag),
        Text(&now),
        OptText(resource.cluster.as_deref()),
        Arg::OptInt(version.map(|v| v.0)),
        Text(&lock_timeout),
        Text(&subject),
        Text(wake_channel),
        Text(&plans),
    ];
    let outcome = c
        .fetch_optional(CREATE_IN_ONE_STATEMENT, &args, |row| {
            Ok((row.opt_int("version")?, row.int("inserted")?))
        })
        .await?;
    // The statement always answers one row; no version there is no boundary.
    let Some((Some(found), inserted)) = outcome else {
        return Err(StoreError::NotFound);
    };
    if inserted > 0 {
        return Ok(Some(created(resource.clone(), etag, now)));
    }
    match version {
        Some(expected) if expected.0 != found => Ok(None),
        _ => Err(StoreError::Conflict(format!(
            "resource {subject} already exists"
        ))),
    }
}

pub(crate) async fn get<C: Conn>(c: &mut C, key: &ResourceKey) -> Result<ResourceRecord> {
    get_with(c, key, SELECT).await
}

/// As [`get`], locking the row until the transaction ends (`Conn::LOCK_ROW`), so that a
/// concurrent edit of the same resource waits and then reads this one's result.
async fn get_for_update<C: Conn>(c: &mut C, key: &ResourceKey) -> Result<ResourceRecord> {
    get_with(c, key, &format!("{SELECT}{}", C::LOCK_ROW)).await
}

async fn get_with<C: Conn>(
    c: &mut C,
    key: &ResourceKey,
    statement: &str,
) -> Result<ResourceRecord> {
    let args = [
        Text(&key.boundary),
        Text(&key.resource_type),
        Text(&key.name),
    ];
    find(c, statement, &args, resource).await
}

/// Ordered by (type, name). See `parse_continue_token` for the token.
pub(crate) async fn list<C: Conn>(
    c: &mut C,
    boundary: &str,
    query: &ResourceQuery,
) -> Result<Page<ResourceRecord>> {
    boundaries::get(c, boundary).await?;
    let after = query
        .after
        .as_deref()
        .map(parse_continue_token)
        .transpose()?;
    let rows = Int(rows_to_read(query.limit));
    let plans = query.plans.as_ref().map(|plans| plans.join(" "));
    let items = match query.resource_type.as_deref() {
        None => {
            let (after_type, after_name) = after.unwrap_or(("", ""));
            let args = [Text(boundary), Text(after_type), Text(after_name), rows];
            match &plans {
                None => c.fetch_all(SELECT_PAGE, &args, resource).await?,
                Some(plans) => {
                    let [b, t, n, rows] = args;
                    let args = [b, t, n, rows, Text(plans)];
                    let statement = SELECT_PAGE_OF_ANY_TYPE_AND_PLANS;
                    c.fetch_all(statement, &args, resource).await?
                }
            }
        }
        Some(ty) => {
            // Of one type, the page starts after a name of that type, at the type's first
            // name after a key of an earlier type, and is empty after a later type's.
            let after_name = match after {
                Some((after_type, after_name)) if after_type == ty => after_name,
                Some((after_type, _)) if after_type > ty => return Ok(into_page(Vec::new(), 0)),
                _ => "",
            };
            match &plans {
                None => {
                    let args = [Text(boundary), Text(ty), Text(after_name), rows];
                    c.fetch_all(SELECT_PAGE_OF_TYPE, &args, resource).await?
                }
                Some(plans) => {
                    let args = [
                        Text(boundary),
                        Text(ty),
                        Text(plans),
                        Text(after_name),
                        rows,
                    ];
                    c.fetch_all(SELECT_PAGE_OF_PLANS, &args, resource).await?
                }
            }
        }
    };
    Ok(into_page(items, query.limit))
}

/// How many of the boundary's resources name each set of plans, by type and plans.
pub(crate) async fn plan_groups<C: Conn>(c: &mut C, boundary: &str) -> Result<Vec<PlanGroup>> {
    boundaries::get(c, boundary).await?;
    let groups = c
        .fetch_all(SELECT_PLAN_GROUPS, &[Text(boundary)], |row| {
            Ok((
                row.text("resource_type")?,
                row.text("plans")?,
                row.int("resources")?,
            ))
        })
        .await?;
    Ok(groups
        .into_iter()
        .map(|(resource_type, plans, resources)| PlanGroup {
            resource_type,
            plans: plans_of_column(&plans),
            resources: u64::try_from(resources).unwrap_or(0),
        })
        .collect())
}

/// A continue token is `<type>/<name>` of the last item of the previous page. Resource types
/// hold no `/`, so the first `/` splits it. A token without `/` names no item: `NotFound`.
fn parse_continue_token(token: &str) -> Result<(&str, &str)> {
    token.split_once('/').ok_or(StoreError::NotFound)
}

/// How many rows a page reads: one more than `limit`, to tell whether more follow. A limit of
/// 0 means no limit.
fn rows_to_read(limit: usize) -> i64 {
    match i64::try_from(limit) {
        Ok(0) | Err(_) => i64::MAX,
        Ok(limit) => limit.saturating_add(1),
    }
}

fn into_page(mut items: Vec<ResourceRecord>, limit: usize) -> Page<ResourceRecord> {
    if limit == 0 || items.len() <= limit {
        return Page { items, next: None };
    }
    items.truncate(limit);
    let next = items.last().map(|r| subject(&r.resource_type, &r.name));
    Page { items, next }
}

/// Reads the current record, checks `if_match`, runs the editor and, for a plan move, its
/// guard; an unchanged body writes nothing.
pub(crate) async fn update<C: Conn>(
    c: &mut C,
    key: &ResourceKey,
    if_match: Option<&str>,
    editor: Editor,
) -> Result<ResourceRecord> {
    let version = boundaries::lock_shared(c, &key.boundary).await?;
    let current = get_for_update(c, key).await?;
    check_if_match(if_match, &current.etag)?;
    let Edit {
        body_json,
        guard,
        cluster,
        upload,
    } = editor(&current).map_err(StoreError::Vetoed)?;
    run_guard(c, &key.boundary, version, guard).await?;
    if body_json == current.body_json && cluster == current.cluster {
        return Ok(current);
    }

    let now = crate::now();
    let etag = crate::etag_of(&[&body_json]);
    let args = [
        Text(&key.boundary),
        Text(&key.resource_type),
        Text(&key.name),
        Text(&body_json),
        Text(&etag),
        Text(&now),
        OptText(cluster.as_deref()),
        OptText(upload.as_deref()),
        Text(&plans_named(&body_json)),
    ];
    c.execute(UPDATE, &args).await?;
    if let Some(upload) = &upload {
        uploads::name(c, &key.boundary, upload, &now).await?;
    }
    let subject = subject(&key.resource_type, &key.name);
    let kind = changes::RESOURCE_UPDATE;
    changes::append(c, &key.boundary, kind, &subject, Some(&body_json), &now).await?;
    let record = ResourceRecord {
        body_json,
        etag,
        updated_at: now,
        cluster,
        ..current
    };
    Ok(record)
}

/// Deletes the resource; answers what it was.
pub(crate) async fn delete<C: Conn>(
    c: &mut C,
    key: &ResourceKey,
    if_match: Option<&str>,
) -> Result<ResourceRecord> {
    boundaries::lock_shared(c, &key.boundary).await?;
    let current = get_for_update(c, key).await?;
    check_if_match(if_match, &current.etag)?;
    let args = [
        Text(&key.boundary),
        Text(&key.resource_type),
        Text(&key.name),
    ];
    c.execute(DELETE, &args).await?;
    let subject = subject(&key.resource_type, &key.name);
    let kind = changes::RESOURCE_DELETE;
    changes::append(c, &key.boundary, kind, &subject, None, &crate::now()).await?;
    Ok(current)
}

/// Every workload placed in `cluster`.
pub(crate) async fn in_cluster<C: Conn>(c: &mut C, cluster: &str) -> Result<Vec<ResourceRecord>> {
    find_all(c, SELECT_IN_CLUSTER, &[Text(cluster)], resource).await
}

/// Sets a resource's status; a resource that is gone, or whose status is already this,
/// is left alone. Answers whether anything was written.
pub(crate) async fn set_status<C: Conn>(
    c: &mut C,
    key: &ResourceKey,
    status: &str,
) -> Result<bool> {
    let args = [
        Text(&key.boundary),
        Text(&key.resource_type),
        Text(&key.name),
        Text(status),
        Text(&crate::now()),
    ];
    Ok(c.execute(SET_STATUS, &args).await? > 0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, reason = "a test fails loudly")]
mod tests {
    use sqlx::sqlite::SqliteConnectOptions;
    use sqlx::{ConnectOptions, Row};

    use super::*;

    /// What SQLite plans for `statement` on the migrated schema, one line per step.
    async fn sqlite_plan(statement: &str) -> Vec<String> {
        let mut c = SqliteConnectOptions::new()
            .in_memory(true)
            .connect()
            .await
            .unwrap();
        sqlx::migrate!("./migrations/sqlite")
            .run(&mut c)
            .await
            .unwrap();
        sqlx::query(&format!("EXPLAIN QUERY PLAN {statement}"))
            .fetch_all(&mut c)
            .await
            .unwrap()
            .iter()
            .map(|row| row.get::<String, _>("detail"))
            .collect()
    }

    /// A page starts where the previous one ended: the index is searched for its first key, not
    /// walked from the boundary's first resource, so a page costs the same wherever it is
    /// (issue 42, item 8: each page of 500 read every resource before it).
    #[tokio::test]
    async fn a_page_is_one_range_of_the_index() {
        let all = sqlite_plan(SELECT_PAGE).await;
        assert_eq!(
            all,
            ["SEARCH resources USING INDEX sqlite_autoindex_resources_1 \
              (boundary=? AND (resource_type,name)>(?,?))"],
        );
        let of_type = sqlite_plan(SELECT_PAGE_OF_TYPE).await;
        assert_eq!(
            of_type,
            ["SEARCH resources USING INDEX sqlite_autoindex_resources_1 \
              (boundary=? AND resource_type=? AND name>?)"],
        );
    }
}
