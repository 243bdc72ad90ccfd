//! The store's operations, written once for both backends. Each runs on a connection the
//! backend hands it: a write transaction it opened (SQLite: `BEGIN IMMEDIATE`; PostgreSQL: a
//! transaction in which `lock_boundary` takes `SELECT ... FOR UPDATE`), or a pooled
//! connection for a read. The backend commits or rolls back (`sql::finish`).

use std::collections::BTreeSet;

use crate::sql::{self, Arg, Conn};
use crate::{
    BoundaryRecord, ChangeRecord, ClusterRecord, Edit, Editor, Guard, NamespaceRecord, NewResource,
    Page, PolicyHistoryEntry, PolicyRecord, PolicyStatusRecord, PolicyWrite, ResourceKey,
    ResourceQuery, ResourceRecord, Result, StoreError, TokenRecord, WriteAction,
};

use Arg::{Bytes, Int, OptBool, OptText, Text};

pub(crate) async fn ping<C: Conn>(c: &mut C) -> Result<()> {
    c.execute(sql::PING, &[]).await?;
    Ok(())
}

// ---- boundaries ----

pub(crate) async fn create_boundary<C: Conn>(
    c: &mut C,
    name: &str,
    display_name: Option<&str>,
) -> Result<BoundaryRecord> {
    let created_at = crate::now();
    c.execute(
        sql::INSERT_BOUNDARY,
        &[Text(name), OptText(display_name), Text(&created_at)],
    )
    .await
    .map_err(|e| sql::on_insert(e, &format!("boundary {name}")))?;
    Ok(BoundaryRecord {
        name: name.to_owned(),
        display_name: display_name.map(str::to_owned),
        created_at,
    })
}

pub(crate) async fn get_boundary<C: Conn>(c: &mut C, name: &str) -> Result<BoundaryRecord> {
    let row = c
        .fetch_optional(sql::SELECT_BOUNDARY, &[Text(name)], sql::boundary)
        .await?;
    row.ok_or(StoreError::NotFound)
}

pub(crate) async fn list_boundaries<C: Conn>(c: &mut C) -> Result<Vec<BoundaryRecord>> {
    Ok(c.fetch_all(sql::SELECT_BOUNDARIES, &[], sql::boundary)
        .await?)
}

/// Refused while the boundary holds resources, policies or namespaces. Its cluster attachments and its
/// tokens go with it; its history (`policy_history`, `changes`) stays, as the audit trail.
pub(crate) async fn delete_boundary<C: Conn>(c: &mut C, name: &str) -> Result<()> {
    lock_boundary(c, name).await?;
    if exists(c, sql::BOUNDARY_HAS_RESOURCES, &[Text(name)]).await? {
        return Err(StoreError::Conflict("boundary has resources".into()));
    }
    if exists(c, sql::BOUNDARY_HAS_POLICIES, &[Text(name)]).await? {
        return Err(StoreError::Conflict("boundary has policies".into()));
    }
    if exists(c, sql::BOUNDARY_HAS_NAMESPACES, &[Text(name)]).await? {
        return Err(StoreError::Conflict("boundary has namespaces".into()));
    }
    c.execute(sql::DELETE_BOUNDARY_STATUSES, &[Text(name)])
        .await?;
    c.execute(sql::DELETE_BOUNDARY_ATTACHMENTS, &[Text(name)])
        .await?;
    c.execute(sql::DELETE_BOUNDARY_TOKENS, &[Text(name)])
        .await?;
    c.execute(sql::DELETE_BOUNDARY, &[Text(name)]).await?;
    Ok(())
}

/// `NotFound` when the boundary does not exist; on PostgreSQL, locks its row until the
/// transaction ends, which serialises the boundary's guarded writes and policy changes.
async fn lock_boundary<C: Conn>(c: &mut C, name: &str) -> Result<()> {
    match c
        .fetch_optional(C::LOCK_BOUNDARY, &[Text(name)], sql::name)
        .await?
    {
        Some(_) => Ok(()),
        None => Err(StoreError::NotFound),
    }
}

async fn exists<C: Conn>(c: &mut C, statement: &str, args: &[Arg<'_>]) -> Result<bool> {
    let found = c.fetch_optional(statement, args, sql::found).await?;
    Ok(found.unwrap_or(false))
}

async fn append_change<C: Conn>(
    c: &mut C,
    boundary: &str,
    kind: &str,
    subject: &str,
    body_json: Option<&str>,
    at: &str,
) -> Result<()> {
    c.execute(
        sql::INSERT_CHANGE,
        &[
            Text(boundary),
            Text(kind),
            Text(subject),
            OptText(body_json),
            Text(at),
        ],
    )
    .await?;
    Ok(())
}

// ---- policies ----

pub(crate) async fn list_policies<C: Conn>(c: &mut C, boundary: &str) -> Result<Vec<PolicyRecord>> {
    get_boundary(c, boundary).await?;
    Ok(read_policies(c, boundary).await?)
}

async fn read_policies<C: Conn>(c: &mut C, boundary: &str) -> sqlx::Result<Vec<PolicyRecord>> {
    c.fetch_all(sql::SELECT_POLICIES, &[Text(boundary)], sql::policy)
        .await
}

async fn read_policy<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
) -> Result<Option<PolicyRecord>> {
    Ok(c.fetch_optional(
        sql::SELECT_POLICY,
        &[Text(boundary), Text(name)],
        sql::policy,
    )
    .await?)
}

pub(crate) async fn get_policy<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
) -> Result<PolicyRecord> {
    read_policy(c, boundary, name)
        .await?
        .ok_or(StoreError::NotFound)
}

pub(crate) async fn put_policy<C: Conn>(
    c: &mut C,
    write: &PolicyWrite,
    actor: &str,
) -> Result<(PolicyRecord, WriteAction)> {
    lock_boundary(c, &write.boundary).await?;
    write_policy(c, write, actor).await
}

/// Locks every boundary the writes touch, in name order, then applies them in the order
/// given. Any error leaves the caller's transaction to be rolled back whole.
pub(crate) async fn apply_policies<C: Conn>(
    c: &mut C,
    writes: &[PolicyWrite],
    actor: &str,
) -> Result<Vec<(PolicyRecord, WriteAction)>> {
    let boundaries: BTreeSet<&str> = writes.iter().map(|w| w.boundary.as_str()).collect();
    for boundary in boundaries {
        lock_boundary(c, boundary).await?;
    }
    let mut results = Vec::with_capacity(writes.len());
    for write in writes {
        results.push(write_policy(c, write, actor).await?);
    }
    Ok(results)
}

/// One policy write, its boundary already locked. Identical content is `Unchanged` and
/// writes nothing; otherwise the row, a history entry and a `policy.put` change.
async fn write_policy<C: Conn>(
    c: &mut C,
    write: &PolicyWrite,
    actor: &str,
) -> Result<(PolicyRecord, WriteAction)> {
    let (boundary, name) = (write.boundary.as_str(), write.name.as_str());
    let current = read_policy(c, boundary, name).await?;
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
        c.execute(sql::UPDATE_POLICY, &row).await?;
        WriteAction::Configured
    } else {
        c.execute(sql::INSERT_POLICY, &row)
            .await
            .map_err(|e| sql::on_insert(e, &format!("policy {name}")))?;
        WriteAction::Created
    };
    let before = current.as_ref().map(|p| p.spec_json.as_str());
    record_history(
        c,
        boundary,
        name,
        actor,
        &now,
        before,
        Some(&write.spec_json),
    )
    .await?;
    append_change(
        c,
        boundary,
        sql::POLICY_PUT,
        name,
        Some(&write.spec_json),
        &now,
    )
    .await?;

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

async fn record_history<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    actor: &str,
    at: &str,
    before_json: Option<&str>,
    after_json: Option<&str>,
) -> Result<()> {
    c.execute(
        sql::INSERT_POLICY_HISTORY,
        &[
            Text(boundary),
            Text(name),
            Text(actor),
            Text(at),
            OptText(before_json),
            OptText(after_json),
        ],
    )
    .await?;
    Ok(())
}

pub(crate) async fn delete_policy<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
    if_match: Option<&str>,
    actor: &str,
) -> Result<()> {
    lock_boundary(c, boundary).await?;
    let current = get_policy(c, boundary, name).await?;
    check_if_match(if_match, &current.etag)?;
    c.execute(sql::DELETE_POLICY, &[Text(boundary), Text(name)])
        .await?;
    let now = crate::now();
    record_history(
        c,
        boundary,
        name,
        actor,
        &now,
        Some(&current.spec_json),
        None,
    )
    .await?;
    append_change(c, boundary, sql::POLICY_DELETE, name, None, &now).await?;
    Ok(())
}

pub(crate) async fn policy_history<C: Conn>(
    c: &mut C,
    boundary: &str,
    name: &str,
) -> Result<Vec<PolicyHistoryEntry>> {
    let entries = c
        .fetch_all(
            sql::SELECT_POLICY_HISTORY,
            &[Text(boundary), Text(name)],
            sql::history_entry,
        )
        .await?;
    if entries.is_empty() {
        return Err(StoreError::NotFound);
    }
    Ok(entries)
}

// ---- resources ----

/// Runs `guard` on every policy of the boundary, as stored. A failed read is
/// `PolicyUnavailable`, a refusal `Vetoed`; either way the caller writes nothing.
async fn run_guard<C: Conn>(c: &mut C, boundary: &str, guard: Guard) -> Result<Vec<String>> {
    let policies = read_policies(c, boundary)
        .await
        .map_err(StoreError::PolicyUnavailable)?;
    guard(&policies).map_err(StoreError::Vetoed)
}

async fn read_resource<C: Conn>(c: &mut C, key: &ResourceKey) -> Result<Option<ResourceRecord>> {
    let args = [
        Text(&key.boundary),
        Text(&key.resource_type),
        Text(&key.name),
    ];
    Ok(c.fetch_optional(sql::SELECT_RESOURCE, &args, sql::resource)
        .await?)
}

fn subject(resource_type: &str, name: &str) -> String {
    format!("{resource_type}/{name}")
}

pub(crate) async fn create_resource<C: Conn>(
    c: &mut C,
    resource: NewResource,
    guard: Option<Guard>,
) -> Result<(ResourceRecord, Vec<String>)> {
    let NewResource {
        boundary,
        resource_type,
        name,
        body_json,
    } = resource;
    lock_boundary(c, &boundary).await?;
    let key = [Text(&boundary), Text(&resource_type), Text(&name)];
    if exists(c, sql::RESOURCE_EXISTS, &key).await? {
        return Err(StoreError::Conflict(format!(
            "resource {} already exists",
            subject(&resource_type, &name)
        )));
    }
    let warnings = match guard {
        Some(guard) => run_guard(c, &boundary, guard).await?,
        None => Vec::new(),
    };

    let now = crate::now();
    let etag = crate::etag_of(&[&body_json]);
    let subject = subject(&resource_type, &name);
    c.execute(
        sql::INSERT_RESOURCE,
        &[
            Text(&boundary),
            Text(&resource_type),
            Text(&name),
            Text(&body_json),
            Text(&etag),
            Text(&now),
        ],
    )
    .await
    .map_err(|e| sql::on_insert(e, &format!("resource {subject}")))?;
    append_change(
        c,
        &boundary,
        sql::RESOURCE_CREATE,
        &subject,
        Some(&body_json),
        &now,
    )
    .await?;

    let record = ResourceRecord {
        boundary,
        resource_type,
        name,
        body_json,
        etag,
        created_at: now.clone(),
        updated_at: now,
    };
    Ok((record, warnings))
}

pub(crate) async fn get_resource<C: Conn>(c: &mut C, key: &ResourceKey) -> Result<ResourceRecord> {
    read_resource(c, key).await?.ok_or(StoreError::NotFound)
}

/// Ordered by (type, name). See `parse_continue_token` for the token.
pub(crate) async fn list_resources<C: Conn>(
    c: &mut C,
    boundary: &str,
    query: &ResourceQuery,
) -> Result<Page<ResourceRecord>> {
    get_boundary(c, boundary).await?;
    let after = query
        .after
        .as_deref()
        .map(parse_continue_token)
        .transpose()?;
    let (after_type, after_name) = after.unzip();
    let items = c
        .fetch_all(
            sql::SELECT_RESOURCES_PAGE,
            &[
                Text(boundary),
                OptText(query.resource_type.as_deref()),
                OptText(after_type),
                OptText(after_name),
                Int(rows_to_read(query.limit)),
            ],
            sql::resource,
        )
        .await?;
    Ok(into_page(items, query.limit))
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

pub(crate) async fn update_resource<C: Conn>(
    c: &mut C,
    key: &ResourceKey,
    if_match: Option<&str>,
    editor: Editor,
) -> Result<(ResourceRecord, Vec<String>)> {
    lock_boundary(c, &key.boundary).await?;
    let current = get_resource(c, key).await?;
    check_if_match(if_match, &current.etag)?;
    let Edit { body_json, guard } = editor(&current).map_err(StoreError::Vetoed)?;
    let warnings = match guard {
        Some(guard) => run_guard(c, &key.boundary, guard).await?,
        None => Vec::new(),
    };
    if body_json == current.body_json {
        return Ok((current, warnings));
    }

    let now = crate::now();
    let etag = crate::etag_of(&[&body_json]);
    c.execute(
        sql::UPDATE_RESOURCE,
        &[
            Text(&key.boundary),
            Text(&key.resource_type),
            Text(&key.name),
            Text(&body_json),
            Text(&etag),
            Text(&now),
        ],
    )
    .await?;
    let subject = subject(&key.resource_type, &key.name);
    append_change(
        c,
        &key.boundary,
        sql::RESOURCE_UPDATE,
        &subject,
        Some(&body_json),
        &now,
    )
    .await?;
    let record = ResourceRecord {
        body_json,
        etag,
        updated_at: now,
        ..current
    };
    Ok((record, warnings))
}

pub(crate) async fn delete_resource<C: Conn>(
    c: &mut C,
    key: &ResourceKey,
    if_match: Option<&str>,
) -> Result<()> {
    lock_boundary(c, &key.boundary).await?;
    let current = get_resource(c, key).await?;
    check_if_match(if_match, &current.etag)?;
    c.execute(
        sql::DELETE_RESOURCE,
        &[
            Text(&key.boundary),
            Text(&key.resource_type),
            Text(&key.name),
        ],
    )
    .await?;
    let subject = subject(&key.resource_type, &key.name);
    append_change(
        c,
        &key.boundary,
        sql::RESOURCE_DELETE,
        &subject,
        None,
        &crate::now(),
    )
    .await
}

/// `PreconditionFailed` unless `if_match` is absent or names `etag`.
fn check_if_match(if_match: Option<&str>, etag: &str) -> Result<()> {
    match if_match {
        Some(value) if !crate::if_match_matches(value, etag) => Err(StoreError::PreconditionFailed),
        _ => Ok(()),
    }
}

// ---- changes ----

pub(crate) async fn list_changes<C: Conn>(c: &mut C, boundary: &str) -> Result<Vec<ChangeRecord>> {
    let changes = c
        .fetch_all(sql::SELECT_CHANGES, &[Text(boundary)], sql::change)
        .await?;
    Ok(changes)
}

// ---- tokens ----

/// `Conflict` when the id or the secret is taken, `NotFound` when the boundary is unknown.
pub(crate) async fn create_token<C: Conn>(c: &mut C, token: &TokenRecord) -> Result<()> {
    c.execute(
        sql::INSERT_TOKEN,
        &[
            Text(&token.id),
            Text(&token.secret_sha256),
            Text(&token.role),
            OptText(token.boundary.as_deref()),
            Text(&token.created_at),
            OptText(token.expires_at.as_deref()),
            Text(&token.created_by),
        ],
    )
    .await
    .map_err(|e| sql::on_insert(e, "token"))?;
    Ok(())
}

/// Creates `token` when there is none at all. The caller holds a database-wide lock.
pub(crate) async fn bootstrap_admin_token<C: Conn>(c: &mut C, token: &TokenRecord) -> Result<bool> {
    let count = c.fetch_optional(sql::COUNT_TOKENS, &[], sql::count).await?;
    if count.unwrap_or(0) > 0 {
        return Ok(false);
    }
    create_token(c, token).await?;
    Ok(true)
}

pub(crate) async fn token_by_secret_hash<C: Conn>(
    c: &mut C,
    secret_sha256: &str,
) -> Result<TokenRecord> {
    let row = c
        .fetch_optional(
            sql::SELECT_TOKEN_BY_HASH,
            &[Text(secret_sha256)],
            sql::token,
        )
        .await?;
    row.ok_or(StoreError::NotFound)
}

pub(crate) async fn list_tokens<C: Conn>(
    c: &mut C,
    boundary: Option<&str>,
) -> Result<Vec<TokenRecord>> {
    let tokens = c
        .fetch_all(sql::SELECT_TOKENS, &[OptText(boundary)], sql::token)
        .await?;
    Ok(tokens)
}

pub(crate) async fn get_token<C: Conn>(c: &mut C, id: &str) -> Result<TokenRecord> {
    let row = c
        .fetch_optional(sql::SELECT_TOKEN, &[Text(id)], sql::token)
        .await?;
    row.ok_or(StoreError::NotFound)
}

pub(crate) async fn delete_token<C: Conn>(c: &mut C, id: &str) -> Result<()> {
    touched(c.execute(sql::DELETE_TOKEN, &[Text(id)]).await?)
}

/// `NotFound` when a delete or an update touched no row.
fn touched(rows: u64) -> Result<()> {
    if rows == 0 {
        Err(StoreError::NotFound)
    } else {
        Ok(())
    }
}

// ---- clusters ----

pub(crate) async fn put_cluster<C: Conn>(
    c: &mut C,
    name: &str,
    kubeconfig_sealed: &[u8],
) -> Result<bool> {
    let args = [Text(name), Bytes(kubeconfig_sealed), Text(&crate::now())];
    if c.execute(sql::INSERT_CLUSTER, &args).await? == 1 {
        return Ok(true);
    }
    c.execute(sql::UPDATE_CLUSTER_SEALED, &args).await?;
    Ok(false)
}

pub(crate) async fn get_cluster<C: Conn>(c: &mut C, name: &str) -> Result<ClusterRecord> {
    let row = c
        .fetch_optional(sql::SELECT_CLUSTER, &[Text(name)], sql::cluster)
        .await?;
    row.ok_or(StoreError::NotFound)
}

pub(crate) async fn list_clusters<C: Conn>(c: &mut C) -> Result<Vec<ClusterRecord>> {
    Ok(c.fetch_all(sql::SELECT_CLUSTERS, &[], sql::cluster).await?)
}

/// Forgets the cluster's namespaces and statuses, detaches it from every boundary, then
/// deletes it.
pub(crate) async fn delete_cluster<C: Conn>(c: &mut C, name: &str) -> Result<()> {
    c.execute(sql::DELETE_CLUSTER_NAMESPACES, &[Text(name)])
        .await?;
    c.execute(sql::DELETE_CLUSTER_STATUSES, &[Text(name)])
        .await?;
    c.execute(sql::DELETE_CLUSTER_ATTACHMENTS, &[Text(name)])
        .await?;
    touched(c.execute(sql::DELETE_CLUSTER, &[Text(name)]).await?)
}

pub(crate) async fn set_cluster_status<C: Conn>(
    c: &mut C,
    name: &str,
    kubernetes_version: Option<&str>,
    admission_enforced: Option<bool>,
    admission_reason: Option<&str>,
) -> Result<()> {
    let rows = c
        .execute(
            sql::UPDATE_CLUSTER_STATUS,
            &[
                Text(name),
                OptText(kubernetes_version),
                OptBool(admission_enforced),
                OptText(admission_reason),
                Text(&crate::now()),
            ],
        )
        .await?;
    touched(rows)
}

pub(crate) async fn attach_cluster<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
) -> Result<bool> {
    get_boundary(c, boundary).await?;
    if !exists(c, sql::CLUSTER_EXISTS, &[Text(cluster)]).await? {
        return Err(StoreError::NotFound);
    }
    let rows = c
        .execute(
            sql::ATTACH_CLUSTER,
            &[Text(boundary), Text(cluster), Text(&crate::now())],
        )
        .await
        .map_err(|e| sql::on_insert(e, "attachment"))?;
    Ok(rows == 1)
}

/// `NotFound` when the cluster is not attached to the boundary; `Conflict` while the
/// boundary has namespaces in it (they would keep its label and lose its policies).
pub(crate) async fn detach_cluster<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
) -> Result<()> {
    if exists(
        c,
        sql::BOUNDARY_HAS_NAMESPACES_IN,
        &[Text(boundary), Text(cluster)],
    )
    .await?
    {
        return Err(StoreError::Conflict(format!(
            "boundary '{boundary}' has namespaces in cluster '{cluster}'; delete them first"
        )));
    }
    c.execute(sql::DELETE_STATUSES_OF, &[Text(cluster), Text(boundary)])
        .await?;
    touched(
        c.execute(sql::DETACH_CLUSTER, &[Text(boundary), Text(cluster)])
            .await?,
    )
}

pub(crate) async fn boundary_clusters<C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<ClusterRecord>> {
    get_boundary(c, boundary).await?;
    Ok(c.fetch_all(
        sql::SELECT_BOUNDARY_CLUSTERS,
        &[Text(boundary)],
        sql::cluster,
    )
    .await?)
}

// ---- reconciler ----

/// The value stored under `key`, or `candidate` stored and returned when there is none.
pub(crate) async fn setting_or_insert<C: Conn>(
    c: &mut C,
    key: &str,
    candidate: &str,
) -> Result<String> {
    c.execute(sql::INSERT_SETTING, &[Text(key), Text(candidate)])
        .await?;
    c.fetch_optional(sql::SELECT_SETTING, &[Text(key)], sql::name)
        .await?
        .ok_or_else(|| StoreError::Corrupt(format!("setting {key} vanished")))
}

pub(crate) async fn set_cluster_error<C: Conn>(
    c: &mut C,
    name: &str,
    error: Option<&str>,
) -> Result<()> {
    touched(
        c.execute(sql::UPDATE_CLUSTER_ERROR, &[Text(name), OptText(error)])
            .await?,
    )
}

/// `NotFound` when the boundary or the cluster is unknown or the cluster is not attached to
/// the boundary; `Conflict` when another boundary holds the namespace. `true` when new.
pub(crate) async fn put_namespace<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
) -> Result<bool> {
    lock_boundary(c, boundary).await?;
    if !exists(c, sql::CLUSTER_ATTACHED, &[Text(boundary), Text(cluster)]).await? {
        return Err(StoreError::NotFound);
    }
    if let Some(existing) = c
        .fetch_optional(
            sql::SELECT_NAMESPACE,
            &[Text(cluster), Text(name)],
            sql::namespace,
        )
        .await?
    {
        return if existing.boundary == boundary {
            Ok(false)
        } else {
            Err(StoreError::Conflict(format!(
                "namespace '{name}' in cluster '{cluster}' belongs to boundary '{}'",
                existing.boundary
            )))
        };
    }
    c.execute(
        sql::INSERT_NAMESPACE,
        &[
            Text(cluster),
            Text(name),
            Text(boundary),
            Text(&crate::now()),
        ],
    )
    .await
    .map_err(|e| sql::on_insert(e, &format!("namespace {name}")))?;
    Ok(true)
}

/// The namespace when the boundary holds it (`NotFound` otherwise).
pub(crate) async fn get_namespace<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
) -> Result<NamespaceRecord> {
    c.fetch_optional(
        sql::SELECT_NAMESPACE,
        &[Text(cluster), Text(name)],
        sql::namespace,
    )
    .await?
    .filter(|n| n.boundary == boundary)
    .ok_or(StoreError::NotFound)
}

pub(crate) async fn list_namespaces<C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<NamespaceRecord>> {
    get_boundary(c, boundary).await?;
    Ok(c.fetch_all(
        sql::SELECT_BOUNDARY_NAMESPACES,
        &[Text(boundary)],
        sql::namespace,
    )
    .await?)
}

pub(crate) async fn cluster_namespaces<C: Conn>(
    c: &mut C,
    cluster: &str,
) -> Result<Vec<NamespaceRecord>> {
    Ok(c.fetch_all(
        sql::SELECT_CLUSTER_NAMESPACES,
        &[Text(cluster)],
        sql::namespace,
    )
    .await?)
}

pub(crate) async fn delete_namespace<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
) -> Result<()> {
    lock_boundary(c, boundary).await?;
    touched(
        c.execute(
            sql::DELETE_NAMESPACE,
            &[Text(boundary), Text(cluster), Text(name)],
        )
        .await?,
    )
}

/// Replaces every status of `boundary`'s policies in `cluster` with `statuses`.
pub(crate) async fn replace_policy_statuses<C: Conn>(
    c: &mut C,
    cluster: &str,
    boundary: &str,
    statuses: &[PolicyStatusRecord],
) -> Result<()> {
    c.execute(sql::DELETE_STATUSES_OF, &[Text(cluster), Text(boundary)])
        .await?;
    for status in statuses {
        c.execute(
            sql::INSERT_STATUS,
            &[
                Text(boundary),
                Text(&status.policy),
                Text(cluster),
                Text(&status.policy_etag),
                Text(&status.status),
                Text(&status.updated_at),
            ],
        )
        .await?;
    }
    Ok(())
}

pub(crate) async fn policy_statuses<C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<PolicyStatusRecord>> {
    Ok(c.fetch_all(
        sql::SELECT_BOUNDARY_STATUSES,
        &[Text(boundary)],
        sql::policy_status,
    )
    .await?)
}
