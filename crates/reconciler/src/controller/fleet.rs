//! The clusters shared out among the replicas on one PostgreSQL database (SQLite: one
//! replica, every cluster): which ones this replica takes and gives up, what it forgets of a
//! cluster it gives up, and the clusters whose lease it can no longer confirm (`fence`).

use super::*;

/// This replica as a member of the fleet, while it holds the installation's lease: the
/// clusters it takes and gives up, the leases it confirms, and what it forgets of a cluster it
/// no longer holds.
pub(super) struct Membership<'l> {
    pub(super) ctl: &'l Controller,
    pub(super) lease: &'l Lease,
}

impl Membership<'_> {
    /// Takes the clusters the placement gives this replica and gives up the others, after
    /// `clusters` (the installation's clusters; `None`: those of the latest pass). Returns
    /// whether the set this replica holds changed. An error when the other replicas or a lock
    /// could not be read: the lease is lost then (see `palisade_store::Lease`), no cluster is
    /// held any more, and the caller gives the lease up. A cluster in `busy` (its part runs)
    /// is not given up yet, so none is given up while this replica writes to it.
    pub(super) async fn rebalance(
        &self,
        clusters: Option<BTreeSet<String>>,
        busy: &BTreeSet<String>,
    ) -> Result<bool, StoreError> {
        let (ctl, lease) = (self.ctl, self.lease);
        let known = match (clusters, ctl.known.lock()) {
            (Some(clusters), Ok(mut known)) => {
                known.clone_from(&clusters);
                clusters
            }
            (None, Ok(known)) => known.clone(),
            (_, Err(_)) => return Ok(false),
        };
        let before = lease.held_clusters();
        let members = lease.members().await.inspect_err(|error| {
            tracing::warn!(%error, "reconciler: cannot read the other replicas");
        })?;
        let owners = crate::placement::assign(&members, &known);
        let mine = |cluster: &str| owners.get(cluster).is_some_and(|o| *o == lease.me());
        let mut released = 0;
        // A cluster whose part runs is given up at a later look, once the part has ended:
        // nothing of this replica is written there after another takes it.
        for cluster in before.iter().filter(|c| !mine(c) && !busy.contains(*c)) {
            ctl.forget(cluster);
            lease.release(cluster).await.inspect_err(|error| {
                tracing::warn!(%cluster, %error, "reconciler: cannot give a cluster up");
            })?;
            released += 1;
        }
        let mut taken = 0;
        for cluster in owners.keys().filter(|c| mine(c) && !lease.holds(c)) {
            // `false`: its previous holder gives it up after its pass; taken at a later look.
            if lease.try_hold(cluster).await.inspect_err(|error| {
                tracing::warn!(%cluster, %error, "reconciler: cannot take a cluster");
            })? {
                taken += 1;
            }
        }
        let after = lease.held_clusters();
        metrics::fleet(members.len(), after.len());
        metrics::handover(true, taken);
        metrics::handover(false, released);
        if after != before {
            tracing::info!(
                replica = %lease.me(),
                replicas = members.len(),
                clusters = known.len(),
                held = after.len(),
                taken,
                released,
                "reconciler: clusters shared out again"
            );
        }
        Ok(after != before)
    }

    /// The lease of `cluster` was found not held (or not confirmed) by one of its writers: it
    /// is given up on this side already; logged, counted, and forgotten. When the whole lease
    /// is lost, the loop does this for every cluster once it gives the lease up.
    pub(super) fn fenced(&self, cluster: &str) {
        let lease = self.lease;
        if lease.lost().is_none() {
            tracing::warn!(cluster, replica = %lease.me(), "reconciler: the cluster's lease is not held any more; no more writes there");
            metrics::handover_lost(1);
        }
        self.ctl.forget(cluster);
    }

    /// Confirms every cluster held (the heartbeat that keeps the lease's session alive, every
    /// `LEASE_CONFIRM_INTERVAL`); those found not held are dropped. An error: the lease is lost.
    pub(super) async fn confirm_leases(&self) -> Result<(), StoreError> {
        let lease = self.lease;
        let gone = lease.confirm_held().await?;
        for cluster in &gone {
            tracing::warn!(%cluster, replica = %lease.me(), "reconciler: the cluster's lease is not held any more; no more writes there");
            self.ctl.forget(cluster);
        }
        metrics::handover_lost(gone.len());
        if !gone.is_empty() {
            metrics::fleet_held(lease.held_clusters().len());
        }
        Ok(())
    }

    /// Confirms the leases every `LEASE_CONFIRM_INTERVAL` of `tick`; resolves only when the
    /// lease is lost, with why.
    pub(super) async fn keep_confirming(&self, tick: &mut tokio::time::Interval) -> StoreError {
        loop {
            tick.tick().await;
            if let Err(error) = self.confirm_leases().await {
                return error;
            }
        }
    }

    /// The lease is lost: every cluster it held is logged, counted and forgotten.
    pub(super) fn lost_lease(&self) {
        let lease = self.lease;
        let Some(lost) = lease.lost() else {
            return;
        };
        for cluster in &lost.clusters {
            tracing::warn!(%cluster, replica = %lease.me(), reason = %lost.reason, "reconciler: the cluster's lease is not confirmed; no more writes there");
            self.ctl.forget(cluster);
        }
        metrics::handover_lost(lost.clusters.len());
    }

    /// Forgets every cluster this replica held (the lease is going).
    pub(super) fn forget_all(&self) {
        let (ctl, lease) = (self.ctl, self.lease);
        let known = ctl.known.lock().map(|k| k.clone()).unwrap_or_default();
        let lost = lease.lost().map(|l| l.clusters).unwrap_or_default();
        for cluster in lease.held_clusters().iter().chain(&known).chain(&lost) {
            ctl.forget(cluster);
        }
        ctl.memory.keep_only(None);
        ctl.open_drifts.keep_only(None);
        metrics::fleet(0, 0);
    }
}

impl Controller {
    /// Drops what this replica knows of `cluster` (given up, or the lease lost): its watches,
    /// its open drifts, the timings of its policies, its layout's history, its audits. A
    /// replica that takes it later starts as at a first pass.
    pub(super) fn forget(&self, cluster: &str) {
        self.audits.forget(cluster);
        self.memory.forget(cluster);
        self.open_drifts.forget(cluster);
    }
}
