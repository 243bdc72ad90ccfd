//! The reconcilers' leases: which replicas reconcile an installation's clusters, and which
//! one reconciles each cluster.
//!
//! PostgreSQL: a replica joins by taking a *shared* session-level advisory lock on the
//! installation's key, on a connection of its own named after the replica
//! (`application_name`); the replicas in the installation's fleet are the sessions holding
//! it (`pg_locks`). A replica of an earlier version holds the same key *exclusively*, so the
//! two never reconcile at once. Each cluster then has an exclusive advisory lock of its own,
//! taken on the same connection by the replica that reconciles it. A replica that dies loses
//! its connection and, with it, every lock: no heartbeat, no expiry to wait for.
//!
//! SQLite: an exclusive lock on `<file>.reconciler.lock` (one process of those serving a file
//! leads; an in-memory database has one process anyway); the holder is the only member and
//! holds every cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

use crate::error::db;
use crate::Result;

/// The lock key of the installation's fleet (the reconciler lease of earlier versions).
pub(crate) fn installation_key(installation: &str) -> String {
    format!("palisade-reconciler/{installation}")
}

/// The lock key of one cluster of the installation.
pub(crate) fn cluster_key(installation: &str, cluster: &str) -> String {
    format!("palisade-cluster/{installation}/{cluster}")
}

/// A condition on the `pg_locks` row `l`: a granted advisory lock in this database on the
/// 64-bit key of the text that follows it (`hashtextextended(<text>, 0)`).
pub(crate) const GRANTED_ADVISORY_LOCK_ON: &str = "l.locktype = 'advisory' AND l.granted \
     AND l.objsubid = 1 \
     AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
     AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended";

/// The clusters held in this process (SQLite), by cluster: the replica's name.
pub(crate) type LocalHolds = Arc<Mutex<BTreeMap<String, String>>>;

/// A replica's membership of an installation's fleet of reconcilers, and the clusters it
/// holds. Dropping it releases everything.
#[derive(Debug)]
pub struct Lease {
    /// This member's key: unique among the members (PostgreSQL: `<replica>#<backend pid>`).
    me: String,
    installation: String,
    connection: Option<tokio::sync::Mutex<sqlx::PgConnection>>,
    /// Closing it releases the lock (SQLite).
    _file: Option<std::fs::File>,
    /// SQLite: the process-wide record of what is held, and this replica's name.
    local: Option<(LocalHolds, String)>,
    /// The clusters this lease holds (a session lock taken twice must be released twice:
    /// it is taken once).
    held: Mutex<BTreeSet<String>>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let Some((holds, _)) = &self.local {
            if let (Ok(mut holds), Ok(held)) = (holds.lock(), self.held.lock()) {
                for cluster in held.iter() {
                    holds.remove(cluster);
                }
            }
        }
    }
}

impl Lease {
    /// The only member (SQLite), `_file` locked when there is a file.
    pub(crate) fn local(
        installation: &str,
        replica: &str,
        file: Option<std::fs::File>,
        holds: LocalHolds,
    ) -> Self {
        Lease {
            me: replica.to_owned(),
            installation: installation.to_owned(),
            connection: None,
            _file: file,
            local: Some((holds, replica.to_owned())),
            held: Mutex::new(BTreeSet::new()),
        }
    }

    /// A member on its own PostgreSQL connection (which holds the installation's shared lock).
    pub(crate) fn on(installation: &str, me: String, connection: sqlx::PgConnection) -> Self {
        Lease {
            me,
            installation: installation.to_owned(),
            connection: Some(tokio::sync::Mutex::new(connection)),
            _file: None,
            local: None,
            held: Mutex::new(BTreeSet::new()),
        }
    }

    /// This member's key, as [`Lease::members`] lists it.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// The keys of the installation's members, this one included, sorted.
    pub async fn members(&self) -> Result<Vec<String>> {
        let Some(connection) = &self.connection else {
            return Ok(vec![self.me.clone()]);
        };
        let mut connection = connection.lock().await;
        let query = format!(
            "SELECT a.application_name || '#' || l.pid::text \
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE {GRANTED_ADVISORY_LOCK_ON}($1, 0)"
        );
        let mut members: Vec<String> = sqlx::query_scalar(&query)
            .bind(installation_key(&self.installation))
            .fetch_all(&mut *connection)
            .await
            .map_err(db)?;
        members.sort();
        members.dedup();
        Ok(members)
    }

    /// Takes `cluster`'s lock; `false` while another member holds it. Holding it already is
    /// `true`.
    pub async fn try_hold(&self, cluster: &str) -> Result<bool> {
        if self.holds(cluster) {
            return Ok(true);
        }
        if let Some(connection) = &self.connection {
            let mut connection = connection.lock().await;
            let taken: bool =
                sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
                    .bind(cluster_key(&self.installation, cluster))
                    .fetch_one(&mut *connection)
                    .await
                    .map_err(db)?;
            if !taken {
                return Ok(false);
            }
        }
        if let Some((holds, replica)) = &self.local {
            if let Ok(mut holds) = holds.lock() {
                holds.insert(cluster.to_owned(), replica.clone());
            }
        }
        if let Ok(mut held) = self.held.lock() {
            held.insert(cluster.to_owned());
        }
        Ok(true)
    }

    /// Gives `cluster`'s lock up (nothing when it is not held).
    pub async fn release(&self, cluster: &str) -> Result<()> {
        if !self.holds(cluster) {
            return Ok(());
        }
        if let Some(connection) = &self.connection {
            let mut connection = connection.lock().await;
            sqlx::query_scalar::<_, bool>("SELECT pg_advisory_unlock(hashtextextended($1, 0))")
                .bind(cluster_key(&self.installation, cluster))
                .fetch_one(&mut *connection)
                .await
                .map_err(db)?;
        }
        if let Some((holds, _)) = &self.local {
            if let Ok(mut holds) = holds.lock() {
                holds.remove(cluster);
            }
        }
        if let Ok(mut held) = self.held.lock() {
            held.remove(cluster);
        }
        Ok(())
    }

    /// Whether this lease holds `cluster`.
    pub fn holds(&self, cluster: &str) -> bool {
        self.held.lock().is_ok_and(|held| held.contains(cluster))
    }

    /// The clusters this lease holds.
    pub fn held_clusters(&self) -> BTreeSet<String> {
        self.held.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// Whether the lease still holds (PostgreSQL: its connection answers within 5 s).
    pub async fn held(&self) -> bool {
        use sqlx::Connection;
        let Some(connection) = &self.connection else {
            return true;
        };
        let mut connection = connection.lock().await;
        matches!(
            tokio::time::timeout(std::time::Duration::from_secs(5), connection.ping()).await,
            Ok(Ok(()))
        )
    }
}
