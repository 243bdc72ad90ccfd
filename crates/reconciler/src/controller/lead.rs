//! The loop: the lease, passes on changes, resyncs and backoff, and shutdown.

use super::fleet::Membership;
use super::workers::Workers;
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
                subscribed = self.records.subscribe_changes() => subscribed,
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
                taken = self.records.join_fleet(&self.installation, &self.settings.replica) => taken,
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
            let member = Membership {
                ctl: &self,
                lease: &lease,
            };
            member.lost_lease();
            // Only the holder of a cluster writes its workloads' statuses.
            member.forget_all();
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

    /// Reconciles while `lease` holds, until `shutdown` completes or the change feed ends.
    /// Each cluster is its own worker (`workers`): a change, a timer or a drift starts a round
    /// at once, which runs every concerned cluster whose part is not running and runs the
    /// others again once their parts end, so a silent cluster delays nobody else. The lease
    /// is confirmed every `LEASE_CONFIRM_INTERVAL`, while parts run too: once it cannot be,
    /// the parts under way are dropped (their tasks aborted, so nothing more is written) and
    /// the lead ends.
    pub(super) async fn lead(
        self: &Arc<Self>,
        lease: &Lease,
        changes: &mut tokio::sync::watch::Receiver<u64>,
        mut shutdown: Pin<&mut impl Future<Output = ()>>,
    ) -> LeadEnd {
        let member = Membership { ctl: self, lease };
        let mut drifts = self.drift_queue.lock().await;
        let mut fleet_check = ticks(self.settings.fleet_check);
        let mut confirm = ticks(LEASE_CONFIRM_INTERVAL);
        let mut workers = Workers::default();
        let mut schedule = Schedule::new(&self.settings);
        // The round to start: every cluster at first, at each resync and after timers; after
        // a change of the store, those it concerns (`scope`); after parts that left policies
        // unconfirmed, and nothing else to do, those they left them in.
        let mut round = Some(PassScope::All);
        loop {
            if let Some(scope) = round.take() {
                changes.borrow_and_update();
                let scope = schedule.widen(scope);
                if let Err(failed) = self.start_round(Some(lease), scope, &mut workers).await {
                    workers.round_failed(failed);
                }
                // The fleet or the lease could not be read: nothing was written, and nothing
                // held is confirmed.
                if lease.lost().is_some() {
                    return LeadEnd::LostLease;
                }
                schedule.settle(&mut workers, &self.settings);
            }
            tokio::select! {
                () = &mut shutdown => {
                    member.finish_on_shutdown(&mut confirm, &mut workers).await;
                    return LeadEnd::Shutdown;
                }
                Some(ended) = workers.next(), if !workers.idle() => {
                    let again = ended.again.then(|| ended.cluster.clone());
                    self.ended(ended, Some(lease), &mut workers);
                    if let Some(cluster) = again {
                        round = Some(PassScope::Only(BTreeSet::from([cluster])));
                        continue;
                    }
                    schedule.settle(&mut workers, &self.settings);
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        tracing::warn!("reconciler: the change feed ended");
                        return LeadEnd::Shutdown;
                    }
                    schedule.recheck = None;
                    round = Some(PassScope::Changed);
                }
                () = tokio::time::sleep_until(schedule.wake_at()) => {
                    round = Some(schedule.fired(&mut workers));
                }
                () = self.builds_done.notified() => {
                    schedule.recheck = None;
                    round = Some(PassScope::All);
                }
                _ = fleet_check.tick() => {
                    // A replica joined or left, or a cluster handed over is free now.
                    match member.rebalance(None, &workers.running()).await {
                        Ok(true) => {
                            schedule.recheck = None;
                            round = Some(PassScope::All);
                        }
                        Ok(false) => {}
                        // The fleet or a lock could not be read: the lease is lost, and
                        // another replica may take the clusters once the server ends its
                        // session. No more writes to them (dropping the workers aborts them).
                        Err(_) => return LeadEnd::LostLease,
                    }
                }
                _ = confirm.tick() => {
                    if member.confirm_leases().await.is_err() {
                        return LeadEnd::LostLease;
                    }
                }
                () = answering_again(&self.memory, &schedule.last.failed), if workers.idle() => {
                    tracing::info!("an unreachable cluster answers again: reconciling now");
                    schedule.backoff = None;
                    schedule.recheck = None;
                    round = Some(PassScope::All);
                }
                Some(seen) = drifts.recv() => {
                    // A drift is repaired at once, or after its pause; the statuses
                    // already say what happened.
                    if let Some(pause) = self.take_drifts(seen, &mut drifts).await {
                        schedule.repair_after(pause);
                    }
                }
            }
            if round.is_some() {
                let confirmed = tokio::select! {
                    () = &mut shutdown => return LeadEnd::Shutdown,
                    confirmed = member.confirm_leases() => confirmed,
                };
                if confirmed.is_err() {
                    return LeadEnd::LostLease;
                }
            }
        }
    }
}

/// When the loop's next round is due, and what it runs.
struct Schedule {
    /// Every cluster held is run at least this often, however many changes come between.
    full_every: Duration,
    full_due: tokio::time::Instant,
    /// The next round, from what the parts did (a retry, a look again, the resync).
    due: tokio::time::Instant,
    backoff: Option<Duration>,
    /// The clusters a look again runs, when that is what comes due.
    recheck: Option<BTreeSet<String>>,
    /// When drifts are repaired (at once, or after their pause): a round of every cluster,
    /// whatever the parts that end meanwhile make of `due`.
    repair_at: Option<tokio::time::Instant>,
    /// What the parts did up to the last moment none ran.
    last: PassReport,
}

impl Schedule {
    fn new(settings: &Settings) -> Self {
        let now = tokio::time::Instant::now();
        Schedule {
            full_every: settings.resync.min(settings.audit_interval),
            full_due: now,
            due: now,
            backoff: None,
            recheck: None,
            repair_at: None,
            last: PassReport::default(),
        }
    }

    /// The scope of a round starting now: every cluster once the resync is due.
    fn widen(&mut self, scope: PassScope) -> PassScope {
        let now = tokio::time::Instant::now();
        let scope = if now >= self.full_due {
            PassScope::All
        } else {
            scope
        };
        if scope == PassScope::All {
            self.full_due = now + self.full_every;
            self.repair_at = None;
        }
        scope
    }

    /// When the loop wakes for a timer.
    fn wake_at(&self) -> tokio::time::Instant {
        self.repair_at.map_or(self.due, |at| at.min(self.due))
    }

    /// Drifts to repair after `pause`.
    fn repair_after(&mut self, pause: Duration) {
        self.recheck = None;
        let at = tokio::time::Instant::now() + pause;
        self.repair_at = Some(self.repair_at.map_or(at, |r| r.min(at)));
    }

    /// A timer fired: a look again alone when that is what came due; every cluster otherwise.
    fn fired(&mut self, workers: &mut Workers) -> PassScope {
        let looks = workers.rechecks_due();
        let looks: BTreeSet<String> = self
            .recheck
            .take()
            .unwrap_or_default()
            .into_iter()
            .chain(looks)
            .collect();
        let now = tokio::time::Instant::now();
        let repair = self.repair_at.is_some_and(|at| at <= now);
        if !repair && !looks.is_empty() && now < self.full_due {
            PassScope::Only(looks)
        } else {
            PassScope::All
        }
    }

    /// When the next round is due. While parts run: at the first look again of a cluster
    /// that left policies unconfirmed, the first exception's end, or the resync. Once none
    /// runs, from what they did since the loop was last idle: a retry with backoff, a look
    /// again at the clusters left unconfirmed, or the resync.
    fn settle(&mut self, workers: &mut Workers, settings: &Settings) {
        let now = tokio::time::Instant::now();
        if !workers.idle() {
            let look = workers.next_recheck();
            let expiry = workers.next_expiry().as_deref().and_then(until);
            let mut due = self.full_due;
            if let Some(look) = look {
                due = due.min(tokio::time::Instant::from_std(look));
            }
            if let Some(left) = expiry {
                due = due.min(now + left);
            }
            self.due = due;
            return;
        }
        let report = workers.take_report();
        let full_in = self.full_due.saturating_duration_since(now);
        let (wait, next_backoff) = next_wait(&report, self.backoff, full_in, settings);
        self.backoff = next_backoff;
        if report.incomplete() {
            tracing::warn!(
                failed = ?report.failed,
                unrecorded = ?report.unrecorded,
                retry_in = ?wait,
                "reconcile pass incomplete"
            );
        }
        let (due_in, looks) = due_after(&report, wait);
        self.recheck = looks.filter(|clusters| !clusters.is_empty());
        self.last = report;
        self.due = now + due_in;
    }
}

impl Membership<'_> {
    /// Lets the parts under way when shutdown came finish for at most `shutdown_grace`, while
    /// the lease is confirmed; past it, or once the lease is lost, they are dropped, which
    /// aborts their tasks.
    pub(super) async fn finish_on_shutdown(
        &self,
        confirm: &mut tokio::time::Interval,
        workers: &mut Workers,
    ) {
        if workers.idle() {
            return;
        }
        let grace = self.ctl.settings.shutdown_grace;
        tracing::info!(
            ?grace,
            "reconciler: stopping; the pass in progress may finish"
        );
        let finished = async {
            tokio::select! {
                () = workers.drain() => true,
                _ = self.keep_confirming(confirm) => false,
            }
        };
        match tokio::time::timeout(grace, finished).await {
            Ok(false) => {
                tracing::warn!("reconciler: the lease was lost; the rest of the pass is abandoned");
            }
            Ok(true) => tracing::info!("reconciler: the last pass finished"),
            Err(_) => tracing::warn!(
                ?grace,
                "reconciler: the pass in progress did not finish in time; the rest of it is abandoned"
            ),
        }
    }
}

/// Resolves once a cluster of `failed` that does not answer now answers again (its
/// `/readyz`, looked at every second), so that the pass after an outage starts within
/// about a second of the API server's return, not after the backoff (SPEC 3.4 v3.1: within
/// 5 seconds). Never resolves when each of them answers (their failures have other causes,
/// and the backoff stands) or palisade holds no connection to them.
async fn answering_again(memory: &Memories, failed: &BTreeMap<String, String>) {
    let clients: Vec<ClusterClient> = failed
        .keys()
        .filter_map(|name| {
            memory
                .connection(name)
                .map(|c| ClusterClient::clone(&c.client))
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

/// How long after a pass the next one waits, and the backoff from then on: a pass that left
/// something to retry waits `min_backoff`, doubling up to `max_backoff`; one that left
/// policies unconfirmed looks again after [`RECHECK`]; otherwise the next full pass is due in
/// `full_in`.
fn next_wait(
    report: &PassReport,
    backoff: Option<Duration>,
    full_in: Duration,
    settings: &Settings,
) -> (Duration, Option<Duration>) {
    if report.incomplete() {
        let next = backoff
            .map_or(settings.min_backoff, |b| b * 2)
            .min(settings.max_backoff);
        return (next, Some(next));
    }
    let wait = if report.unconfirmed > 0 {
        RECHECK
    } else {
        full_in
    };
    (wait, None)
}

/// When the next pass is due, `wait` from now or sooner at the first exception's end (SPEC 7:
/// an exception ends on time), and the clusters it looks at again when it is a look again.
fn due_after(report: &PassReport, wait: Duration) -> (Duration, Option<BTreeSet<String>>) {
    let mut recheck =
        (!report.incomplete() && report.unconfirmed > 0).then(|| report.unconfirmed_in.clone());
    let mut due = wait;
    if let Some(left) = report.next_expiry.as_deref().and_then(until) {
        if left < wait {
            recheck = None;
        }
        due = due.min(left);
    }
    (due, recheck)
}

/// Ticks every `period`; one missed (a pass ran long) is taken late, not made up in a burst.
fn ticks(period: Duration) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

/// How long until `at` (a stored RFC 3339 time); zero once it has passed.
fn until(at: &str) -> Option<Duration> {
    let at = chrono::DateTime::parse_from_rfc3339(at).ok()?;
    let left = at.with_timezone(&chrono::Utc) - chrono::Utc::now();
    Some(left.to_std().unwrap_or(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn after_a_pass_the_next_waits_for_a_retry_a_look_again_or_the_resync() {
        let settings = Settings::default();
        let full_in = Duration::from_secs(200);
        let failed = PassReport {
            failed: [("c1".to_owned(), "unreachable".to_owned())].into(),
            ..PassReport::default()
        };
        let unrecorded = PassReport {
            unrecorded: ["c1".to_owned()].into(),
            ..PassReport::default()
        };
        let unconfirmed = PassReport {
            unconfirmed: 2,
            ..PassReport::default()
        };
        let done = PassReport::default();
        let second = |s: u64| Duration::from_secs(s);
        let cases = [
            (&failed, None, (second(1), Some(second(1)))),
            (&failed, Some(second(1)), (second(2), Some(second(2)))),
            (&failed, Some(second(40)), (second(60), Some(second(60)))),
            (&unrecorded, Some(second(8)), (second(16), Some(second(16)))),
            // A pass that completed ends the backoff.
            (&unconfirmed, Some(second(8)), (RECHECK, None)),
            (&done, Some(second(8)), (full_in, None)),
            (&done, None, (full_in, None)),
        ];
        for (report, backoff, want) in cases {
            assert_eq!(
                next_wait(report, backoff, full_in, &settings),
                want,
                "{report:?} after {backoff:?}"
            );
        }
    }

    /// What a timer starts: a look again alone, or every cluster when a drift's repair or the
    /// resync is due with it.
    #[tokio::test]
    async fn a_timer_starts_a_look_again_or_a_round_of_every_cluster() {
        let settings = Settings::default();
        let c1: BTreeSet<String> = ["c1".to_owned()].into();
        let now = tokio::time::Instant::now();
        let later = now + Duration::from_secs(60);
        // (case, look again, drift repair at, resync at, scope)
        let cases = [
            (
                "a look again",
                Some(c1.clone()),
                None,
                later,
                PassScope::Only(c1.clone()),
            ),
            (
                "a look again and a repair",
                Some(c1.clone()),
                Some(now),
                later,
                PassScope::All,
            ),
            (
                "a repair not due yet",
                Some(c1.clone()),
                Some(later),
                later,
                PassScope::Only(c1.clone()),
            ),
            (
                "a look again at the resync",
                Some(c1.clone()),
                None,
                now,
                PassScope::All,
            ),
            (
                "the backoff or an exception's end",
                None,
                None,
                later,
                PassScope::All,
            ),
        ];
        for (case, recheck, repair_at, full_due, want) in cases {
            let mut schedule = Schedule::new(&settings);
            schedule.recheck = recheck;
            schedule.repair_at = repair_at;
            schedule.full_due = full_due;
            assert_eq!(schedule.fired(&mut Workers::default()), want, "{case}");
        }
        // A round of every cluster moves the resync on and takes the repair with it.
        let mut schedule = Schedule::new(&settings);
        schedule.repair_after(Duration::from_secs(2));
        assert_eq!(
            schedule.widen(PassScope::Changed),
            PassScope::All,
            "the first round"
        );
        assert!(schedule.repair_at.is_none());
        assert_eq!(schedule.widen(PassScope::Changed), PassScope::Changed);
        schedule.repair_after(Duration::from_secs(2));
        assert!(schedule.wake_at() <= tokio::time::Instant::now() + Duration::from_secs(2));
    }

    #[test]
    fn a_look_again_gives_way_to_an_exception_that_ends_sooner() {
        let c1: BTreeSet<String> = ["c1".to_owned()].into();
        let unconfirmed = PassReport {
            unconfirmed: 1,
            unconfirmed_in: c1.clone(),
            ..PassReport::default()
        };
        let wait = Duration::from_secs(5);
        assert_eq!(due_after(&unconfirmed, wait), (wait, Some(c1.clone())));
        let ended = PassReport {
            next_expiry: Some("2000-01-01T00:00:00Z".to_owned()),
            ..unconfirmed.clone()
        };
        // Ended already: a full pass now, not a look at c1 only.
        assert_eq!(due_after(&ended, wait), (Duration::ZERO, None));
        let later = PassReport {
            next_expiry: Some("2999-01-01T00:00:00Z".to_owned()),
            ..unconfirmed
        };
        assert_eq!(due_after(&later, wait), (wait, Some(c1)));
        let failed = PassReport {
            failed: [("c1".to_owned(), "x".to_owned())].into(),
            ..PassReport::default()
        };
        assert_eq!(due_after(&failed, wait), (wait, None));
    }
}
