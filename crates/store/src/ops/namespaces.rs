//! Namespaces palisade labelled for a boundary (`palisade.dev/boundary`), per cluster.
//! A namespace belongs to one boundary at most; writes lock that boundary.

use super::{boundaries, clusters, find_all, on_insert, touched};
use crate::sql::record;
use crate::sql::{
    Arg::{OptText, Text},
    Conn, Fields,
};
use crate::{NamespaceRecord, Result, StoreError};

const SELECT: &str = "SELECT cluster, name, boundary, created_at, uid, gone_at \
     FROM namespaces WHERE cluster = $1 AND name = $2";
const INSERT: &str = "INSERT INTO namespaces \
     (cluster, name, boundary, created_at, uid) VALUES ($1, $2, $3, $4, $5)";
/// The namespace was labelled again (made anew, or adopted): its uid now, and no longer gone.
const RELABELLED: &str = "UPDATE namespaces SET uid = $3, gone_at = NULL \
     WHERE cluster = $1 AND name = $2";
/// The uid of a namespace recorded before uids were (SPEC 3.4 v3.2), learnt once.
const LEARN_UID: &str = "UPDATE namespaces SET uid = $4 \
     WHERE boundary = $1 AND cluster = $2 AND name = $3 AND uid IS NULL AND gone_at IS NULL";
const GONE: &str = "UPDATE namespaces SET gone_at = $4 \
     WHERE boundary = $1 AND cluster = $2 AND name = $3 AND gone_at IS NULL";
const SELECT_OF_BOUNDARY: &str = "SELECT cluster, name, boundary, created_at, uid, gone_at \
     FROM namespaces WHERE boundary = $1 ORDER BY cluster, name";
const SELECT_OF_CLUSTER: &str = "SELECT cluster, name, boundary, created_at, uid, gone_at \
     FROM namespaces WHERE cluster = $1 ORDER BY boundary, name";
const DELETE: &str = "DELETE FROM namespaces WHERE boundary = $1 AND cluster = $2 AND name = $3";

fn namespace(row: &dyn Fields) -> sqlx::Result<NamespaceRecord> {
    record! { row, NamespaceRecord {
        cluster: text, name: text, boundary: text, created_at: text, uid: opt_text,
        gone_at: opt_text,
    } }
}

async fn read<C: Conn>(c: &mut C, cluster: &str, name: &str) -> Result<Option<NamespaceRecord>> {
    Ok(
        c.fetch_optional(SELECT, &[Text(cluster), Text(name)], namespace)
            .await?,
    )
}

/// `NotFound` when the boundary or the cluster is unknown or the cluster is not attached to
/// the boundary; `Conflict` when another boundary holds the namespace. `true` when new. `uid`
/// is the namespace's in the cluster as palisade labelled it: an existing record takes it (and
/// is no longer gone).
pub(crate) async fn put<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
    uid: Option<&str>,
) -> Result<bool> {
    boundaries::lock(c, boundary).await?;
    if !clusters::is_attached(c, boundary, cluster).await? {
        return Err(StoreError::NotFound);
    }
    if let Some(existing) = read(c, cluster, name).await? {
        return if existing.boundary == boundary {
            if let Some(uid) = uid {
                c.execute(RELABELLED, &[Text(cluster), Text(name), Text(uid)])
                    .await?;
            }
            Ok(false)
        } else {
            Err(StoreError::Conflict(format!(
                "namespace '{name}' in cluster '{cluster}' belongs to boundary '{}'",
                existing.boundary
            )))
        };
    }
    let args = [
        Text(cluster),
        Text(name),
        Text(boundary),
        Text(&crate::now()),
        OptText(uid),
    ];
    c.execute(INSERT, &args)
        .await
        .map_err(|e| on_insert(e, &format!("namespace {name}")))?;
    Ok(true)
}

/// The namespace when the boundary holds it (`NotFound` otherwise).
pub(crate) async fn get<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
) -> Result<NamespaceRecord> {
    read(c, cluster, name)
        .await?
        .filter(|n| n.boundary == boundary)
        .ok_or(StoreError::NotFound)
}

/// The boundary's namespaces, by cluster and name; `NotFound` when the boundary is unknown.
/// Every namespace of every boundary, by boundary, cluster and name (the reconciler's
/// snapshot).
pub(crate) async fn read_every<C: Conn>(c: &mut C) -> crate::sql::DbResult<Vec<NamespaceRecord>> {
    const EVERY: &str = "SELECT cluster, name, boundary, created_at, uid, gone_at \
         FROM namespaces ORDER BY boundary, cluster, name";
    c.fetch_all(EVERY, &[], namespace).await
}

pub(crate) async fn of_boundary<C: Conn>(
    c: &mut C,
    boundary: &str,
) -> Result<Vec<NamespaceRecord>> {
    boundaries::get(c, boundary).await?;
    find_all(c, SELECT_OF_BOUNDARY, &[Text(boundary)], namespace).await
}

/// Every boundary's namespaces in the cluster.
pub(crate) async fn of_cluster<C: Conn>(c: &mut C, cluster: &str) -> Result<Vec<NamespaceRecord>> {
    find_all(c, SELECT_OF_CLUSTER, &[Text(cluster)], namespace).await
}

pub(crate) async fn delete<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
) -> Result<()> {
    boundaries::lock(c, boundary).await?;
    touched(
        c.execute(DELETE, &[Text(boundary), Text(cluster), Text(name)])
            .await?,
    )
}

/// Records the uid of a namespace recorded without one (a store from before uids); `false`
/// when it had one already, is gone, or is not the boundary's.
pub(crate) async fn learn_uid<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
    uid: &str,
) -> Result<bool> {
    let args = [Text(boundary), Text(cluster), Text(name), Text(uid)];
    Ok(c.execute(LEARN_UID, &args).await? == 1)
}

/// Marks the namespace gone from the cluster (deleted, or made again with another uid);
/// `false` when it was already or is not the boundary's.
pub(crate) async fn gone<C: Conn>(
    c: &mut C,
    boundary: &str,
    cluster: &str,
    name: &str,
) -> Result<bool> {
    let now = crate::now();
    let args = [Text(boundary), Text(cluster), Text(name), Text(&now)];
    Ok(c.execute(GONE, &args).await? == 1)
}
