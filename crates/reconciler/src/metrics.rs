//! The reconcile loop's metrics, recorded through the `metrics` facade into whatever recorder
//! the process installed (`palisade serve`: the Prometheus recorder behind `/metrics`; none:
//! nothing is recorded). Per-cluster series carry the cluster's name as `cluster`.

use std::time::Duration;

/// Counter `{cluster, outcome}`: one per cluster per pass; `outcome` is `ok`, `error` or
/// `not_enforced` (the cluster cannot enforce admission rules; nothing is written to it).
pub const PASSES: &str = "palisade_reconcile_passes_total";
/// Histogram `{cluster}`: how long a cluster's part of a pass took, in seconds.
pub const PASS_DURATION: &str = "palisade_reconcile_pass_duration_seconds";
/// Counter `{cluster}`: status writes (cluster status, policy statuses) the store refused.
pub const STATUS_WRITE_FAILURES: &str = "palisade_reconcile_status_write_failures_total";
/// Counter `{cluster}`: policies server-side applied (each a policy and its binding).
pub const POLICIES_APPLIED: &str = "palisade_reconcile_policies_applied_total";
/// Counter `{cluster}`: policies whose objects were garbage-collected (deleted policies and
/// boundaries, detached clusters).
pub const POLICIES_REMOVED: &str = "palisade_reconcile_policies_removed_total";
/// Counter: passes that could not start because the store could not be read.
pub const STORE_READ_FAILURES: &str = "palisade_reconcile_store_read_failures_total";
/// Counter `{cluster}`: API servers seen that started after palisade first looked at the
/// cluster (a restart, or an instance added); each recompiles every admission policy.
pub const APISERVER_RESTARTS: &str = "palisade_cluster_apiserver_restarts_total";
/// Counter `{cluster, kind}`: things palisade owns in a cluster that it found changed by
/// someone else and put back; `kind` says what (`namespace_label`).
pub const REPAIRS: &str = "palisade_reconcile_repairs_total";
/// Gauge `{cluster, layout}`: 1 for the admission layout a cluster's objects are in, 0 for
/// the others (`per-policy`, `per-boundary`, `shared`).
pub const LAYOUT: &str = "palisade_cluster_admission_layout";
/// Gauge: 1 while this replica is a member of the installation's fleet of reconcilers and
/// runs passes, 0 while it stands by.
pub const ACTIVE: &str = "palisade_reconcile_active";
/// Gauge: how many clusters this replica reconciles (holds the lease of).
pub const CLUSTERS_HELD: &str = "palisade_reconcile_clusters_held";
/// Gauge: how many replicas reconcile the installation's clusters, as this one last saw.
pub const FLEET_MEMBERS: &str = "palisade_reconcile_fleet_members";
/// Counter `{change}`: clusters this replica took (`taken`) or gave up (`released`) as
/// replicas joined or left, or stopped writing to because it could not confirm their lease
/// (`lost`: the lease's database connection failed or stalled).
pub const HANDOVERS: &str = "palisade_reconcile_cluster_handovers_total";
/// Exceptions that have ended but are still installed in a cluster palisade could not update.
pub const EXCEPTIONS_ENDED_INSTALLED: &str = "palisade_exceptions_ended_still_installed";
/// Gauge `{boundary, policy}`: the stage (from 1) of a policy's staged rollout while it runs
/// or is paused (SPEC 8); 0 once none does.
pub const ROLLOUT_STAGE: &str = "palisade_rollout_stage";
/// Gauge `{boundary, policy}`: the requests the version being rolled out denied in its stage,
/// as last counted (when the stage was due); 0 once no rollout runs.
pub const ROLLOUT_DENIALS: &str = "palisade_rollout_stage_denials";
/// Gauge `{boundary, policy}`: 1 while the rollout is paused, waiting for someone.
pub const ROLLOUT_PAUSED: &str = "palisade_rollout_paused";

/// The metrics labelled `boundary` and `policy`: their series exist from the first round that
/// sees a rollout of the policy run, and stay at 0 after it.
pub const PER_ROLLOUT: [&str; 3] = [ROLLOUT_STAGE, ROLLOUT_DENIALS, ROLLOUT_PAUSED];

/// The metrics whose series exist from the start (once the reconciler is made), at 0 until
/// something happens: an alert on `rate(...) > 0` has a series to watch.
pub const FROM_START: [&str; 5] = [
    STORE_READ_FAILURES,
    HANDOVERS,
    ACTIVE,
    CLUSTERS_HELD,
    FLEET_MEMBERS,
];

/// The metrics labelled `cluster`: their series exist from the cluster's first pass (the
/// reconciler knows no cluster before), the counters and the ended-exceptions gauge at 0.
/// The layout gauge exists once a pass that reached the cluster recorded its layout.
pub const PER_CLUSTER: [&str; 9] = [
    PASSES,
    PASS_DURATION,
    STATUS_WRITE_FAILURES,
    POLICIES_APPLIED,
    POLICIES_REMOVED,
    APISERVER_RESTARTS,
    REPAIRS,
    LAYOUT,
    EXCEPTIONS_ENDED_INSTALLED,
];

/// The histograms among [`FROM_START`] and [`PER_CLUSTER`] (their series are `_bucket`,
/// `_sum` and `_count`).
pub const HISTOGRAMS: [&str; 1] = [PASS_DURATION];

/// How a cluster's part of a pass ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Error,
    NotEnforced,
}

impl Outcome {
    pub fn label(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::NotEnforced => "not_enforced",
        }
    }
}

/// The `kind`s of [`REPAIRS`], one per kind of drift.
pub(crate) const REPAIR_KINDS: [&str; 6] = [
    "policy",
    "binding",
    "guard",
    "parameters",
    "definition",
    "namespace_label",
];

/// Makes every per-cluster counter of `cluster` exist, at 0 until its first increment (an
/// alert on `rate(...) > 0` or `increase(...)` needs the series before anything happened),
/// and its ended-exceptions gauge, at 0 until the pass sets it.
fn cluster_counters(cluster: &str) {
    ::metrics::gauge!(EXCEPTIONS_ENDED_INSTALLED, "cluster" => cluster.to_owned()).increment(0.0);
    for outcome in [Outcome::Ok, Outcome::Error, Outcome::NotEnforced] {
        ::metrics::counter!(PASSES, "cluster" => cluster.to_owned(), "outcome" => outcome.label())
            .increment(0);
    }
    for name in [
        STATUS_WRITE_FAILURES,
        POLICIES_APPLIED,
        POLICIES_REMOVED,
        APISERVER_RESTARTS,
    ] {
        ::metrics::counter!(name, "cluster" => cluster.to_owned()).increment(0);
    }
    for kind in REPAIR_KINDS {
        ::metrics::counter!(REPAIRS, "cluster" => cluster.to_owned(), "kind" => kind).increment(0);
    }
}

/// Describes the metrics to the installed recorder (Prometheus `# HELP` lines), and makes
/// those without a cluster ([`FROM_START`]) exist at 0: the replica stands by, holds no
/// cluster and has seen no fleet until its reconcile loop says otherwise.
pub fn describe() {
    ::metrics::counter!(STORE_READ_FAILURES).increment(0);
    for change in ["taken", "released", "lost"] {
        ::metrics::counter!(HANDOVERS, "change" => change).increment(0);
    }
    for gauge in [ACTIVE, CLUSTERS_HELD, FLEET_MEMBERS] {
        ::metrics::gauge!(gauge).increment(0.0);
    }
    ::metrics::describe_counter!(PASSES, "Reconcile passes per cluster, by outcome");
    ::metrics::describe_histogram!(
        PASS_DURATION,
        ::metrics::Unit::Seconds,
        "How long a cluster's part of a reconcile pass took"
    );
    ::metrics::describe_counter!(
        STATUS_WRITE_FAILURES,
        "Cluster and policy status writes of the reconciler that failed"
    );
    ::metrics::describe_counter!(POLICIES_APPLIED, "Policies applied to a cluster");
    ::metrics::describe_counter!(
        APISERVER_RESTARTS,
        "API servers of a cluster seen to have started after palisade first looked (restarts)"
    );
    ::metrics::describe_counter!(
        POLICIES_REMOVED,
        "Policies whose objects were removed from a cluster"
    );
    ::metrics::describe_counter!(
        STORE_READ_FAILURES,
        "Reconcile passes that could not read the store"
    );
    ::metrics::describe_counter!(
        REPAIRS,
        "Objects or labels palisade owns in a cluster, found changed by someone else and put back"
    );
    ::metrics::describe_gauge!(
        LAYOUT,
        "1 for the admission layout a cluster's objects are in, 0 for the others"
    );
    ::metrics::describe_gauge!(
        ROLLOUT_STAGE,
        "The stage (from 1) of a policy's staged rollout while it runs or is paused; 0 once none does"
    );
    ::metrics::describe_gauge!(
        ROLLOUT_DENIALS,
        "Requests the version being rolled out denied in its stage, as last counted"
    );
    ::metrics::describe_gauge!(
        ROLLOUT_PAUSED,
        "1 while a policy's staged rollout is paused, waiting for a promote or an abort"
    );
    ::metrics::describe_gauge!(
        EXCEPTIONS_ENDED_INSTALLED,
        "Exceptions past their expiresAt still installed in a cluster (it could not be updated)"
    );
    ::metrics::describe_gauge!(
        ACTIVE,
        "1 while this replica is a member of the installation's fleet of reconcilers, 0 while it stands by"
    );
    ::metrics::describe_gauge!(
        CLUSTERS_HELD,
        "Clusters this replica reconciles (holds the lease of)"
    );
    ::metrics::describe_gauge!(
        FLEET_MEMBERS,
        "Replicas reconciling the installation's clusters, as this one last saw"
    );
    ::metrics::describe_counter!(
        HANDOVERS,
        "Clusters this replica took or gave up as replicas joined or left, or lost (lease not confirmed)"
    );
}

pub(crate) fn fleet(members: usize, held: usize) {
    ::metrics::gauge!(FLEET_MEMBERS).set(members as f64);
    ::metrics::gauge!(CLUSTERS_HELD).set(held as f64);
}

pub(crate) fn handover(taken: bool, clusters: usize) {
    if clusters > 0 {
        let change = if taken { "taken" } else { "released" };
        ::metrics::counter!(HANDOVERS, "change" => change).increment(clusters as u64);
    }
}

/// Clusters whose lease this replica could not confirm, and so stopped writing to.
pub(crate) fn handover_lost(clusters: usize) {
    if clusters > 0 {
        ::metrics::counter!(HANDOVERS, "change" => "lost").increment(clusters as u64);
    }
}

pub(crate) fn fleet_held(held: usize) {
    ::metrics::gauge!(CLUSTERS_HELD).set(held as f64);
}

pub(crate) fn pass(cluster: &str, outcome: Outcome, took: Duration) {
    cluster_counters(cluster);
    ::metrics::counter!(PASSES, "cluster" => cluster.to_owned(), "outcome" => outcome.label())
        .increment(1);
    ::metrics::histogram!(PASS_DURATION, "cluster" => cluster.to_owned())
        .record(took.as_secs_f64());
}

pub(crate) fn status_write_failed(cluster: &str) {
    ::metrics::counter!(STATUS_WRITE_FAILURES, "cluster" => cluster.to_owned()).increment(1);
}

pub(crate) fn applied(cluster: &str) {
    ::metrics::counter!(POLICIES_APPLIED, "cluster" => cluster.to_owned()).increment(1);
}

pub(crate) fn removed(cluster: &str, policies: usize) {
    if policies > 0 {
        ::metrics::counter!(POLICIES_REMOVED, "cluster" => cluster.to_owned())
            .increment(policies as u64);
    }
}

pub(crate) fn apiserver_restarted(cluster: &str) {
    ::metrics::counter!(APISERVER_RESTARTS, "cluster" => cluster.to_owned()).increment(1);
}

pub(crate) fn repaired(cluster: &str, kind: &'static str) {
    ::metrics::counter!(REPAIRS, "cluster" => cluster.to_owned(), "kind" => kind).increment(1);
}

pub(crate) fn store_read_failed() {
    ::metrics::counter!(STORE_READ_FAILURES).increment(1);
}

pub(crate) fn active(active: bool) {
    ::metrics::gauge!(ACTIVE).set(if active { 1.0 } else { 0.0 });
}

pub(crate) fn layout(cluster: &str, layout: palisade_vap::Layout) {
    for each in palisade_vap::Layout::ALL {
        ::metrics::gauge!(LAYOUT, "cluster" => cluster.to_owned(), "layout" => each.as_str())
            .set(if each == layout { 1.0 } else { 0.0 });
    }
}

/// A policy's rollout as the loop last saw it: `(stage from 1, denials, paused)`, or `None`
/// once none runs.
pub(crate) fn rollout(boundary: &str, policy: &str, shown: Option<(usize, u64, bool)>) {
    let (stage, denials, paused) = shown.unwrap_or((0, 0, false));
    let labels = [
        ("boundary", boundary.to_owned()),
        ("policy", policy.to_owned()),
    ];
    ::metrics::gauge!(ROLLOUT_STAGE, &labels).set(stage as f64);
    ::metrics::gauge!(ROLLOUT_DENIALS, &labels).set(denials as f64);
    ::metrics::gauge!(ROLLOUT_PAUSED, &labels).set(if paused { 1.0 } else { 0.0 });
}

pub(crate) fn ended_still_installed(cluster: &str, count: usize) {
    ::metrics::gauge!(EXCEPTIONS_ENDED_INSTALLED, "cluster" => cluster.to_owned())
        .set(count as f64);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every counter exists at 0 before anything happened: from the start for those without a
    /// cluster, from a cluster's first pass for its own (an alert on `rate(...) > 0` has a
    /// series to watch).
    #[test]
    fn every_counter_is_there_at_zero_from_the_start() {
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        ::metrics::with_local_recorder(&recorder, || {
            describe();
            pass("c1", Outcome::Ok, Duration::from_millis(5));
        });
        let text = handle.render();
        let mut wanted = vec![
            "palisade_reconcile_store_read_failures_total 0".to_owned(),
            "palisade_reconcile_cluster_handovers_total{change=\"lost\"} 0".to_owned(),
            "palisade_reconcile_passes_total{cluster=\"c1\",outcome=\"error\"} 0".to_owned(),
            "palisade_reconcile_passes_total{cluster=\"c1\",outcome=\"ok\"} 1".to_owned(),
            "palisade_reconcile_status_write_failures_total{cluster=\"c1\"} 0".to_owned(),
            "palisade_reconcile_policies_applied_total{cluster=\"c1\"} 0".to_owned(),
            "palisade_reconcile_policies_removed_total{cluster=\"c1\"} 0".to_owned(),
            "palisade_cluster_apiserver_restarts_total{cluster=\"c1\"} 0".to_owned(),
        ];
        wanted.extend(REPAIR_KINDS.iter().map(|kind| {
            format!("palisade_reconcile_repairs_total{{cluster=\"c1\",kind=\"{kind}\"}} 0")
        }));
        wanted.push("palisade_exceptions_ended_still_installed{cluster=\"c1\"} 0".to_owned());
        wanted.push("palisade_reconcile_active 0".to_owned());
        for line in wanted {
            assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
        }
    }

    /// [`FROM_START`] and [`PER_CLUSTER`] name every metric the reconciler records, each
    /// once: after a pass and each recording, the families on `/metrics` are exactly theirs.
    #[test]
    fn the_lists_name_every_metric_recorded() {
        // With buckets, as `palisade serve` records them (a summary without).
        let recorder = metrics_exporter_prometheus::PrometheusBuilder::new()
            .set_buckets(&[0.1, 1.0])
            .expect("buckets")
            .build_recorder();
        let handle = recorder.handle();
        ::metrics::with_local_recorder(&recorder, || {
            describe();
            pass("c1", Outcome::Ok, Duration::from_millis(5));
            status_write_failed("c1");
            applied("c1");
            removed("c1", 1);
            apiserver_restarted("c1");
            repaired("c1", "binding");
            store_read_failed();
            active(true);
            layout("c1", palisade_vap::Layout::Shared);
            ended_still_installed("c1", 1);
            fleet(2, 1);
            fleet_held(1);
            handover(true, 1);
            handover_lost(1);
        });
        let text = handle.render();
        let mut families: Vec<&str> = text
            .lines()
            .filter_map(|line| line.strip_prefix("# TYPE "))
            .filter_map(|line| line.split(' ').next())
            .collect();
        families.sort_unstable();
        let mut listed: Vec<&str> = FROM_START.iter().chain(&PER_CLUSTER).copied().collect();
        listed.sort_unstable();
        assert_eq!(families, listed);
        for name in HISTOGRAMS {
            assert!(text.contains(&format!("# TYPE {name} histogram")), "{text}");
        }
    }
}
