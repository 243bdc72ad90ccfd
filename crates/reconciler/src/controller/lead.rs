//! The loop: the lease, passes on changes, resyncs and backoff, and shutdown.

use super::*;
use palisade_app::reconcile::LEASE_CONFIRM_INTERVAL;

/// How often an unreachable cluster's API server is asked whether it answers again.
const ANSWER_POLL: Duration = Duration::from_secs(1);
/// How long one such question may take.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(1);

impl Controller {
    /// Runs until `shutdown` completes: waits for the lease, then reconciles on every change,
    /// every `resync`, and after failures with backoff. Gives the lease up when it is lost.
    ///
    /// When `shutdown` completes during a pass, the pass may go on for
    /// [`Settings::shutdown_grace`] to finish its cluster writes; whatever is still running
    /// then is abandoned. Returns at once otherwise. The lease is released on return.
    pub async fn run(self: Arc<Self>, shutdown: impl Future<Output = ()>) {
        tokio::pin!(shutdown);
        let mut changes = loop {
            let subscribed = tokio::select! {
                () = &mut shutdown => return,
                subscribed = self.app.subscribe_changes() => subscribed,
            };
            match subscribed {
                Ok(changes) => break changes,
                Err(error) => {
                    tracing::warn!(%error, "reconciler: cannot follow changes; retrying");
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(self.settings.min_backoff) => {}
                    }
                }
            }
        };
        let mut standing_by = false;
        loop {
            let taken = tokio::select! {
                () = &mut shutdown => return,
                taken = self.app.join_fleet(&self.installation, &self.settings.replica) => taken,
            };
            let lease = match taken {
                Ok(Some(lease)) => lease,
                Ok(None) => {
                    if !standing_by {
                        tracing::info!(
                            installation = %self.installation,
                            "reconciler standing by: another process holds this installation's lease (it takes over when that one stops)"
                        );
                        standing_by = true;
                    }
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(self.settings.lease_retry) => continue,
                    }
                }
                Err(error) => {
                    tracing::warn!(%error, "reconciler: cannot take the lease; retrying");
                    tokio::select! {
                        () = &mut shutdown => return,
                        () = tokio::time::sleep(self.settings.lease_retry) => continue,
                    }
                }
            };
            standing_by = false;
            tracing::info!(installation = %self.installation, replica = %lease.me(), "reconciler active");
            metrics::active(true);
            let end = self.lead(&lease, &mut changes, shutdown.as_mut()).await;
            metrics::active(false);
            self.lost_lease(&lease);
            // Only the holder of a cluster writes its workloads' statuses.
            self.forget_all(&lease);
            drop(lease);
            match end {
                LeadEnd::Shutdown => {
                    tracing::info!(installation = %self.installation, "reconciler stopped; lease released");
                    return;
                }
                LeadEnd::LostLease => {
                    tracing::warn!("reconciler: lost the lease; standing by");
                }
            }
        }
    }

    /// Passes while `lease` holds, until `shutdown` completes or the change feed ends. The
    /// lease is confirmed every `LEASE_CONFIRM_INTERVAL`, during passes too: once it cannot
    /// be, the pass in progress is dropped (its cluster tasks aborted, so nothing more is
    /// written) and the lead ends.
    pub(super) async fn lead(
        self: &Arc<Self>,
        lease: &Lease,
        changes: &mut tokio::sync::watch::Receiver<u64>,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> LeadEnd {
        let mut backoff: Option<Duration> = None;
        let mut drifts = self.drift_queue.lock().await;
        let mut fleet_check = tokio::time::interval(self.settings.fleet_check);
        fleet_check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut confirm = tokio::time::interval(LEASE_CONFIRM_INTERVAL);
        confirm.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // Which clusters the next pass runs: every one at first, at each resync and after
        // timers; after a change of the store, those it concerns (`scope`); after a pass that
        // left policies unconfirmed, and nothing else to do, those it left them in.
        let mut scope = PassScope::All;
        // Every cluster held is run at least this often, however many changes come between.
        let full_every = self.settings.resync.min(self.settings.audit_interval);
        let mut full_due = tokio::time::Instant::now();
        loop {
            changes.borrow_and_update();
            if tokio::time::Instant::now() >= full_due {
                scope = PassScope::All;
            }
            if scope == PassScope::All {
                full_due = tokio::time::Instant::now() + full_every;
            }
            let pass = self.pass(Some(lease), std::mem::replace(&mut scope, PassScope::All));
            tokio::pin!(pass);
            let report = tokio::select! {
                report = &mut pass => report,
                () = &mut shutdown => {
                    self.finish_on_shutdown(lease, &mut confirm, pass).await;
                    return LeadEnd::Shutdown;
                }
                // Dropping the pass aborts its cluster tasks: not one more write.
                _ = self.keep_confirming(lease, &mut confirm) => return LeadEnd::LostLease,
            };
            // The fleet or the lease could not be read at the pass's start: nothing was
            // written, and nothing held is confirmed.
            if lease.lost().is_some() {
                return LeadEnd::LostLease;
            }
            let wait = if !report.incomplete() {
                backoff = None;
                if report.unconfirmed > 0 {
                    RECHECK
                } else {
                    full_due.saturating_duration_since(tokio::time::Instant::now())
                }
            } else {
                let next = backoff
                    .map_or(self.settings.min_backoff, |b| b * 2)
                    .min(self.settings.max_backoff);
                tracing::warn!(
                    failed = ?report.failed,
                    unrecorded = ?report.unrecorded,
                    retry_in = ?next,
                    "reconcile pass incomplete"
                );
                backoff = Some(next);
                next
            };
            let mut due = tokio::time::Instant::now() + wait;
            let mut recheck = (!report.incomplete() && report.unconfirmed > 0)
                .then(|| report.unconfirmed_in.clone());
            // An exception ends on time (SPEC 7): a pass starts at its `expiresAt`.
            if let Some(left) = report.next_expiry.as_deref().and_then(until) {
                if left < wait {
                    recheck = None;
                }
                due = due.min(tokio::time::Instant::now() + left);
            }
            loop {
                tokio::select! {
                    () = &mut shutdown => return LeadEnd::Shutdown,
                    changed = changes.changed() => {
                        if changed.is_err() {
                            tracing::warn!("reconciler: the change feed ended");
                            return LeadEnd::Shutdown;
                        }
                        recheck = None;
                        scope = PassScope::Changed;
                        break;
                    }
                    () = tokio::time::sleep_until(due) => break,
                    () = self.builds_done.notified() => {
                        recheck = None;
                        break;
                    }
                    _ = fleet_check.tick() => {
                        // A replica joined or left, or a cluster handed over is free now.
                        match self.rebalance(lease, None).await {
                            Ok(true) => {
                                recheck = None;
                                break;
                            }
                            Ok(false) => {}
                            // The fleet or a lock could not be read: the lease is lost, and
                            // another replica may take the clusters once the server ends its
                            // session. No more writes to them.
                            Err(_) => return LeadEnd::LostLease,
                        }
                    }
                    _ = confirm.tick() => {
                        if self.confirm_leases(lease).await.is_err() {
                            return LeadEnd::LostLease;
                        }
                    }
                    () = self.answering_again(&report.failed) => {
                        tracing::info!("an unreachable cluster answers again: reconciling now");
                        backoff = None;
                        recheck = None;
                        break;
                    }
                    Some(seen) = drifts.recv() => {
                        // A drift is repaired at once, or after its pause; the statuses
                        // already say what happened.
                        if let Some(pause) = self.take_drifts(seen, &mut drifts).await {
                            recheck = None;
                            due = due.min(tokio::time::Instant::now() + pause);
                        }
                    }
                }
            }
            if let Some(clusters) = recheck.filter(|clusters| !clusters.is_empty()) {
                scope = PassScope::Only(clusters);
            }
            let confirmed = tokio::select! {
                () = &mut shutdown => return LeadEnd::Shutdown,
                confirmed = self.confirm_leases(lease) => confirmed,
            };
            if confirmed.is_err() {
                return LeadEnd::LostLease;
            }
        }
    }

    /// Lets a pass that shutdown interrupted finish for at most `shutdown_grace`, while the
    /// lease is confirmed; past it, or once the lease is lost, the pass is dropped, which
    /// aborts its cluster tasks.
    pub(super) async fn finish_on_shutdown(
        &self,
        lease: &Lease,
        confirm: &mut tokio::time::Interval,
        pass: Pin<&mut impl Future<Output = PassReport>>,
    ) {
        let grace = self.settings.shutdown_grace;
        tracing::info!(
            ?grace,
            "reconciler: stopping; the pass in progress may finish"
        );
        let finished = async {
            tokio::select! {
                report = pass => Some(report),
                _ = self.keep_confirming(lease, confirm) => None,
            }
        };
        let finished = match tokio::time::timeout(grace, finished).await {
            Ok(None) => {
                tracing::warn!("reconciler: the lease was lost; the rest of the pass is abandoned");
                return;
            }
            Ok(Some(report)) => Ok(report),
            Err(elapsed) => Err(elapsed),
        };
        match finished {
            Ok(report) if report.incomplete() => tracing::warn!(
                failed = ?report.failed,
                unrecorded = ?report.unrecorded,
                "reconciler: the last pass finished incomplete"
            ),
            Ok(_) => tracing::info!("reconciler: the last pass finished"),
            Err(_) => tracing::warn!(
                ?grace,
                "reconciler: the pass in progress did not finish in time; the rest of it is abandoned"
            ),
        }
    }

    /// Resolves once a cluster of `failed` that does not answer now answers again (its
    /// `/readyz`, looked at every second), so that the pass after an outage starts within
    /// about a second of the API server's return, not after the backoff (SPEC 3.4 v3.1: within
    /// 5 seconds). Never resolves when each of them answers (their failures have other causes,
    /// and the backoff stands) or palisade holds no connection to them.
    pub(super) async fn answering_again(&self, failed: &BTreeMap<String, String>) {
        let clients: Vec<ClusterClient> = failed
            .keys()
            .filter_map(|name| {
                self.memory
                    .get(name, |m| m.connection.as_ref().map(|c| c.client.clone()))
                    .flatten()
            })
            .collect();
        // `/readyz` (readable by anyone, `system:public-info-viewer`): an API server that
        // listens but has not finished starting would fail the pass again.
        let answers = |client: &ClusterClient| {
            let client = client.client().clone();
            async move {
                let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
                    return false;
                };
                tokio::time::timeout(ANSWER_TIMEOUT, client.request_text(request))
                    .await
                    .is_ok_and(|answer| answer.is_ok_and(|text| text.trim() == "ok"))
            }
        };
        let mut down = Vec::new();
        for client in clients {
            if !answers(&client).await {
                down.push(client);
            }
        }
        if down.is_empty() {
            return std::future::pending().await;
        }
        loop {
            tokio::time::sleep(ANSWER_POLL).await;
            for client in &down {
                if answers(client).await {
                    return;
                }
            }
        }
    }
}

/// How long until `at` (a stored RFC 3339 time); zero once it has passed.
fn until(at: &str) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(at).ok()?;
    let left = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(left.to_std().unwrap_or(Duration::ZERO))
}
