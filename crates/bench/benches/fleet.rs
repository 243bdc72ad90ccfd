//! Fleet size: how the cost of palisade's API and reconcile loop grows with the number of
//! clusters it manages (idle, one full pass, a policy change).
//!
//! Starts `max(CLUSTERS)` private Kubernetes 1.37 control planes (etcd + kube-apiserver from
//! `testenv/`, one each, one after the other). Then, for each count `N` of `CLUSTERS` in
//! ascending order, a fresh copy of what `palisade serve` runs (the HTTP API and the reconcile
//! loop on a new SQLite store, `serve`'s defaults without write limits, in this process) gets
//! the first `N` of them: one boundary attached to all `N`, one namespace of it in each
//! (created through the API), and one policy requiring the label `team-0`. Once the API
//! reports that version `enforced` in all `N` clusters, and after 5 s of quiet, it measures,
//! of THIS process only (the API and the loop; the control planes are child processes and
//! not counted):
//!
//! - idle: CPU time (`utime + stime` of `/proc/self/stat`, all threads, in clock ticks of
//!   `getconf CLK_TCK`) over `IDLE_SECONDS` (default 30) in which nothing is asked of it, as a
//!   percentage of one core, and resident memory (`VmRSS` of `/proc/self/status`) at the end;
//! - the bench's own polling: CPU over 10 s of `GET`s of the policy every 20 ms and nothing
//!   else (the API answering them runs in this process too, so the change measurement below
//!   pays for them in its CPU figure);
//! - a full pass: `Controller::reconcile_all` called directly, 5 times one after the other,
//!   while the loop waits (nothing has changed, so it runs no pass of its own: the statuses a
//!   pass writes do not wake it); the median. One of the 5 may include reading each API
//!   server's `/metrics` (done at most once a minute per cluster);
//! - changes: `WARMUP_CHANGES` (default 2) uncounted, then `CHANGES` (default 50) policy
//!   changes, change `i` setting the required key to `team-<i>`. The clock starts when the
//!   `PUT`'s answer has arrived; then `GET /v1/boundaries/{b}/policies/{p}` every 20 ms until
//!   the answer shows the new version `enforced` in all `N` clusters. Between changes, a
//!   pseudo-random 0-1 s, so changes do not line up with the API server's one-second policy
//!   reload. Recorded: p50/p99/max latency (nearest rank: with 50 samples p99 is the max),
//!   and, from the start of the first counted change to the end of the last, CPU time as a
//!   percentage of one core and the largest `VmRSS` seen (read at each poll; `VmHWM` would
//!   be the whole process's lifetime peak). `changes_net_cpu_pct` is an estimate of the CPU
//!   without the bench's polling: the window's CPU time less the polling's rate (measured
//!   alone, above) times the time spent polling (the sum of the latencies, warm-up excluded).
//!   `changes_machine_busy_pct`: how busy the whole machine was in that window (`/proc/stat`,
//!   every core and process: the control planes, palisade, the bench), in percent of all
//!   cores.
//!
//! How "the new version enforced" is told from the old one: a status entry
//! (`ClusterStatus` in `crates/api-types/src/view.rs`) names no version, but the API only
//! shows a stored status whose policy etag is the policy's current etag
//! (`App::statuses` in `crates/app/src/policies.rs`; any other shows as `pending`), and the
//! reconciler records each status with the etag of the version it applied and then probed
//! (`status_record` in `reconcile_cluster`). The probe is a dry-run create that the version
//! must deny with its own message (`requires the label team-<i>`), which the previous version
//! does not give. So the wait ends at the first `GET` whose `etag` is the one the `PUT`
//! answered (it is checked: no one else writes) and whose every entry reads `enforced`. The
//! loop may take a version for `pending` for a moment after writing it (the API server
//! activates a new version within about a second; it probes again 250 ms later).
//!
//! Between counts the clusters are deleted through the API (`DELETE /v1/clusters/{c}`, which
//! removes palisade's objects from each), the stack is dropped, and what is left of its
//! installation is swept once more with `ClusterClient::remove_installation`: every stack's
//! store takes an installation id of its own, so the previous one's objects would otherwise
//! stay in the clusters and add to the admission work the next count measures. Only the namespaces stay, labelled
//! for the boundary `bench`, which the next stack creates again (the API finds them labelled
//! already). The process's memory is not reset between counts: the allocator may keep what
//! earlier stacks freed, so `VmRSS` of a later count includes that; for the memory of one
//! count alone, run it alone.
//!
//! `SCOPE=one` measures a change that concerns one cluster of the `N` a replica holds: the
//! boundary `bench` is attached to the first cluster only, and each other cluster `c<i>` to a
//! boundary `idle-<i>` of its own (one namespace, one policy requiring `team-0`, enforced
//! before the measurement starts, never changed). The changes are made to `bench`'s policy,
//! and "enforced everywhere" means in its one cluster. Goal (issue 43): the CPU per change at
//! `N` = 20 is at most 1.3 times the CPU per change at `N` = 1.
//!
//! `cargo bench -p palisade-bench --bench fleet -- CLUSTERS...` (e.g. `1 5 10 20`;
//! environment: `IDLE_SECONDS`, `CHANGES`, `WARMUP_CHANGES`, `SCOPE=all|one`)

use std::time::{Duration, Instant};

use palisade_reconciler::ClusterClient;
use palisade_testkit::bench::{args_or_usage, env_number, jitter};
use palisade_testkit::control_plane::ControlPlane;
use serde_json::{json, Value};

const BOUNDARY: &str = "bench";
const POLICY: &str = "label";
const NAMESPACE: &str = "bench-fleet";
const POLL: Duration = Duration::from_millis(20);
/// Quiet before the idle window (audits after the first install, the loop settling).
const QUIET: Duration = Duration::from_secs(5);
/// The window in which only the bench's own `GET`s run.
const POLL_WINDOW: Duration = Duration::from_secs(10);
const FULL_PASSES: usize = 5;
/// The first install in `N` clusters.
const SETUP_TIMEOUT: Duration = Duration::from_secs(600);
const CHANGE_TIMEOUT: Duration = Duration::from_secs(120);

#[path = "support/stack.rs"]
mod stack;
use stack::Stack;

fn policy_path() -> String {
    policy_path_in(BOUNDARY)
}

fn policy_path_in(boundary: &str) -> String {
    format!("/v1/boundaries/{boundary}/policies/{POLICY}")
}

/// The boundary of cluster `index` that no change touches (`SCOPE=one`).
fn idle_boundary(index: usize) -> String {
    format!("idle-{}", index + 1)
}

fn spec(change: usize) -> Value {
    json!({"rules": [{"requiredLabels": {"labels": [{"key": format!("team-{change}")}]}}]})
}

fn cluster_name(index: usize) -> String {
    format!("c{}", index + 1)
}

/// `VmRSS` of this process, in kB.
fn rss_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// CPU time of this process (all its threads; not its children), in clock ticks.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let rest = &stat[stat.rfind(')').expect("/proc/self/stat: (comm)") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); utime is field 14, stime field 15.
    let field = |i: usize| -> u64 { fields[i].parse().expect("/proc/self/stat: a number") };
    field(11) + field(12)
}

/// Clock ticks per second (`getconf CLK_TCK`, the unit of `/proc/self/stat`).
fn clock_ticks() -> f64 {
    let out = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .expect("getconf CLK_TCK");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .expect("getconf CLK_TCK: a number")
}

/// The machine's CPU ticks since boot, all cores: (busy, all). Busy is all but `idle` and
/// `iowait` of the `cpu` line of `/proc/stat`.
fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap();
    let line = stat
        .lines()
        .find(|l| l.starts_with("cpu "))
        .expect("/proc/stat: cpu");
    let numbers: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().expect("/proc/stat: a number"))
        .collect();
    let all: u64 = numbers.iter().take(8).sum();
    let idle = numbers[3] + numbers[4];
    (all - idle, all)
}

/// CPU time and wall time from a start, as a percentage of one core.
struct CpuWindow {
    ticks: u64,
    machine: (u64, u64),
    started: Instant,
}

impl CpuWindow {
    fn start() -> CpuWindow {
        CpuWindow {
            ticks: cpu_ticks(),
            machine: machine_ticks(),
            started: Instant::now(),
        }
    }

    /// How busy the whole machine (every process, every core) was since the start, in
    /// percent of all its cores.
    fn machine_busy_pct(&self) -> f64 {
        let (busy, all) = machine_ticks();
        100.0 * (busy - self.machine.0) as f64 / (all - self.machine.1).max(1) as f64
    }

    /// The CPU seconds and the wall seconds since the start.
    fn end(&self, per_second: f64) -> (f64, f64) {
        let cpu = (cpu_ticks() - self.ticks) as f64 / per_second;
        (cpu, self.started.elapsed().as_secs_f64())
    }
}

/// Whether `body` (the policy as the API shows it, at version `etag`) is enforced in all
/// `clusters`.
fn enforced_everywhere(body: &Value, etag: &str, clusters: usize) -> bool {
    assert_eq!(
        body["etag"], etag,
        "the policy changed under the bench: {body}"
    );
    body["status"]["clusters"]
        .as_array()
        .is_some_and(|c| c.len() == clusters && c.iter().all(|entry| entry["status"] == "enforced"))
}

/// Polls the policy every 20 ms from `since` until the API shows version `etag` enforced in
/// all `clusters`: the time from `since` to that answer. Reads `VmRSS` at each poll into
/// `peak_kb`.
async fn until_enforced(
    stack: &Stack,
    etag: &str,
    clusters: usize,
    since: Instant,
    timeout: Duration,
    peak_kb: &mut u64,
) -> Duration {
    loop {
        let body = stack.ok("GET", &policy_path(), None).await;
        let at = since.elapsed();
        *peak_kb = (*peak_kb).max(rss_kb());
        if enforced_everywhere(&body, etag, clusters) {
            return at;
        }
        assert!(
            at < timeout,
            "version {etag} not enforced in {clusters} cluster(s) within {timeout:?}: {body}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// PUTs version `change` of the policy: its etag, and when the answer arrived.
async fn put(stack: &Stack, change: usize) -> (String, Instant) {
    let body = stack.ok("PUT", &policy_path(), Some(spec(change))).await;
    let answered = Instant::now();
    let etag = body["etag"]
        .as_str()
        .unwrap_or_else(|| panic!("no etag in the PUT's answer: {body}"))
        .to_owned();
    (etag, answered)
}

/// Nearest-rank quantile of sorted samples.
fn quantile(sorted: &[Duration], q: f64) -> Duration {
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn mb(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

/// What one count of clusters measured.
#[derive(Debug)]
struct Row {
    clusters: usize,
    idle_rss_kb: u64,
    idle_cpu_pct: f64,
    poll_cpu_pct: f64,
    full_pass: Duration,
    change_p50: Duration,
    change_p99: Duration,
    change_max: Duration,
    changes_cpu_pct: f64,
    changes_net_cpu_pct: f64,
    changes_machine_busy_pct: f64,
    changes_peak_rss_kb: u64,
}

impl Row {
    /// Each figure: its name in a line, its value as written in both, and its unit in a table.
    fn figures(&self) -> [(&'static str, String, &'static str); 12] {
        [
            ("clusters", self.clusters.to_string(), ""),
            (
                "idle_rss_mb",
                format!("{:.1}", mb(self.idle_rss_kb)),
                " MiB",
            ),
            ("idle_cpu_pct", format!("{:.2}", self.idle_cpu_pct), " %"),
            ("poll_cpu_pct", format!("{:.2}", self.poll_cpu_pct), " %"),
            ("full_pass_ms", format!("{:.0}", ms(self.full_pass)), " ms"),
            (
                "change_p50_ms",
                format!("{:.0}", ms(self.change_p50)),
                " ms",
            ),
            (
                "change_p99_ms",
                format!("{:.0}", ms(self.change_p99)),
                " ms",
            ),
            (
                "change_max_ms",
                format!("{:.0}", ms(self.change_max)),
                " ms",
            ),
            (
                "changes_cpu_pct",
                format!("{:.1}", self.changes_cpu_pct),
                " %",
            ),
            (
                "changes_net_cpu_pct",
                format!("{:.1}", self.changes_net_cpu_pct),
                " %",
            ),
            (
                "changes_machine_busy_pct",
                format!("{:.0}", self.changes_machine_busy_pct),
                " %",
            ),
            (
                "changes_peak_rss_mb",
                format!("{:.1}", mb(self.changes_peak_rss_kb)),
                " MiB",
            ),
        ]
    }

    /// `name=value ...`, as the bench's output lines read.
    fn line(&self) -> String {
        self.figures()
            .iter()
            .map(|(name, value, _)| format!("{name}={value}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// `| value unit | ... |`, a row of docs/benchmarks.md's table.
    fn table_row(&self) -> String {
        let cells: Vec<String> = self
            .figures()
            .iter()
            .map(|(_, value, unit)| format!("{value}{unit}"))
            .collect();
        format!("| {} |", cells.join(" | "))
    }
}

struct Config {
    /// `SCOPE=one`: the changed boundary is attached to the first cluster only.
    one: bool,
    idle: Duration,
    changes: usize,
    warmup: usize,
    ticks_per_second: f64,
}

/// Everything for one count of clusters: a fresh stack on `planes`, measured, then cleaned up.
async fn measure(planes: &[ControlPlane], config: &Config) -> Row {
    let count = planes.len();
    let stack = Stack::start().await;
    stack
        .ok("POST", "/v1/boundaries", Some(json!({"name": BOUNDARY})))
        .await;
    let mut peak_kb = 0;
    for (i, plane) in planes.iter().enumerate() {
        let name = cluster_name(i);
        if config.one && i > 0 {
            // A boundary of its own, installed and left alone.
            let idle = idle_boundary(i);
            stack
                .ok("POST", "/v1/boundaries", Some(json!({"name": idle})))
                .await;
            stack
                .add_cluster(
                    &name,
                    plane.kubeconfig_yaml(),
                    &idle,
                    &format!("{NAMESPACE}-idle"),
                )
                .await;
            stack.ok("PUT", &policy_path_in(&idle), Some(spec(0))).await;
        } else {
            stack
                .add_cluster(&name, plane.kubeconfig_yaml(), BOUNDARY, NAMESPACE)
                .await;
        }
    }
    // The clusters the changed boundary is attached to.
    let concerned = if config.one { 1 } else { count };
    let (etag, answered) = put(&stack, 0).await;
    let first = until_enforced(
        &stack,
        &etag,
        concerned,
        answered,
        SETUP_TIMEOUT,
        &mut peak_kb,
    )
    .await;
    eprintln!("clusters={count}: version 0 enforced everywhere after {first:.1?}");
    for i in 1..planes.len() {
        if config.one {
            let path = policy_path_in(&idle_boundary(i));
            let started = Instant::now();
            loop {
                let body = stack.ok("GET", &path, None).await;
                let etag = body["etag"].as_str().unwrap_or_default().to_owned();
                if enforced_everywhere(&body, &etag, 1) {
                    break;
                }
                assert!(
                    started.elapsed() < SETUP_TIMEOUT,
                    "{path} not enforced: {body}"
                );
                tokio::time::sleep(POLL).await;
            }
        }
    }
    let held = planes.len();

    // a. Idle.
    tokio::time::sleep(QUIET).await;
    let window = CpuWindow::start();
    tokio::time::sleep(config.idle).await;
    let (idle_cpu_s, idle_s) = window.end(config.ticks_per_second);
    let idle_cpu_pct = 100.0 * idle_cpu_s / idle_s;
    let idle_rss_kb = rss_kb();
    eprintln!(
        "clusters={count}: idle {:?}: {idle_cpu_s:.2} s of CPU, VmRSS {idle_rss_kb} kB",
        config.idle
    );

    // The bench's own polling, alone.
    let window = CpuWindow::start();
    let polling = Instant::now();
    while polling.elapsed() < POLL_WINDOW {
        let body = stack.ok("GET", &policy_path(), None).await;
        assert!(enforced_everywhere(&body, &etag, concerned), "{body}");
        tokio::time::sleep(POLL).await;
    }
    let (poll_cpu_s, poll_s) = window.end(config.ticks_per_second);
    // CPU seconds per second of polling.
    let poll_rate = poll_cpu_s / poll_s;
    let poll_cpu_pct = 100.0 * poll_rate;

    // b. Full passes, called directly while the loop waits.
    let mut passes = Vec::with_capacity(FULL_PASSES);
    for _ in 0..FULL_PASSES {
        let started = Instant::now();
        let report = stack.controller.reconcile_all().await;
        passes.push(started.elapsed());
        assert!(
            !report.incomplete() && report.reconciled.len() == held,
            "a full pass did not reconcile all {held} cluster(s): {report:?}"
        );
    }
    let millis: Vec<String> = passes.iter().map(|p| format!("{:.0} ms", ms(*p))).collect();
    eprintln!("clusters={count}: full passes [{}]", millis.join(", "));
    passes.sort();
    let full_pass = quantile(&passes, 0.5);

    // c. Changes.
    let mut latencies = Vec::with_capacity(config.changes);
    let mut peak_kb = 0;
    let mut window = None;
    for i in 1..=config.warmup + config.changes {
        let counted = i > config.warmup;
        if counted && window.is_none() {
            window = Some(CpuWindow::start());
            peak_kb = rss_kb();
        }
        tokio::time::sleep(jitter(i)).await;
        let (etag, answered) = put(&stack, i).await;
        let latency = until_enforced(
            &stack,
            &etag,
            concerned,
            answered,
            CHANGE_TIMEOUT,
            &mut peak_kb,
        )
        .await;
        eprintln!(
            "clusters={count}: change {i}{}: enforced everywhere after {} ms",
            if counted { "" } else { " (warm-up)" },
            latency.as_millis()
        );
        if counted {
            latencies.push(latency);
        }
    }
    let changes_machine_busy_pct = window.as_ref().map_or(0.0, CpuWindow::machine_busy_pct);
    let (changes_cpu_s, window_s) = window.map_or((0.0, 0.0), |w| w.end(config.ticks_per_second));
    let changes_cpu_pct = 100.0 * changes_cpu_s / window_s;
    let polled_s: f64 = latencies.iter().map(Duration::as_secs_f64).sum();
    let changes_net_cpu_pct = 100.0 * (changes_cpu_s - poll_rate * polled_s) / window_s;
    eprintln!(
        "clusters={count}: {} changes in {window_s:.1} s: {changes_cpu_s:.2} s of CPU, \
         of which about {:.2} s the bench's polling ({polled_s:.1} s of it)",
        latencies.len(),
        poll_rate * polled_s
    );
    latencies.sort();

    // Clean up: palisade's objects out of the clusters, for the next count's stack.
    let installation = stack.controller.installation().to_owned();
    for i in 0..held {
        stack
            .ok("DELETE", &format!("/v1/clusters/{}", cluster_name(i)), None)
            .await;
    }
    let controller = std::sync::Arc::downgrade(&stack.controller);
    drop(stack);
    // The aborted tasks end at their next await.
    tokio::time::sleep(Duration::from_secs(1)).await;
    if controller.upgrade().is_some() {
        eprintln!(
            "clusters={count}: the dropped stack's controller is still alive after 1 s \
             (its memory stays in the process)"
        );
    }
    for (i, plane) in planes.iter().enumerate() {
        let left = ClusterClient::from_kubeconfig(plane.kubeconfig_yaml())
            .await
            .unwrap()
            .remove_installation(&installation)
            .await
            .unwrap();
        if !left.is_empty() {
            eprintln!(
                "clusters={count}: {} still held {left:?} after its deletion; removed",
                cluster_name(i)
            );
        }
    }

    Row {
        clusters: held,
        idle_rss_kb,
        idle_cpu_pct,
        poll_cpu_pct,
        full_pass,
        change_p50: quantile(&latencies, 0.5),
        change_p99: quantile(&latencies, 0.99),
        change_max: quantile(&latencies, 1.0),
        changes_cpu_pct,
        changes_net_cpu_pct,
        changes_machine_busy_pct,
        changes_peak_rss_kb: peak_kb,
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let Some(args) = args_or_usage(
        "fleet",
        "real control planes and many minutes",
        "cargo bench -p palisade-bench --bench fleet -- CLUSTERS... (e.g. 1 5 10 20)",
    ) else {
        return;
    };
    let mut counts: Vec<usize> = args
        .iter()
        .map(|a| a.parse().expect("CLUSTERS: numbers"))
        .collect();
    counts.sort_unstable();
    counts.dedup();
    assert!(
        counts.first().is_some_and(|&c| c > 0),
        "CLUSTERS: at least 1"
    );
    let config = Config {
        one: std::env::var("SCOPE").is_ok_and(|scope| scope == "one"),
        idle: Duration::from_secs(env_number("IDLE_SECONDS", 30) as u64),
        changes: env_number("CHANGES", 50),
        warmup: env_number("WARMUP_CHANGES", 2),
        ticks_per_second: clock_ticks(),
    };
    assert!(config.changes > 0, "CHANGES: at least 1");
    let most = counts.last().copied().unwrap_or(0);
    let mut planes = Vec::with_capacity(most);
    for i in 0..most {
        eprintln!("starting control plane {}/{most}", i + 1);
        let plane = tokio::task::spawn_blocking(|| ControlPlane::start("1.37"))
            .await
            .unwrap();
        eprintln!(
            "control plane {}/{most} up in {:.1?}",
            i + 1,
            plane.startup_time()
        );
        planes.push(plane);
    }
    let mut rows = Vec::with_capacity(counts.len());
    for &count in &counts {
        let row = measure(&planes[..count], &config).await;
        println!("{}", row.line());
        rows.push(row);
    }
    println!(
        "fleet: Kubernetes {}, idle window {:?}, {} changes (+{} warm-up), polled every {} ms; \
         CPU in % of one core, of this process only",
        planes.first().map_or("?", |p| p.version()),
        config.idle,
        config.changes,
        config.warmup,
        POLL.as_millis()
    );
    println!(
        "| clusters | idle RSS | idle CPU | CPU of the bench's polling | full pass (median of {FULL_PASSES}) | \
         change p50 | change p99 | change max | CPU during changes | the same less the polling (est.) | \
         machine busy during changes (all cores, every process) | peak RSS during changes |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!("{}", row.table_row());
    }
}
