//! Fencing (SPEC 4.3 v3.2): a replica writes into a cluster only while it holds the cluster's
//! lease. Every writer of a cluster (a pass's phases, workload deploys, label repairs, audit
//! reports) holds the cluster's [`Fence`] and confirms it right before it writes; a cluster
//! whose lease is not confirmed gets no write from this replica, and its part of a pass ends
//! at once when the lease is found lost meanwhile.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use palisade_app::reconcile::{Lease, StoreError};

/// The lease of a cluster is not confirmed (why, from the store): nothing may be written there.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Fenced(pub StoreError);

/// Whether this replica still holds one cluster's lease, as a writer asks it. Implemented by
/// the store's lease ([`palisade_app::reconcile::Fence`]) and by the tests' fakes.
#[async_trait::async_trait]
pub(crate) trait Holding: Send + Sync + fmt::Debug {
    /// Asks the lease (the database) whether it still holds the cluster; an error says why
    /// not, and the lease has given the cluster up on this side.
    async fn confirm(&self) -> Result<(), StoreError>;
    /// Resolves once this side knows the lease no longer holds the cluster.
    async fn lost(&self);
}

#[async_trait::async_trait]
impl Holding for palisade_app::reconcile::Fence {
    async fn confirm(&self) -> Result<(), StoreError> {
        palisade_app::reconcile::Fence::confirm(self).await
    }

    async fn lost(&self) {
        palisade_app::reconcile::Fence::lost(self).await;
    }
}

/// One cluster's fence: what its writers confirm before they write. Without a lease (a pass
/// over every cluster, which only tests run) there is nothing to confirm.
#[derive(Clone, Debug)]
pub(crate) struct Fence {
    cluster: String,
    holding: Option<Arc<dyn Holding>>,
}

impl Fence {
    /// The fence of `cluster` under `lease`, or none without one.
    pub(crate) fn of(lease: Option<&Lease>, cluster: &str) -> Self {
        Fence {
            cluster: cluster.to_owned(),
            holding: lease.map(|lease| Arc::new(lease.fence(cluster)) as Arc<dyn Holding>),
        }
    }

    /// A fence over `holding` (tests).
    #[cfg(test)]
    pub(crate) fn over(cluster: &str, holding: Arc<dyn Holding>) -> Self {
        Fence {
            cluster: cluster.to_owned(),
            holding: Some(holding),
        }
    }

    /// Confirms the lease right before `what` is written; [`Fenced`] when it is not
    /// confirmed, and nothing may be written.
    pub(crate) async fn confirm(&self, what: &'static str) -> Result<(), Fenced> {
        let Some(holding) = &self.holding else {
            return Ok(());
        };
        holding.confirm().await.map_err(|error| {
            tracing::warn!(cluster = %self.cluster, before = what, %error, "reconciler: the cluster's lease is not confirmed; no more writes there");
            Fenced(error)
        })
    }

    /// Writes with `write` only once the lease is confirmed; `write` is not even started
    /// otherwise.
    pub(crate) async fn write<T, E: From<Fenced>>(
        &self,
        what: &'static str,
        write: impl Future<Output = Result<T, E>>,
    ) -> Result<T, E> {
        self.confirm(what).await?;
        write.await
    }

    /// Resolves once the lease is known to no longer hold the cluster; never without a lease.
    pub(crate) async fn lost(&self) {
        match &self.holding {
            Some(holding) => holding.lost().await,
            None => std::future::pending().await,
        }
    }

    /// Runs `work` until it ends or the cluster's lease is lost, whichever comes first:
    /// `None` when the lease was lost (and `work`, dropped, writes nothing more).
    pub(crate) async fn while_held<T>(&self, work: impl Future<Output = T>) -> Option<T> {
        tokio::select! {
            done = work => Some(done),
            () = self.lost() => None,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::controller::ControllerError;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A lease that confirms `confirms` times, then no more.
    #[derive(Debug)]
    pub(crate) struct Countdown {
        left: AtomicUsize,
        lost: tokio::sync::Notify,
    }

    impl Countdown {
        pub(crate) fn new(confirms: usize) -> Arc<Self> {
            Arc::new(Countdown {
                left: AtomicUsize::new(confirms),
                lost: tokio::sync::Notify::new(),
            })
        }
    }

    #[async_trait::async_trait]
    impl Holding for Countdown {
        async fn confirm(&self) -> Result<(), StoreError> {
            let left = self.left.load(Ordering::SeqCst);
            if left == 0 {
                self.lost.notify_waiters();
                return Err(StoreError::LeaseLost("no answer within 3 s".into()));
            }
            self.left.store(left - 1, Ordering::SeqCst);
            Ok(())
        }

        async fn lost(&self) {
            if self.left.load(Ordering::SeqCst) == 0 {
                return;
            }
            self.lost.notified().await;
        }
    }

    #[tokio::test]
    async fn nothing_is_written_once_the_lease_is_not_confirmed() {
        let fence = Fence::over("c1", Countdown::new(1));
        let writes = AtomicUsize::new(0);
        let write = || async {
            writes.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ControllerError>(())
        };
        assert!(fence.write("the policies", write()).await.is_ok());
        let refused = fence.write("the removals", write()).await;
        assert!(
            matches!(
                refused,
                Err(ControllerError::Fenced(StoreError::LeaseLost(_)))
            ),
            "{refused:?}"
        );
        assert_eq!(
            writes.load(Ordering::SeqCst),
            1,
            "the second write never started"
        );
        assert_eq!(
            ControllerError::Fenced(StoreError::LeaseLost("no answer within 3 s".into()))
                .to_string(),
            "this replica no longer holds the cluster's lease: the lease is not confirmed: no answer within 3 s"
        );
    }

    #[tokio::test]
    async fn without_a_lease_every_write_goes_ahead() {
        let fence = Fence::of(None, "c1");
        assert!(fence
            .write("the policies", async { Ok::<_, ControllerError>(()) })
            .await
            .is_ok());
        let work = fence.while_held(async { 7 });
        assert_eq!(work.await, Some(7));
    }

    #[tokio::test]
    async fn work_under_way_ends_when_the_lease_is_lost() {
        let countdown = Countdown::new(1);
        let fence = Fence::over("c1", countdown.clone());
        let started = std::time::Instant::now();
        let stopper = fence.clone();
        let work = fence.while_held(async {
            // A writer that would go on for a minute.
            tokio::time::sleep(std::time::Duration::from_secs(60)).await;
        });
        let lose = async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert!(stopper.confirm("the first").await.is_ok());
            assert!(stopper.confirm("the second").await.is_err());
        };
        let (done, ()) = tokio::join!(work, lose);
        assert_eq!(done, None);
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
    }
}
