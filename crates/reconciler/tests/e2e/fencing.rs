//! Fencing across replicas (SPEC 4.3 v3.2), against a real API server and PostgreSQL: a
//! replica whose lease connection stalls writes nothing more into its cluster, not even the
//! repair of a drift it sees while its other connections answer, and whoever holds the
//! cluster next is the only one whose writes land from then on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicy;
use kube::runtime::watcher;
use kube::Api;
use palisade_store::{LEASE_CONFIRM_INTERVAL, LEASE_LIFETIME, LEASE_QUERY_TIMEOUT};
use palisade_testkit::stall::{socket_address, StallProxy};
use serde_json::json;

use crate::serve::Stack;
use crate::support::{plane, selector_of};

/// What the test saw happen to one of the boundary's admission policies.
#[derive(Debug, Clone)]
struct Seen {
    /// Since the stall.
    at: Option<Duration>,
    deleted: bool,
    name: String,
    /// The label the version it carries requires: `team` (the first version), `owner` (the
    /// one the stalled replica is writing when it stalls) or `region` (saved after the stall).
    label: &'static str,
}

const POLICIES: usize = 12;

/// Waits until what the watch saw satisfies `done`, for at most `timeout`.
async fn wait_for(
    seen: &Mutex<Vec<Seen>>,
    what: &str,
    done: impl Fn(&[Seen]) -> bool,
    timeout: Duration,
) {
    let started = Instant::now();
    loop {
        if done(&seen.lock().unwrap()) {
            return;
        }
        assert!(
            started.elapsed() < timeout,
            "{what}: not within {timeout:?}: {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `kubeconfig` with its server replaced by `server`.
pub(crate) fn pointed_at(kubeconfig: &str, server: &str) -> String {
    kubeconfig
        .lines()
        .map(|line| match line.split_once("server:") {
            Some((indent, _)) => format!("{indent}server: {server}"),
            None => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Replica A reaches PostgreSQL through one proxy and the cluster through another, which
/// makes each request take a quarter of a second, so that A's pass of 12 changed policies
/// lasts several seconds. Once that pass has written its first object, the proxy stalls A's
/// lease connection alone (A's pool and change feed go on) and replica B starts and saves a
/// third version. A writes nothing into the cluster once it cannot confirm its lease (its
/// last write lands within the lease query's timeout of the stall), nobody writes while A's
/// silent session lives on, and once PostgreSQL has ended that session a holder (B, or A
/// joined again on a new connection, as the placement says) writes the third version.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_stops_writing_before_another_takes_its_cluster() {
    // Without TLS, so that the proxy can tell the lease's connection by its startup message.
    let url = palisade_testkit::postgres::test_database_url();
    let url = format!(
        "{url}{}sslmode=disable",
        if url.contains('?') { "&" } else { "?" }
    );
    let database = StallProxy::start(socket_address(&url)).await;
    let plane = plane("1.37").await;
    let apiserver = plane
        .kubeconfig_yaml()
        .lines()
        .find_map(|l| l.trim().strip_prefix("server:"))
        .map(|s| s.trim().to_owned())
        .unwrap();
    let cluster = StallProxy::start(socket_address(&apiserver)).await;
    let kubeconfig = pointed_at(
        plane.kubeconfig_yaml(),
        &format!("https://{}", cluster.address()),
    );
    let a = Stack::start(Some(database.url(&url))).await;
    let boundary = a.new_boundary("fence", "c1", &kubeconfig).await;
    a.new_namespace(&boundary, "c1", "ns").await;
    // Policy p<i> requires the label <key>-<i> (no two require the same label, so that each
    // probe is conclusive).
    let put_all = |stack: &'static Stack, key: &'static str| {
        let boundary = boundary.clone();
        async move {
            for i in 0..POLICIES {
                let spec = json!({"rules": [{"requiredLabels": {"labels": [{"key": format!("{key}-{i}")}]}}]});
                stack.put_policy(&boundary, &format!("p{i}"), spec).await;
            }
        }
    };
    let a: &'static Stack = Box::leak(Box::new(a));
    put_all(a, "team").await;
    for i in 0..POLICIES {
        assert_eq!(
            a.wait_status(&boundary, &format!("p{i}"), "c1", |s| s != "pending")
                .await,
            "enforced"
        );
    }

    // Every change of the boundary's admission policies, as the API server reports it.
    let policies: Api<ValidatingAdmissionPolicy> = Api::all(plane.client().await);
    let selector = selector_of(&a.installation, &boundary);
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let stalled_at: Arc<Mutex<Option<Instant>>> = Arc::default();
    let watching = {
        let (seen, stalled_at) = (seen.clone(), stalled_at.clone());
        let mut events = watcher(
            policies.clone(),
            watcher::Config::default().labels(&selector),
        )
        .boxed();
        tokio::spawn(async move {
            while let Some(Ok(event)) = events.next().await {
                let (object, deleted) = match event {
                    watcher::Event::Apply(o) => (o, false),
                    watcher::Event::Delete(o) => (o, true),
                    watcher::Event::Init
                    | watcher::Event::InitApply(_)
                    | watcher::Event::InitDone => continue,
                };
                let text = serde_json::to_string(&object.spec).unwrap_or_default();
                let label = ["team", "owner", "region"]
                    .into_iter()
                    .find(|l| text.contains(&format!("{l}-")))
                    .unwrap_or("none");
                let at = stalled_at.lock().unwrap().map(|t| t.elapsed());
                seen.lock().unwrap().push(Seen {
                    at,
                    deleted,
                    name: object.metadata.name.unwrap_or_default(),
                    label,
                });
            }
        })
    };
    // A's requests to the cluster slow down; A starts writing the second version.
    cluster.slow_down(Duration::from_millis(250));
    put_all(a, "owner").await;
    // (The first pass may have seen one change only; the second has the others.)
    wait_for(
        &seen,
        "A writes the second version",
        |seen| seen.iter().filter(|s| s.label == "owner").count() >= 2,
        Duration::from_secs(30),
    )
    .await;
    // A's lease connection stalls in the middle of that pass.
    // (Its lease connection, and any it made before and closed.)
    assert!(database.stall_connections_with(a.replica.as_bytes()) >= 1);
    let stalled = Instant::now();
    *stalled_at.lock().unwrap() = Some(stalled);

    // B, on the database directly, saves the third version.
    let b: &'static Stack = Box::leak(Box::new(
        Stack::start_with(Some(url.clone()), Some(a)).await,
    ));
    put_all(b, "region").await;
    wait_for(
        &seen,
        "the third version everywhere",
        |seen| {
            (0..POLICIES).all(|i| {
                seen.iter()
                    .rev()
                    .find(|s| s.name.starts_with(&format!("p{i}.")))
                    .is_some_and(|s| s.label == "region" && !s.deleted)
            })
        },
        LEASE_LIFETIME + Duration::from_secs(60),
    )
    .await;
    // What A would have written late shows up now or never: a few more seconds of watching.
    tokio::time::sleep(Duration::from_secs(3)).await;
    watching.abort();

    let after: Vec<Seen> = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.at.is_some())
        .cloned()
        .collect();
    let last_of_a = after
        .iter()
        .filter(|s| s.label == "owner")
        .filter_map(|s| s.at)
        .max();
    let first_of_next = after
        .iter()
        .filter(|s| s.label == "region")
        .filter_map(|s| s.at)
        .min()
        .unwrap_or_default();
    eprintln!(
        "after the stall: A's last write {last_of_a:?}, the holder's first {first_of_next:?}: {after:?}"
    );
    // A stopped writing once its lease query timed out (an in-flight request of a quarter of
    // a second may land after that).
    let stopped_by = LEASE_QUERY_TIMEOUT + LEASE_CONFIRM_INTERVAL + Duration::from_millis(1500);
    assert!(
        last_of_a.unwrap_or_default() <= stopped_by,
        "the stalled replica wrote {last_of_a:?} after the stall (the lease query times out after {LEASE_QUERY_TIMEOUT:?})"
    );
    // Nobody wrote while A's silent session lived on.
    assert!(
        first_of_next >= LEASE_LIFETIME - Duration::from_secs(2),
        "written {first_of_next:?} after the stall, before the stalled session could have ended"
    );
    assert!(
        after.iter().all(|s| s.label != "team" || s.deleted),
        "the first version was written again: {after:?}"
    );
    cluster.slow_down(Duration::ZERO);
    b.call("DELETE", "/v1/clusters/c1?force=true", None).await;
    database.resume();
}
