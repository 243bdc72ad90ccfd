//! The reconcilers' leases: which replicas reconcile an installation's clusters, and which
//! one reconciles each cluster.
//!
//! PostgreSQL: a replica joins by taking a *shared* session-level advisory lock on the
//! installation's key, on a connection of its own named after the replica
//! (`application_name`); the replicas in the installation's fleet are the sessions holding
//! it (`pg_locks`). A replica of an earlier version holds the same key *exclusively*, so the
//! two never reconcile at once. Each cluster then has an exclusive advisory lock of its own,
//! taken on the same connection by the replica that reconciles it. A replica that dies loses
//! its connection and, with it, every lock: no heartbeat to send, no expiry to wait for.
//!
//! Fencing (SPEC 4.3 v3.2). A lease lives as long as its session, and the session is ended by
//! the server once it has sent nothing for [`LEASE_LIFETIME`] (`idle_session_timeout`, set on
//! the lease's connection when it joins): a replica whose connection stalls without closing
//! loses its clusters to the others after that long, not after TCP keepalive's hours. Every
//! lease query must answer within [`LEASE_QUERY_TIMEOUT`], well under that lifetime; one that
//! fails or does not answer in time *loses* the lease on this side at once: it holds no
//! cluster any more, every [`Fence`] says so, and every later query fails
//! ([`StoreError::LeaseLost`]) until the replica joins again on a new connection. A holder
//! confirms its clusters ([`Lease::confirm_held`], [`Fence::confirm`]) at least every
//! [`LEASE_CONFIRM_INTERVAL`] and before each cluster's writes, so it stops writing to a
//! cluster at most `LEASE_CONFIRM_INTERVAL + LEASE_QUERY_TIMEOUT` after the server last heard
//! from it, long before the server can give the cluster to another replica.
//!
//! SQLite: an exclusive lock on `<file>.reconciler.lock` (one process of those serving a file
//! leads; an in-memory database has one process anyway); the holder is the only member and
//! holds every cluster.

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::db;
use crate::{Result, StoreError};

/// How long a lease outlives its holder's silence: the server ends a lease's session that has
/// sent no query for this long (PostgreSQL's `idle_session_timeout`, set on the lease's own
/// connection), which frees every cluster it held for the other replicas. A live holder
/// queries every [`LEASE_CONFIRM_INTERVAL`], so it never comes near it. 15 s: long enough that
/// a busy replica or a slow database does not lose its clusters, short enough that a replica
/// cut off from the database (a stalled connection that never closes) hands them over in
/// seconds.
pub const LEASE_LIFETIME: Duration = Duration::from_secs(15);

/// How long one lease query (joining aside) may take before the lease counts as lost. It must
/// stay well under [`LEASE_LIFETIME`]: a holder that has not heard back within it stops
/// writing while the server still keeps its session (and its clusters) from the others. 3 s:
/// a lease query is one small read of `pg_locks`, answered in about a millisecond.
pub const LEASE_QUERY_TIMEOUT: Duration = Duration::from_secs(3);

/// How often a holder confirms the clusters it holds (and so keeps its session from going
/// idle).
pub const LEASE_CONFIRM_INTERVAL: Duration = Duration::from_secs(1);

/// How long joining may take (a new connection, then two statements).
pub(crate) const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

// A holder that last reached the server at `t` stops writing by `t + interval + timeout`; the
// server ends its session no sooner than `t + lifetime`. Keep a wide margin between the two.
const _: () = assert!(
    2 * (LEASE_CONFIRM_INTERVAL.as_millis() + LEASE_QUERY_TIMEOUT.as_millis())
        < LEASE_LIFETIME.as_millis()
);

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

/// What a lease holds now, as its fences see it.
#[derive(Clone, Debug, Default)]
struct Holding {
    clusters: BTreeSet<String>,
    /// Set once the lease is lost: why, and what it held then.
    lost: Option<Lost>,
}

/// Why a lease was lost, and the clusters it held at that moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    pub reason: String,
    pub clusters: BTreeSet<String>,
}

/// A replica's membership of an installation's fleet of reconcilers, and the clusters it
/// holds. Dropping it releases everything.
#[derive(Debug)]
pub struct Lease {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// This member's key: unique among the members (PostgreSQL: `<replica>#<backend pid>`).
    me: String,
    installation: String,
    connection: Option<tokio::sync::Mutex<sqlx::PgConnection>>,
    /// Closing it releases the lock (SQLite).
    _file: Option<std::fs::File>,
    /// SQLite: the process-wide record of what is held, and this replica's name.
    local: Option<(LocalHolds, String)>,
    /// The clusters this lease holds (a session lock taken twice must be released twice: it
    /// is taken once), watched by the fences.
    held: watch::Sender<Holding>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some((holds, _)) = &self.local {
            if let Ok(mut holds) = holds.lock() {
                for cluster in self.held.borrow().clusters.iter() {
                    holds.remove(cluster);
                }
            }
        }
    }
}

impl Shared {
    fn holds(&self, cluster: &str) -> bool {
        self.held.borrow().clusters.contains(cluster)
    }

    fn lost(&self) -> Option<Lost> {
        self.held.borrow().lost.clone()
    }

    /// Gives up every cluster on this side, for good: the lease's session can no longer be
    /// vouched for.
    fn lose(&self, reason: String) {
        self.held.send_modify(|holding| {
            if holding.lost.is_none() {
                holding.lost = Some(Lost {
                    reason,
                    clusters: std::mem::take(&mut holding.clusters),
                });
            }
        });
    }

    fn forget(&self, cluster: &str) {
        if let Some((holds, _)) = &self.local {
            if let Ok(mut holds) = holds.lock() {
                holds.remove(cluster);
            }
        }
        self.held
            .send_if_modified(|holding| holding.clusters.remove(cluster));
    }

    /// Runs one query on the lease's connection within [`LEASE_QUERY_TIMEOUT`] (the wait for
    /// the connection included). A failure or a timeout loses the lease: a query cut off
    /// midway leaves the connection in no known state, and the session may be gone.
    async fn query<'a, T, F, Fut>(&'a self, what: &str, query: F) -> Result<T>
    where
        F: FnOnce(tokio::sync::MutexGuard<'a, sqlx::PgConnection>) -> Fut,
        Fut: Future<Output = std::result::Result<T, sqlx::Error>>,
    {
        if let Some(lost) = self.lost() {
            return Err(StoreError::LeaseLost(lost.reason));
        }
        let Some(connection) = &self.connection else {
            return Err(StoreError::LeaseLost("no connection".to_owned()));
        };
        let run = async { query(connection.lock().await).await };
        let reason = match tokio::time::timeout(LEASE_QUERY_TIMEOUT, run).await {
            Ok(Ok(answer)) => return Ok(answer),
            Ok(Err(error)) => format!("{what} failed: {}", db(error)),
            Err(_) => format!(
                "{what} got no answer within {} s",
                LEASE_QUERY_TIMEOUT.as_secs()
            ),
        };
        self.lose(reason.clone());
        Err(StoreError::LeaseLost(reason))
    }

    /// Of `clusters`, those whose lock this session holds on the server.
    async fn locked(&self, clusters: &BTreeSet<String>) -> Result<BTreeSet<String>> {
        if self.connection.is_none() {
            if let Some(lost) = self.lost() {
                return Err(StoreError::LeaseLost(lost.reason));
            }
            return Ok(clusters.clone());
        }
        let keys: Vec<String> = clusters
            .iter()
            .map(|c| cluster_key(&self.installation, c))
            .collect();
        let query = format!(
            "SELECT k.key FROM unnest($1::text[]) AS k(key) WHERE EXISTS ( \
             SELECT 1 FROM pg_locks l WHERE l.pid = pg_backend_pid() \
             AND l.mode = 'ExclusiveLock' AND {GRANTED_ADVISORY_LOCK_ON}(k.key, 0))"
        );
        let locked: Vec<String> = self
            .query("confirming the lease", |mut connection| async move {
                sqlx::query_scalar(&query)
                    .bind(keys)
                    .fetch_all(&mut *connection)
                    .await
            })
            .await?;
        let prefix = cluster_key(&self.installation, "");
        Ok(locked
            .iter()
            .filter_map(|key| key.strip_prefix(&prefix))
            .map(str::to_owned)
            .collect())
    }

    /// Confirms `cluster` on the server; one found not held is given up on this side.
    async fn confirm(&self, cluster: &str) -> Result<bool> {
        if !self.holds(cluster) {
            return match self.lost() {
                Some(lost) => Err(StoreError::LeaseLost(lost.reason)),
                None => Ok(false),
            };
        }
        let one = BTreeSet::from([cluster.to_owned()]);
        let held = self.locked(&one).await?.contains(cluster);
        if !held {
            self.forget(cluster);
        }
        // Given up meanwhile (by `release`, or the lease lost by another query).
        Ok(held && self.holds(cluster))
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
        Self::new(Shared {
            me: replica.to_owned(),
            installation: installation.to_owned(),
            connection: None,
            _file: file,
            local: Some((holds, replica.to_owned())),
            held: watch::Sender::new(Holding::default()),
        })
    }

    /// A member on its own PostgreSQL connection (which holds the installation's shared lock).
    pub(crate) fn on(installation: &str, me: String, connection: sqlx::PgConnection) -> Self {
        Self::new(Shared {
            me,
            installation: installation.to_owned(),
            connection: Some(tokio::sync::Mutex::new(connection)),
            _file: None,
            local: None,
            held: watch::Sender::new(Holding::default()),
        })
    }

    fn new(shared: Shared) -> Self {
        Lease {
            shared: Arc::new(shared),
        }
    }

    /// This member's key, as [`Lease::members`] lists it.
    pub fn me(&self) -> &str {
        &self.shared.me
    }

    /// The keys of the installation's members, this one included, sorted.
    pub async fn members(&self) -> Result<Vec<String>> {
        let shared = &self.shared;
        if shared.connection.is_none() {
            return Ok(vec![shared.me.clone()]);
        }
        let query = format!(
            "SELECT a.application_name || '#' || l.pid::text \
             FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid \
             WHERE {GRANTED_ADVISORY_LOCK_ON}($1, 0)"
        );
        let key = installation_key(&shared.installation);
        let mut members: Vec<String> = shared
            .query("reading the fleet", |mut connection| async move {
                sqlx::query_scalar(&query)
                    .bind(key)
                    .fetch_all(&mut *connection)
                    .await
            })
            .await?;
        members.sort();
        members.dedup();
        Ok(members)
    }

    /// Takes `cluster`'s lock; `false` while another member holds it. Holding it already is
    /// `true`.
    pub async fn try_hold(&self, cluster: &str) -> Result<bool> {
        let shared = &self.shared;
        if let Some(lost) = shared.lost() {
            return Err(StoreError::LeaseLost(lost.reason));
        }
        if shared.holds(cluster) {
            return Ok(true);
        }
        if shared.connection.is_some() {
            let key = cluster_key(&shared.installation, cluster);
            let taken: bool = shared
                .query("taking a cluster", |mut connection| async move {
                    sqlx::query_scalar("SELECT pg_try_advisory_lock(hashtextextended($1, 0))")
                        .bind(key)
                        .fetch_one(&mut *connection)
                        .await
                })
                .await?;
            if !taken {
                return Ok(false);
            }
        }
        if let Some((holds, replica)) = &shared.local {
            if let Ok(mut holds) = holds.lock() {
                holds.insert(cluster.to_owned(), replica.clone());
            }
        }
        shared.held.send_if_modified(|holding| {
            holding.lost.is_none() && holding.clusters.insert(cluster.to_owned())
        });
        Ok(shared.holds(cluster))
    }

    /// Gives `cluster`'s lock up (nothing when it is not held). Its fences say so before the
    /// lock is released on the server.
    pub async fn release(&self, cluster: &str) -> Result<()> {
        let shared = &self.shared;
        if !shared.holds(cluster) {
            return Ok(());
        }
        shared.forget(cluster);
        if shared.connection.is_some() {
            let key = cluster_key(&shared.installation, cluster);
            shared
                .query("giving a cluster up", |mut connection| async move {
                    sqlx::query_scalar::<_, bool>(
                        "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                    )
                    .bind(key)
                    .fetch_one(&mut *connection)
                    .await
                })
                .await?;
        }
        Ok(())
    }

    /// Whether this lease holds `cluster`, as it last knew (no query).
    pub fn holds(&self, cluster: &str) -> bool {
        self.shared.holds(cluster)
    }

    /// The clusters this lease holds, as it last knew (no query).
    pub fn held_clusters(&self) -> BTreeSet<String> {
        self.shared.held.borrow().clusters.clone()
    }

    /// Confirms on the server that this lease still holds `cluster`: `false` (and given up on
    /// this side) when it does not; an error, and the whole lease lost, when the server cannot
    /// tell within [`LEASE_QUERY_TIMEOUT`].
    pub async fn confirm(&self, cluster: &str) -> Result<bool> {
        self.shared.confirm(cluster).await
    }

    /// Confirms every cluster held in one query (the holder's heartbeat, which also keeps the
    /// session from going idle). Those found not held are given up on this side and
    /// returned; an error loses the whole lease.
    pub async fn confirm_held(&self) -> Result<BTreeSet<String>> {
        let shared = &self.shared;
        if shared.connection.is_some() && shared.lost().is_none() {
            // Reaches the server even when nothing is held: the session stays alive.
            let held = self.held_clusters();
            let locked = shared.locked(&held).await?;
            let gone: BTreeSet<String> = held.difference(&locked).cloned().collect();
            for cluster in &gone {
                shared.forget(cluster);
            }
            return Ok(gone);
        }
        match shared.lost() {
            Some(lost) => Err(StoreError::LeaseLost(lost.reason)),
            None => Ok(BTreeSet::new()),
        }
    }

    /// Whether the lease still holds: not lost, and (PostgreSQL) its session confirms what it
    /// holds within [`LEASE_QUERY_TIMEOUT`].
    pub async fn held(&self) -> bool {
        self.confirm_held().await.is_ok()
    }

    /// Why the lease was lost and what it held then; `None` while it holds.
    pub fn lost(&self) -> Option<Lost> {
        self.shared.lost()
    }

    /// What a writer to `cluster` asks before it writes. It does not keep the lease alive.
    pub fn fence(&self, cluster: &str) -> Fence {
        Fence {
            cluster: cluster.to_owned(),
            lease: Arc::downgrade(&self.shared),
            held: self.shared.held.subscribe(),
        }
    }
}

/// One cluster's side of a [`Lease`], for whoever writes to the cluster: whether the lease
/// still holds it, asked of the server ([`Fence::confirm`]) or as last known
/// ([`Fence::holds`], [`Fence::lost`]). Once the cluster is given up or the lease is lost or
/// dropped, it never holds again (a cluster taken again has a new fence).
#[derive(Clone, Debug)]
pub struct Fence {
    cluster: String,
    lease: Weak<Shared>,
    held: watch::Receiver<Holding>,
}

impl Fence {
    pub fn cluster(&self) -> &str {
        &self.cluster
    }

    /// Whether the lease holds the cluster, as it last knew (no query).
    pub fn holds(&self) -> bool {
        self.lease.strong_count() > 0 && self.held.borrow().clusters.contains(&self.cluster)
    }

    /// Confirms on the server that the lease still holds the cluster ([`Lease::confirm`]):
    /// `Ok(())` only then, [`StoreError::LeaseLost`] saying why not otherwise.
    pub async fn confirm(&self) -> Result<()> {
        let Some(lease) = self.lease.upgrade() else {
            return Err(StoreError::LeaseLost("the lease was given up".to_owned()));
        };
        if self.holds() && lease.confirm(&self.cluster).await? {
            return Ok(());
        }
        Err(StoreError::LeaseLost(match lease.lost() {
            Some(lost) => lost.reason,
            None => format!("cluster '{}' is no longer held", self.cluster),
        }))
    }

    /// Resolves once the lease no longer holds the cluster (given up, lost or dropped), as
    /// this side learns it; never while it holds.
    pub async fn lost(&self) {
        let mut held = self.held.clone();
        let cluster = self.cluster.clone();
        // An error: the lease is gone.
        let _ = held
            .wait_for(|holding| !holding.clusters.contains(&cluster))
            .await;
    }
}
