//! The clusters shared out among the replicas on one PostgreSQL database (SQLite: one
//! replica, every cluster): which ones this replica takes and gives up, and what it forgets
//! of a cluster it gives up.

use super::*;

impl Controller {
    /// Takes the clusters the placement gives this replica and gives up the others, after
    /// `clusters` (the installation's clusters; `None`: those of the latest pass). Returns
    /// whether the set this replica holds changed; an error when the other replicas could not
    /// be read (the lease's connection may be gone: the caller checks it). Called between passes only, so a cluster
    /// is given up with no pass of this replica writing to it.
    pub(super) async fn rebalance(
        &self,
        lease: &Lease,
        clusters: Option<BTreeSet<String>>,
    ) -> Result<bool, StoreError> {
        let known = match (clusters, self.known.lock()) {
            (Some(clusters), Ok(mut known)) => {
                known.clone_from(&clusters);
                clusters
            }
            (None, Ok(known)) => known.clone(),
            (_, Err(_)) => return Ok(false),
        };
        let members = lease.members().await.inspect_err(|error| {
            tracing::warn!(%error, "reconciler: cannot read the other replicas");
        })?;
        let owners = crate::placement::assign(&members, &known);
        let mine = |cluster: &str| owners.get(cluster).is_some_and(|o| *o == lease.me());
        let before = lease.held_clusters();
        let mut released = 0;
        for cluster in before.iter().filter(|c| !mine(c)) {
            self.forget(cluster);
            match lease.release(cluster).await {
                Ok(()) => released += 1,
                Err(error) => {
                    tracing::warn!(%cluster, %error, "reconciler: cannot give a cluster up")
                }
            }
        }
        let mut taken = 0;
        for cluster in owners.keys().filter(|c| mine(c) && !lease.holds(c)) {
            match lease.try_hold(cluster).await {
                Ok(true) => taken += 1,
                // Its previous holder gives it up after its pass: taken at a later look.
                Ok(false) => {}
                Err(error) => {
                    tracing::warn!(%cluster, %error, "reconciler: cannot take a cluster")
                }
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

    /// Drops what this replica knows of `cluster` (given up, or the lease lost): its watches,
    /// its open drifts, the timings of its policies, its layout's history. A replica that
    /// takes it later starts as at a first pass.
    pub(super) fn forget(&self, cluster: &str) {
        if let Ok(mut watches) = self.watches.lock() {
            watches.remove(cluster);
        }
        if let Ok(mut watches) = self.drift_watches.lock() {
            watches.remove(cluster);
        }
        if let Ok(mut open) = self.open_drifts.lock() {
            open.retain(|d| d.drift.cluster != cluster);
        }
        if let Ok(mut history) = self.drift_history.lock() {
            history.retain(|(c, _, _), _| c != cluster);
        }
        if let Ok(mut unconfirmed) = self.unconfirmed.lock() {
            unconfirmed.retain(|(c, _, _, _), _| c != cluster);
        }
        if let Ok(mut layouts) = self.layouts.lock() {
            layouts.remove(cluster);
        }
        if let Ok(mut apiservers) = self.apiservers.lock() {
            apiservers.remove(cluster);
        }
        if let Ok(mut attached) = self.attached.lock() {
            attached.remove(cluster);
        }
        if let Ok(mut written) = self.installs_written.lock() {
            written.remove(cluster);
        }
    }

    /// Forgets every cluster this replica held (the lease is going).
    pub(super) fn forget_all(&self, lease: &Lease) {
        for cluster in lease.held_clusters() {
            self.forget(&cluster);
        }
        if let Ok(mut watches) = self.watches.lock() {
            watches.clear();
        }
        self.stop_drift_watches(None);
        metrics::fleet(0, 0);
    }
}
