//! Everything a reconcile pass works from, in one read transaction: seven statements whatever
//! the number of boundaries (issue 24), and one moment (SQLite's read transaction, PostgreSQL's
//! `REPEATABLE READ`), so a boundary never appears with another moment's policies.

use std::collections::BTreeMap;

use super::{boundaries, changes, clusters, exceptions, namespaces, policies};
use crate::sql::Conn;
use crate::{BoundarySnapshot, Result, Snapshot};

/// Reads the snapshot on `c`, inside a read transaction the caller began.
pub(crate) async fn read<C: Conn>(c: &mut C) -> Result<Snapshot> {
    let clusters = clusters::list(c).await?;
    let mut boundaries: BTreeMap<String, BoundarySnapshot> = boundaries::list(c)
        .await?
        .into_iter()
        .map(|record| {
            let name = record.name.clone();
            (
                name,
                BoundarySnapshot {
                    boundary: record,
                    policies: Vec::new(),
                    clusters: Vec::new(),
                    namespaces: Vec::new(),
                    exceptions: Vec::new(),
                    last_change: 0,
                },
            )
        })
        .collect();
    for policy in policies::read_every(c).await? {
        if let Some(b) = boundaries.get_mut(&policy.boundary) {
            b.policies.push(policy);
        }
    }
    for (boundary, cluster) in clusters::attachments(c).await? {
        if let Some(b) = boundaries.get_mut(&boundary) {
            b.clusters.push(cluster);
        }
    }
    for namespace in namespaces::read_every(c).await? {
        if let Some(b) = boundaries.get_mut(&namespace.boundary) {
            b.namespaces.push(namespace);
        }
    }
    for exception in exceptions::read_every(c).await? {
        if let Some(b) = boundaries.get_mut(&exception.boundary) {
            b.exceptions.push(exception);
        }
    }
    for (boundary, seq) in changes::latest_by_boundary(c).await? {
        if let Some(b) = boundaries.get_mut(&boundary) {
            b.last_change = seq;
        }
    }
    Ok(Snapshot {
        clusters,
        boundaries: boundaries.into_values().collect(),
    })
}
