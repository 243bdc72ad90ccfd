//! What a cluster holds for one workload resource, read live for `describe resource` and the
//! portal's resource page: its Deployment's replicas, its pods, its build Job, and the latest
//! events about them (the `FailedCreate` denials among them). Reads only: `get` on the
//! Deployment and the Job, `list` on pods, ReplicaSets and events (by the object's name), as palisade's role allows.

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Event, Pod};
use kube::api::ListParams;
use kube::Api;
use palisade_api_types::view::{
    BuildState, DeploymentState, EventView, PodState, WorkloadDetail, WORKLOAD_EVENTS,
};
use palisade_app::ports::WorkloadTarget;

use crate::{ClusterClient, ReconcileError};

/// Events listed at most per object.
const EVENTS_READ: u32 = 500;

impl ClusterClient {
    /// The Deployment, pods, build Job and latest events of one workload resource.
    pub async fn workload_detail(
        &self,
        target: &WorkloadTarget,
    ) -> Result<WorkloadDetail, ReconcileError> {
        let client = self.client().clone();
        let namespace = target.namespace.as_str();
        let by_labels = ListParams::default().labels(&target.selector);
        let deployments = Api::<Deployment>::namespaced(client.clone(), namespace);
        let pods = Api::<Pod>::namespaced(client.clone(), namespace);
        let replica_sets = Api::<ReplicaSet>::namespaced(client.clone(), namespace);
        let jobs = Api::<Job>::namespaced(client.clone(), namespace);
        let events = Api::<Event>::namespaced(client, namespace);
        let job = async {
            match &target.build_job {
                Some(name) => jobs.get_opt(name).await,
                None => Ok(None),
            }
        };
        let (deployment, pods, replica_sets, job) = tokio::try_join!(
            deployments.get_opt(&target.deployment),
            pods.list(&by_labels),
            replica_sets.list(&by_labels),
            job,
        )?;
        let mut about: Vec<(String, String)> = Vec::new();
        if deployment.is_some() {
            about.push(("Deployment".into(), target.deployment.clone()));
        }
        for set in &replica_sets.items {
            about.push((
                "ReplicaSet".into(),
                set.metadata.name.clone().unwrap_or_default(),
            ));
        }
        for pod in &pods.items {
            about.push(("Pod".into(), pod.metadata.name.clone().unwrap_or_default()));
        }
        if let Some(name) = &target.build_job {
            about.push(("Job".into(), name.clone()));
        }
        // The events about each object, found by name (a field selector the API server
        // serves for events), so a busy namespace's other events are never read.
        let names: std::collections::BTreeSet<&str> =
            about.iter().map(|(_, name)| name.as_str()).collect();
        let lists = futures::future::try_join_all(names.iter().map(|name| {
            let params = ListParams::default()
                .fields(&format!("involvedObject.name={name}"))
                .limit(EVENTS_READ);
            let events = events.clone();
            async move { events.list(&params).await }
        }))
        .await?;
        let events: Vec<Event> = lists.into_iter().flat_map(|l| l.items).collect();
        let mut pods: Vec<PodState> = pods.items.iter().map(pod_state).collect();
        pods.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(WorkloadDetail {
            cluster: String::new(),
            namespace: namespace.to_owned(),
            deployment: deployment.as_ref().map(deployment_state),
            pods,
            build: job.as_ref().map(build_state),
            events: latest_events(events, &about),
        })
    }
}

fn deployment_state(deployment: &Deployment) -> DeploymentState {
    let status = deployment.status.clone().unwrap_or_default();
    DeploymentState {
        name: deployment.metadata.name.clone().unwrap_or_default(),
        desired: deployment
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .unwrap_or(1),
        ready: status.ready_replicas.unwrap_or(0),
        available: status.available_replicas.unwrap_or(0),
        updated: status.updated_replicas.unwrap_or(0),
    }
}

fn pod_state(pod: &Pod) -> PodState {
    let status = pod.status.clone().unwrap_or_default();
    let containers = status.container_statuses.unwrap_or_default();
    PodState {
        name: pod.metadata.name.clone().unwrap_or_default(),
        phase: status.phase.unwrap_or_else(|| "Unknown".to_owned()),
        ready: !containers.is_empty() && containers.iter().all(|c| c.ready),
        restarts: containers.iter().map(|c| c.restart_count).sum(),
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
    }
}

fn build_state(job: &Job) -> BuildState {
    let status = job.status.clone().unwrap_or_default();
    let condition = |kind: &str| {
        status
            .conditions
            .iter()
            .flatten()
            .find(|c| c.type_ == kind && c.status == "True")
            .cloned()
    };
    let (state, message) = if let Some(failed) = condition("Failed") {
        ("failed", failed.message.or(failed.reason))
    } else if condition("Complete").is_some() || status.succeeded.unwrap_or(0) > 0 {
        ("succeeded", None)
    } else {
        ("running", None)
    };
    BuildState {
        name: job.metadata.name.clone().unwrap_or_default(),
        state: state.to_owned(),
        message,
    }
}

/// The events about `about` (kind, name), newest first, at most [`WORKLOAD_EVENTS`].
fn latest_events(events: Vec<Event>, about: &[(String, String)]) -> Vec<EventView> {
    let mut kept: Vec<(Option<k8s_openapi::jiff::Timestamp>, EventView)> = events
        .into_iter()
        .filter(|e| {
            let object = &e.involved_object;
            about.iter().any(|(kind, name)| {
                object.kind.as_deref() == Some(kind) && object.name.as_deref() == Some(name)
            })
        })
        .map(|e| {
            let at = e
                .last_timestamp
                .as_ref()
                .map(|t| t.0)
                .or_else(|| e.event_time.as_ref().map(|t| t.0))
                .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0));
            let object = &e.involved_object;
            let view = EventView {
                // To the second, as the API server writes `lastTimestamp`.
                time: at.map(|t| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()),
                event_type: e.type_.clone().unwrap_or_else(|| "Normal".to_owned()),
                reason: e.reason.clone().unwrap_or_default(),
                object: format!(
                    "{}/{}",
                    object.kind.as_deref().unwrap_or_default(),
                    object.name.as_deref().unwrap_or_default()
                ),
                message: e.message.clone().unwrap_or_default(),
                count: e.count.unwrap_or(1),
            };
            (at, view)
        })
        .collect();
    kept.sort_by_key(|k| std::cmp::Reverse(k.0));
    kept.into_iter()
        .take(WORKLOAD_EVENTS)
        .map(|(_, view)| view)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ObjectReference;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn event(kind: &str, name: &str, reason: &str, at: &str) -> Event {
        Event {
            involved_object: ObjectReference {
                kind: Some(kind.into()),
                name: Some(name.into()),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            type_: Some("Warning".into()),
            message: Some(format!("{reason} of {name}")),
            last_timestamp: Some(Time(at.parse().unwrap_or_default())),
            ..Event::default()
        }
    }

    #[test]
    fn only_the_workload_s_events_are_kept_newest_first() {
        let about = vec![
            ("Deployment".to_owned(), "app-web".to_owned()),
            ("ReplicaSet".to_owned(), "app-web-1".to_owned()),
        ];
        let events = vec![
            event(
                "ReplicaSet",
                "app-web-1",
                "FailedCreate",
                "2026-12-06T10:00:02Z",
            ),
            event(
                "Deployment",
                "app-api",
                "ScalingReplicaSet",
                "2026-12-06T10:00:03Z",
            ),
            event(
                "Deployment",
                "app-web",
                "ScalingReplicaSet",
                "2026-12-06T10:00:01Z",
            ),
            event("Pod", "app-web-1", "Scheduled", "2026-12-06T10:00:04Z"),
        ];
        let kept = latest_events(events, &about);
        let seen: Vec<(&str, &str)> = kept
            .iter()
            .map(|e| (e.object.as_str(), e.reason.as_str()))
            .collect();
        assert_eq!(
            seen,
            [
                ("ReplicaSet/app-web-1", "FailedCreate"),
                ("Deployment/app-web", "ScalingReplicaSet")
            ]
        );
        assert_eq!(kept[0].message, "FailedCreate of app-web-1");
        assert_eq!(kept[0].event_type, "Warning");
        assert_eq!(kept[0].count, 1);
    }

    #[test]
    fn at_most_twenty_events_are_kept() {
        let about = vec![("Pod".to_owned(), "p".to_owned())];
        let events = (0..30)
            .map(|i| event("Pod", "p", "Pulled", &format!("2026-12-06T10:00:{i:02}Z")))
            .collect();
        let kept = latest_events(events, &about);
        assert_eq!(kept.len(), WORKLOAD_EVENTS);
        assert!(kept[0]
            .time
            .as_deref()
            .is_some_and(|t| t.contains("10:00:29")));
    }
}
