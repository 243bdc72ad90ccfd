//! Clusters (platform-level), what the reconciler last learned of each, and their
//! attachment to boundaries.

use super::{boundaries, exists, find, find_all, on_insert, statuses, touched};
use crate::sql::record;
use crate::sql::{
    Arg::{Bytes, Int, OptBool, OptText, Text},
    Conn, Fields,
};
use crate::{ClusterRecord, Result, StoreError};

const SELECT: &str = "SELECT name, kubeconfig_sealed, kubernetes_version, admission_enforced, \
     admission_reason, last_error, apiserver_restarts, apiserver_restarted_at, repairs, last_repair, last_repair_at, \
     admission_layout, admission_layout_reason, reserved_namespaces, created_at, updated_at \
     FROM clusters WHERE name = $1";
const SELECT_ALL: &str = "SELECT name, kubeconfig_sealed, kubernetes_version, \
     admission_enforced, admission_reason, last_error, apiserver_restarts, apiserver_restarted_at, repairs, last_repair, last_repair_at, \
     admission_layout, admission_layout_reason, reserved_namespaces, created_at, updated_at \
     FROM clusters ORDER BY name";
const SELECT_OF_BOUNDARY: &str = "SELECT name, kubeconfig_sealed, kubernetes_version, \
     admission_enforced, admission_reason, last_error, apiserver_restarts, apiserver_restarted_at, repairs, last_repair, last_repair_at, \
     admission_layout, admission_layout_reason, reserved_namespaces, created_at, updated_at \
     FROM clusters \
     WHERE name IN (SELECT cluster FROM boundary_clusters WHERE boundary = $1) \
     ORDER BY name";
const EXISTS: &str = "SELECT EXISTS (SELECT 1 FROM clusters WHERE name = $1) AS found";
/// Inserts nothing when the name is taken (no error, so a PostgreSQL transaction goes on).
const INSERT: &str = "INSERT INTO clusters \
     (name, kubeconfig_sealed, created_at, updated_at) VALUES ($1, $2, $3, $3) \
     ON CONFLICT (name) DO NOTHING";
const UPDATE_SEALED: &str =
    "UPDATE clusters SET kubeconfig_sealed = $2, updated_at = $3 WHERE name = $1";
const UPDATE_RESERVED: &str = "UPDATE clusters SET reserved_namespaces = $2 WHERE name = $1";
const UPDATE_STATUS: &str = "UPDATE clusters \
     SET kubernetes_version = $2, admission_enforced = $3, admission_reason = $4, updated_at = $5 \
     WHERE name = $1";
const UPDATE_ERROR: &str = "UPDATE clusters SET last_error = $2 WHERE name = $1";
const ADD_RESTARTS: &str = "UPDATE clusters \
     SET apiserver_restarts = apiserver_restarts + $2, apiserver_restarted_at = $3 WHERE name = $1";
const ADD_REPAIR: &str = "UPDATE clusters \
     SET repairs = repairs + 1, last_repair = $2, last_repair_at = $3 WHERE name = $1";
const UPDATE_LAYOUT: &str = "UPDATE clusters \
     SET admission_layout = $2, admission_layout_reason = $3 WHERE name = $1";
const DELETE_NAMESPACES: &str = "DELETE FROM namespaces WHERE cluster = $1";
const DELETE_STATUSES: &str = "DELETE FROM policy_status WHERE cluster = $1";
const DELETE_REPORTS: &str = "DELETE FROM audit_report WHERE cluster = $1";
const DELETE_REPORTS_OF: &str = "DELETE FROM audit_report WHERE cluster = $1 AND boundary = $2";
const DELETE_ATTACHMENTS: &str = "DELETE FROM boundary_clusters WHERE cluster = $1";
const DELETE: &str = "DELETE FROM clusters WHERE name = $1";
const ATTACH: &str = "INSERT INTO boundary_clusters \
     (boundary, cluster, attached_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING";
const DETACH: &str = "DELETE FROM boundary_clusters WHERE boundary = $1 AND cluster = $2";
const HAS_NAMESPACES_OF: &str =
    "SELECT EXISTS (SELECT 1 FROM namespaces WHERE boundary = $1 AND cluster = $2) AS found";

fn cluster(row: &dyn Fields) -> sqlx::Result<ClusterRecord> {
    let reserved = row.text("reserved_namespaces")?;
    let reserved_namespaces = reserved.lines().filter(|l| !l.is_empty());
    record! { row, ClusterRecord {
        name: text, kubeconfig_sealed: bytes, kubernetes_version: opt_text,
        admission_enforced: opt_bool, admission_reason: opt_text, last_error: opt_text,
        apiserver_restarts: int, apiserver_restarted_at: opt_text, repairs: int,
        last_repair: opt_text, last_repair_at: opt_text, admission_layout: opt_text,
        admission_layout_reason: opt_text, created_at: text, updated_at: text,
    }, reserved_namespaces = reserved_namespaces.map(str::to_owned).collect() }
}

/// Creates the cluster or replaces its credentials, and with `reserved` its reserved
/// namespaces; `true` when created.
pub(crate) async fn put<C: Conn>(
    c: &mut C,
    name: &str,
    kubeconfig_sealed: &[u8],
    reserved: Option<&[String]>,
) -> Result<bool> {
    let args = [Text(name), Bytes(kubeconfig_sealed), Text(&crate::now())];
    let created = c.execute(INSERT, &args).await? == 1;
    if !created {
        c.execute(UPDATE_SEALED, &args).await?;
    }
    if let Some(reserved) = reserved {
        c.execute(UPDATE_RESERVED, &[Text(name), Text(&reserved.join("\n"))])
            .await?;
    }
    Ok(created)
}

pub(crate) async fn get<C: Conn>(c: &mut C, name: &str) -> Result<ClusterRecord> {
    find(c, SELECT, &[Text(name)], cluster).await
}

pub(crate) async fn list<C: Conn>(c: &mut C) -> Result<Vec<ClusterRecord>> {
    find_all(c, SELECT_ALL, &[], cluster).await
}

/// Forgets the cluster's namespaces, statuses and audit reports, detaches it from every boundary, then
/// deletes it.
const DELETE_EXCEPTION_INSTALLS: &str = "DELETE FROM exception_installs WHERE cluster = $1";

pub(crate) async fn delete<C: Conn>(c: &mut C, name: &str) -> Result<()> {
    for statement in [
        DELETE_NAMESPACES,
        DELETE_STATUSES,
        DELETE_REPORTS,
        DELETE_ATTACHMENTS,
        DELETE_EXCEPTION_INSTALLS,
    ] {
        c.execute(statement, &[Text(name)]).await?;
    }
    touched(c.execute(DELETE, &[Text(name)]).await?)
}

pub(crate) async fn set_status<C: Conn>(
    c: &mut C,
    name: &str,
    kubernetes_version: Option<&str>,
    admission_enforced: Option<bool>,
    admission_reason: Option<&str>,
) -> Result<()> {
    let args = [
        Text(name),
        OptText(kubernetes_version),
        OptBool(admission_enforced),
        OptText(admission_reason),
        Text(&crate::now()),
    ];
    touched(c.execute(UPDATE_STATUS, &args).await?)
}

/// Records (or, with `None`, clears) the reconciler's last error for the cluster.
pub(crate) async fn set_error<C: Conn>(c: &mut C, name: &str, error: Option<&str>) -> Result<()> {
    touched(
        c.execute(UPDATE_ERROR, &[Text(name), OptText(error)])
            .await?,
    )
}

/// Counts `count` more API server starts in the cluster, the last one seen now.
pub(crate) async fn add_restarts<C: Conn>(c: &mut C, name: &str, count: i64) -> Result<()> {
    touched(
        c.execute(ADD_RESTARTS, &[Text(name), Int(count), Text(&crate::now())])
            .await?,
    )
}

/// Counts one more repair in the cluster, `what` (in words) the last one, made now.
pub(crate) async fn add_repair<C: Conn>(c: &mut C, name: &str, what: &str) -> Result<()> {
    touched(
        c.execute(ADD_REPAIR, &[Text(name), Text(what), Text(&crate::now())])
            .await?,
    )
}

/// Records the admission layout in use in the cluster and why; `updated_at` stays.
pub(crate) async fn set_layout<C: Conn>(
    c: &mut C,
    name: &str,
    layout: &str,
    reason: &str,
) -> Result<()> {
    touched(
        c.execute(UPDATE_LAYOUT, &[Text(name), Text(layout), Text(reason)])
            .await?,
    )
}

/// `true` when newly attached; `NotFound` when the boundary or the cluster is unknown.
pub(crate) async fn attach<C: Conn>(c: &mut C, boundary: &str, cluster: &str) -> Result<bool> {
    boundaries::get(c, boundary).await?;
    if !exists(c, EXISTS, &[Text(cluster)]).await? {
        return Err(StoreError::NotFound);
    }
    let rows = c
        .execute(
            ATTACH,
            &[Text(boundary), Text(cluster), Text(&crate::now())],
        )
        .await
        .map_err(|e| on_insert(e, "attachment"))?;
    Ok(rows == 1)
}

/// `NotFound` when the cluster is not attached to the boundary; `Conflict` while the
/// boundary has namespaces in it (they would keep its label and lose its policies). The
/// boundary's statuses and audit reports in the cluster go with the attachment.
pub(crate) async fn detach<C: Conn>(c: &mut C, boundary: &str, cluster: &str) -> Result<()> {
    if exists(c, HAS_NAMESPACES_OF, &[Text(boundary), Text(cluster)]).await? {
        return Err(StoreError::Conflict(format!(
            "boundary '{boundary}' has namespaces in cluster '{cluster}'; delete them first"
        )));
    }
    statuses::delete_of(c, cluster, boundary).await?;
    c.execute(DELETE_REPORTS_OF, &[Text(cluster), Text(boundary)])
        .await?;
    touched(c.execute(DETACH, &[Text(boundary), Text(cluster)]).await?)
}

/// Clusters attached to the boundary, by name; `NotFound` when the boundary is unknown.
/// Each attached cluster with each of the boundary's namespaces in it (`None`: none there),
/// in one statement: where the boundary's workloads can run. An unknown boundary has none.
/// Where the boundary's workloads can go: its clusters and its namespaces there, less those
/// found gone (SPEC 3.4 v3.2: a namespace made again by someone else is not the boundary's).
const SELECT_PLACEMENTS: &str = "SELECT bc.cluster AS cluster, n.name AS namespace \
     FROM boundary_clusters bc \
     LEFT JOIN namespaces n ON n.boundary = bc.boundary AND n.cluster = bc.cluster \
     AND n.gone_at IS NULL \
     WHERE bc.boundary = $1 ORDER BY bc.cluster, n.name";

fn placement(row: &dyn Fields) -> sqlx::Result<(String, Option<String>)> {
    Ok((row.text("cluster")?, row.opt_text("namespace")?))
}

pub(crate) async fn placements<C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<(String, Option<String>)>> {
    find_all(c, SELECT_PLACEMENTS, &[Text(boundary)], placement).await
}

pub(crate) async fn of_boundary<C: Conn>(c: &mut C, boundary: &str) -> Result<Vec<ClusterRecord>> {
    boundaries::get(c, boundary).await?;
    find_all(c, SELECT_OF_BOUNDARY, &[Text(boundary)], cluster).await
}

/// Every attachment, as (boundary, cluster), by boundary and cluster (the reconciler's
/// snapshot).
pub(crate) async fn attachments<C: Conn>(c: &mut C) -> crate::sql::DbResult<Vec<(String, String)>> {
    const EVERY: &str =
        "SELECT boundary, cluster FROM boundary_clusters ORDER BY boundary, cluster";
    c.fetch_all(EVERY, &[], |row| {
        Ok((row.text("boundary")?, row.text("cluster")?))
    })
    .await
}

/// Whether the cluster is attached to the boundary.
pub(crate) async fn is_attached<C: Conn>(c: &mut C, boundary: &str, cluster: &str) -> Result<bool> {
    const ATTACHED: &str = "SELECT EXISTS (SELECT 1 FROM boundary_clusters \
         WHERE boundary = $1 AND cluster = $2) AS found";
    Ok(exists(c, ATTACHED, &[Text(boundary), Text(cluster)]).await?)
}
