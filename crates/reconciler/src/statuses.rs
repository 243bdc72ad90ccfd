//! Workloads' status (SPEC 5), from what the cluster says: one watch per cluster on this
//! installation's Deployments, ReplicaSets and Jobs (by label) and on `FailedCreate` events
//! (by field), each kept in a reflector. Whenever any of them changes, or a pass hands over
//! new targets, every target's status is computed again from the reflectors and the
//! targets' outcomes (what the API server answered the pass), and the statuses that changed
//! are written to the store — within a fraction of a second of the cluster's event, without
//! polling any object.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::stream::{BoxStream, SelectAll};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Event;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, ResourceExt};
use palisade_api_types::view::WorkloadStatus;
use palisade_app::ports::Records;
use palisade_app::reconcile::ResourceKey;
use tokio::sync::Notify;

use crate::workloads::{denial, job_condition, Outcome, Target};

/// How long a burst of events is gathered before statuses are computed again.
const SETTLE: Duration = Duration::from_millis(50);
/// The server ends each watch request after this long (below the client's read timeout), and
/// the watch resumes from where it was.
const WATCH_TIMEOUT_SECONDS: u32 = 15;

/// The watch of one cluster; dropping it stops it.
#[derive(Debug)]
pub struct StatusWatch {
    targets: Arc<Mutex<Vec<Target>>>,
    poke: Arc<Notify>,
    health: Arc<Mutex<Health>>,
    task: tokio::task::JoinHandle<()>,
}

/// Whether the watches have read everything once, and their latest failure.
#[derive(Clone, Debug, Default)]
struct Health {
    ready: bool,
    error: Option<String>,
}

impl Drop for StatusWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StatusWatch {
    /// Starts watching with `client`. `pass` is notified when a build finishes, so that the
    /// next pass deploys what it built.
    pub fn start(
        client: Client,
        installation: &str,
        records: Arc<dyn Records>,
        targets: Vec<Target>,
        pass: Arc<Notify>,
    ) -> Self {
        let targets = Arc::new(Mutex::new(targets));
        let poke = Arc::new(Notify::new());
        let health = Arc::new(Mutex::new(Health::default()));
        let task = tokio::spawn(run(
            client,
            installation.to_owned(),
            records,
            targets.clone(),
            poke.clone(),
            pass,
            health.clone(),
        ));
        StatusWatch {
            targets,
            poke,
            health,
            task,
        }
    }

    /// Hands over what the latest pass did.
    pub fn update(&self, targets: Vec<Target>) {
        if let Ok(mut current) = self.targets.lock() {
            *current = targets;
        }
        self.poke.notify_one();
    }

    /// Whether every watch has read its objects once (statuses are written from then on).
    pub fn is_ready(&self) -> bool {
        self.health.lock().is_ok_and(|h| h.ready)
    }

    /// The latest failure of a watch (each is retried with backoff), e.g. a 403 when palisade
    /// may not watch a kind.
    pub fn error(&self) -> Option<String> {
        self.health.lock().ok().and_then(|h| h.error.clone())
    }

    /// Whether the task is still running (it ends only if every watch stream ends).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished()
    }
}

/// What the reflectors hold.
struct Seen {
    deployments: Store<Deployment>,
    replica_sets: Store<ReplicaSet>,
    jobs: Store<Job>,
    events: Store<Event>,
}

/// Which reflector an item came from, and whether its first list is complete.
#[derive(Clone, Copy)]
struct Item {
    stream: usize,
    init_done: bool,
}

fn follow<K>(
    api: Api<K>,
    config: watcher::Config,
    stream: usize,
) -> (Store<K>, BoxStream<'static, Result<Item, watcher::Error>>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let events = reflector::reflector(writer, watcher(api, config))
        .default_backoff()
        .map(move |event| {
            event.map(|event| Item {
                stream,
                init_done: matches!(event, watcher::Event::InitDone),
            })
        })
        .boxed();
    (reader, events)
}

async fn run(
    client: Client,
    installation: String,
    records: Arc<dyn Records>,
    targets: Arc<Mutex<Vec<Target>>>,
    poke: Arc<Notify>,
    pass: Arc<Notify>,
    health: Arc<Mutex<Health>>,
) {
    let owned = watcher::Config::default()
        .labels(&palisade_workload::owned_selector(&installation))
        .timeout(WATCH_TIMEOUT_SECONDS);
    let failed_creates = watcher::Config::default()
        .fields("reason=FailedCreate")
        .timeout(WATCH_TIMEOUT_SECONDS);
    let (deployments, d) = follow(Api::<Deployment>::all(client.clone()), owned.clone(), 0);
    let (replica_sets, r) = follow(Api::<ReplicaSet>::all(client.clone()), owned.clone(), 1);
    let (jobs, j) = follow(Api::<Job>::all(client.clone()), owned, 2);
    let (events, e) = follow(Api::<Event>::all(client), failed_creates, 3);
    let seen = Seen {
        deployments,
        replica_sets,
        jobs,
        events,
    };
    let mut streams: SelectAll<_> = futures::stream::select_all([d, r, j, e]);
    let mut ready = [false; 4];
    let mut written: HashMap<ResourceKey, WorkloadStatus> = HashMap::new();
    let mut finished_builds: Vec<String> = Vec::new();
    loop {
        tokio::select! {
            item = streams.next() => match item {
                Some(item) => note(item, &mut ready, &health),
                None => return,
            },
            () = poke.notified() => {}
        }
        // Gather the rest of a burst.
        let settle = tokio::time::sleep(SETTLE);
        tokio::pin!(settle);
        loop {
            tokio::select! {
                item = streams.next() => match item {
                    Some(item) => note(item, &mut ready, &health),
                    None => return,
                },
                () = &mut settle => break,
            }
        }
        if !ready.iter().all(|r| *r) {
            continue;
        }
        if let Ok(mut health) = health.lock() {
            health.ready = true;
        }
        let current = targets.lock().map(|t| t.clone()).unwrap_or_default();
        let mut wake_pass = false;
        for target in &current {
            let status = status_of(target, &seen);
            if target.outcome == Outcome::Building && build_finished(target, &seen) {
                // The build finished (or its pods are refused): the pass moves on.
                let job = target.job.clone().unwrap_or_default();
                if !finished_builds.contains(&job) {
                    finished_builds.push(job);
                    wake_pass = true;
                }
            }
            if written.get(&target.key) == Some(&status) {
                continue;
            }
            match records.record_workload_status(&target.key, &status).await {
                Ok(_) => {
                    written.insert(target.key.clone(), status);
                }
                Err(error) => tracing::warn!(
                    resource = %format!("{}/{}/{}", target.key.boundary, target.key.resource_type, target.key.name),
                    %error,
                    "the status could not be written; it is tried again on the next change"
                ),
            }
        }
        if wake_pass {
            pass.notify_one();
        }
    }
}

fn note(item: Result<Item, watcher::Error>, ready: &mut [bool; 4], health: &Mutex<Health>) {
    match item {
        Ok(Item {
            stream,
            init_done: true,
        }) => {
            if let Some(flag) = ready.get_mut(stream) {
                *flag = true;
            }
        }
        Ok(_) => {}
        Err(error) => {
            tracing::debug!(%error, "workload watch: retrying");
            if let Ok(mut health) = health.lock() {
                health.error = Some(error.to_string());
            }
        }
    }
}

/// The latest `FailedCreate` message about the object with `uid`.
fn failed_create(events: &Store<Event>, uid: &str) -> Option<String> {
    events
        .state()
        .into_iter()
        .filter(|e| e.involved_object.uid.as_deref() == Some(uid))
        .max_by_key(|e| {
            e.series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0))
                .or(e.last_timestamp.as_ref().map(|t| t.0))
                .or(e.event_time.as_ref().map(|t| t.0))
        })
        .and_then(|e| e.message.clone())
        .map(|message| match denial(&message) {
            Some(denied) => denied.to_owned(),
            None => message
                .strip_prefix("Error creating: ")
                .unwrap_or(&message)
                .to_owned(),
        })
}

fn find<K: kube::Resource + Clone>(store: &Store<K>, namespace: &str, name: &str) -> Option<Arc<K>>
where
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    store.get(&reflector::ObjectRef::new(name).within(namespace))
}

/// Whether the target's build Job has completed or failed since the pass that started it.
fn build_finished(target: &Target, seen: &Seen) -> bool {
    target
        .job
        .as_deref()
        .and_then(|name| find(&seen.jobs, &target.namespace, name))
        .is_some_and(|job| {
            job_condition(&job, "Complete").is_some() || job_condition(&job, "Failed").is_some()
        })
}

/// The status of one target from its outcome and what the reflectors hold.
fn status_of(target: &Target, seen: &Seen) -> WorkloadStatus {
    match &target.outcome {
        Outcome::Rejected(message) => WorkloadStatus::Rejected(message.clone()),
        Outcome::BuildRejected(message) => WorkloadStatus::BuildRejected(message.clone()),
        Outcome::BuildFailed(message) => WorkloadStatus::BuildFailed(message.clone()),
        Outcome::NotDeployed(reason) => WorkloadStatus::NotDeployed(reason.clone()),
        Outcome::Building => {
            let job = target
                .job
                .as_deref()
                .and_then(|name| find(&seen.jobs, &target.namespace, name));
            let Some(job) = job else {
                return WorkloadStatus::Deploying;
            };
            if let Some(why) = job_condition(&job, "Failed") {
                return WorkloadStatus::BuildFailed(why);
            }
            if job_condition(&job, "Complete").is_some() {
                return WorkloadStatus::Deploying;
            }
            match job.uid().and_then(|uid| failed_create(&seen.events, &uid)) {
                Some(message) => WorkloadStatus::BuildRejected(message),
                None => WorkloadStatus::Deploying,
            }
        }
        Outcome::Applied => {
            let Some(deployment) = find(&seen.deployments, &target.namespace, &target.deployment)
            else {
                return WorkloadStatus::Deploying;
            };
            deployment_status(&deployment, seen)
        }
    }
}

fn deployment_status(deployment: &Deployment, seen: &Seen) -> WorkloadStatus {
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let status = deployment.status.clone().unwrap_or_default();
    let available = status.available_replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let observed =
        status.observed_generation.unwrap_or(0) >= deployment.metadata.generation.unwrap_or(0);
    if observed && available >= desired && updated >= desired {
        return WorkloadStatus::Running;
    }
    // The newest ReplicaSet of the Deployment: its pods are the ones being created.
    let uid = deployment.uid().unwrap_or_default();
    let newest = seen
        .replica_sets
        .state()
        .into_iter()
        .filter(|rs| {
            rs.owner_references()
                .iter()
                .any(|o| o.uid == uid && o.controller == Some(true))
        })
        .max_by_key(|rs| {
            rs.annotations()
                .get("deployment.kubernetes.io/revision")
                .and_then(|r| r.parse::<u64>().ok())
                .unwrap_or(0)
        });
    let rejected = newest
        .and_then(|rs| rs.uid())
        .and_then(|uid| failed_create(&seen.events, &uid));
    match rejected {
        Some(message) => WorkloadStatus::Degraded {
            available,
            desired,
            message,
        },
        None => WorkloadStatus::Deploying,
    }
}
