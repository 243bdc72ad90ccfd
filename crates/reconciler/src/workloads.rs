//! Platform workloads in a cluster (SPEC 5): each workload resource placed in the cluster is
//! rendered (`palisade-workload`) and server-side applied with palisade's one field manager;
//! its build, when it is built from a source, runs first as a Job. What the API server
//! answered is kept as the resource's [`Outcome`]; the status watch (`statuses`) turns it,
//! and what the cluster later says about the objects, into the resource's status.
//!
//! A change of replicas alone goes through the `scale` subresource, which the admission rules
//! do not check (SPEC 3.1); an unchanged rendering sends nothing, so a workload that a newer
//! policy forbids is left alone until the user changes it. Objects of resources that are gone
//! (or moved) are deleted, only this installation's, found by label.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PropagationPolicy};
use palisade_app::reconcile::{NamespaceRecord, ResourceKey, ResourceRecord};
use palisade_policy::Catalog;
use palisade_vap::render::FIELD_MANAGER;
use palisade_workload::{self as render, Fetch, Source, Workload, WorkloadConfig};
use serde_json::Value;

use crate::{ClusterClient, ReconcileError};

/// Mints how a build Job fetches an upload: `(boundary, upload id)` → its URL and a
/// short-lived token that opens that upload only.
pub type FetchMinter = Arc<dyn Fn(&str, &str) -> Result<Fetch, String> + Send + Sync>;

/// What the workload half needs besides the cluster: the builder and file-server images, and
/// how build Jobs reach uploads (absent: uploads are not built, and their resources say why).
#[derive(Clone)]
pub struct Workloads {
    pub config: WorkloadConfig,
    pub fetch: Option<FetchMinter>,
}

impl Default for Workloads {
    fn default() -> Self {
        Workloads {
            config: WorkloadConfig::builtin(),
            fetch: None,
        }
    }
}

impl std::fmt::Debug for Workloads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workloads")
            .field("config", &self.config)
            .field("fetch", &self.fetch.is_some())
            .finish()
    }
}

// The labels the renderer puts on every object, by which objects are matched to resources.
use palisade_policy::labels::{
    BOUNDARY_LABEL as BOUNDARY, RESOURCE_LABEL as RESOURCE, RESOURCE_TYPE_LABEL as RESOURCE_TYPE,
};

/// What applying a resource's objects came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The Deployment is applied (or unchanged): its status says the rest.
    Applied,
    /// The build Job exists and has not finished.
    Building,
    /// The API server refused the Deployment: palisade's message.
    Rejected(String),
    /// The API server refused the build Job: palisade's message.
    BuildRejected(String),
    /// The build Job failed: its condition's message.
    BuildFailed(String),
    /// Nothing was sent, or the cluster failed the request: why.
    NotDeployed(String),
}

/// One workload as the status watch follows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub key: ResourceKey,
    pub namespace: String,
    /// The Deployment's name.
    pub deployment: String,
    /// The current build Job's name, for built workloads.
    pub job: Option<String>,
    pub outcome: Outcome,
}

impl Target {
    fn new(key: ResourceKey, namespace: String, outcome: Outcome) -> Self {
        Target {
            key,
            namespace,
            deployment: String::new(),
            job: None,
            outcome,
        }
    }
}

/// The text after ` denied request: ` of an admission refusal.
pub fn denial(message: &str) -> Option<&str> {
    message
        .split_once(" denied request: ")
        .map(|(_, rest)| rest)
}

/// Whether a Job's condition of `kind` is `True`, with its message.
pub(crate) fn job_condition(job: &Job, kind: &str) -> Option<String> {
    job.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind && c.status == "True")
        .map(|c| {
            c.message
                .clone()
                .or_else(|| c.reason.clone())
                .unwrap_or_else(|| kind.to_owned())
        })
}

/// Applies every workload placed in the cluster and deletes the objects of those that are
/// gone. `namespaces` are the namespaces labelled for each boundary attached to the cluster
/// (a workload whose namespace is no longer among them is not deployed). Answers each
/// resource's target for the status watch.
pub async fn sync(
    client: &ClusterClient,
    installation: &str,
    records: &[ResourceRecord],
    namespaces: &BTreeMap<String, Vec<NamespaceRecord>>,
    catalog: &Catalog,
    workloads: &Workloads,
) -> Result<Vec<Target>, ReconcileError> {
    let mut targets = Vec::new();
    for record in records {
        let key = ResourceKey {
            boundary: record.boundary.clone(),
            resource_type: record.resource_type.clone(),
            name: record.name.clone(),
        };
        let (workload, namespace) = match palisade_app::workloads::workload_of(record, installation)
        {
            Ok(found) => found,
            Err(reason) => {
                targets.push(Target::new(
                    key,
                    String::new(),
                    Outcome::NotDeployed(reason),
                ));
                continue;
            }
        };
        let belongs = namespaces
            .get(&record.boundary)
            .map(|list| list.iter().any(|ns| ns.name == namespace));
        if belongs != Some(true) {
            let reason = match belongs {
                None => format!(
                    "the cluster is no longer attached to boundary '{}'",
                    record.boundary
                ),
                Some(_) => format!(
                    "namespace '{namespace}' no longer belongs to boundary '{}' in this cluster",
                    record.boundary
                ),
            };
            targets.push(Target::new(key, namespace, Outcome::NotDeployed(reason)));
            continue;
        }
        targets.push(apply_one(client, key, &workload, catalog, workloads).await?);
    }
    collect_garbage(client, installation, &targets).await?;
    Ok(targets)
}

async fn apply_one(
    client: &ClusterClient,
    key: ResourceKey,
    workload: &Workload,
    catalog: &Catalog,
    workloads: &Workloads,
) -> Result<Target, ReconcileError> {
    let config = &workloads.config;
    let namespace = workload.namespace.clone();
    let mut target = Target::new(key, namespace.clone(), Outcome::Applied);
    target.deployment = render::deployment_name(workload);
    if let Some(job_name) = render::build_job_name(workload, config) {
        target.job = Some(job_name.clone());
        let jobs: Api<Job> = Api::namespaced(client.client().clone(), &namespace);
        let outcome = match jobs.get_opt(&job_name).await? {
            Some(job) if job_condition(&job, "Complete").is_some() => None,
            Some(job) => Some(match job_condition(&job, "Failed") {
                Some(message) => Outcome::BuildFailed(message),
                None => Outcome::Building,
            }),
            None => Some(start_build(client, workload, workloads).await?),
        };
        remove_old_builds(&jobs, workload, &job_name).await?;
        if let Some(outcome) = outcome {
            target.outcome = outcome;
            return Ok(target);
        }
    }
    let rendered = match render::render_deployment(workload, catalog, config) {
        Ok(rendered) => rendered,
        Err(error) => {
            target.outcome = Outcome::NotDeployed(error.to_string());
            return Ok(target);
        }
    };
    target.outcome = apply_deployment(client, workload, &target.deployment, &rendered).await?;
    Ok(target)
}

/// Creates the build Job; a refusal is the outcome, not an error.
async fn start_build(
    client: &ClusterClient,
    workload: &Workload,
    workloads: &Workloads,
) -> Result<Outcome, ReconcileError> {
    let fetch = match &workload.source {
        Some(Source::Upload { id, .. }) => match &workloads.fetch {
            Some(mint) => match mint(&workload.boundary, id) {
                Ok(fetch) => Some(fetch),
                Err(reason) => return Ok(Outcome::NotDeployed(reason)),
            },
            None => {
                return Ok(Outcome::NotDeployed(
                    "uploaded code cannot be built: palisade serve runs without --public-url"
                        .to_owned(),
                ))
            }
        },
        _ => None,
    };
    let job = match render::render_build(workload, &workloads.config, fetch.as_ref()) {
        Ok(Some(job)) => job,
        Ok(None) => return Ok(Outcome::Applied),
        Err(error) => return Ok(Outcome::NotDeployed(error.to_string())),
    };
    let answer = client.create(&workload.namespace, &job).await?;
    if answer.admitted() || answer.code == 409 {
        return Ok(Outcome::Building);
    }
    let message = answer.message.unwrap_or_default();
    match (answer.code, denial(&message)) {
        (_, Some(denied)) => Ok(Outcome::BuildRejected(denied.to_owned())),
        // The object itself is invalid: the resource says so.
        (422, None) => Ok(Outcome::NotDeployed(format!(
            "the build Job was refused: {message}"
        ))),
        // Palisade may not do this here (403), or the cluster failed: the pass fails.
        (code, None) => Err(ReconcileError::Refused { code, message }),
    }
}

/// Deletes the resource's build Jobs other than the current one.
async fn remove_old_builds(
    jobs: &Api<Job>,
    workload: &Workload,
    current: &str,
) -> Result<(), ReconcileError> {
    let selector = format!(
        "{},{RESOURCE_TYPE}={},{RESOURCE}={}",
        render::owned_selector(&workload.installation),
        workload.kind.as_str(),
        workload.name
    );
    for job in jobs.list(&ListParams::default().labels(&selector)).await? {
        let Some(name) = job.metadata.name else {
            continue;
        };
        if name != current {
            delete_ignoring_absent(jobs, &name).await?;
        }
    }
    Ok(())
}

async fn delete_ignoring_absent<K>(api: &Api<K>, name: &str) -> Result<(), ReconcileError>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(error) => Err(error.into()),
    }
}

/// Applies the Deployment unless its rendering is unchanged; a change of replicas alone goes
/// through `scale`.
async fn apply_deployment(
    client: &ClusterClient,
    workload: &Workload,
    name: &str,
    rendered: &Value,
) -> Result<Outcome, ReconcileError> {
    let api: Api<Deployment> = Api::namespaced(client.client().clone(), &workload.namespace);
    if let Some(existing) = api.get_opt(name).await? {
        let existing = serde_json::to_value(&existing).map_err(ReconcileError::Json)?;
        if render::rendering_of(&existing) == render::rendering_of(rendered) {
            let replicas = existing.pointer("/spec/replicas").and_then(Value::as_i64);
            if replicas != Some(i64::from(workload.replicas)) {
                let scale = serde_json::json!({"spec": {"replicas": workload.replicas}});
                api.patch_scale(name, &PatchParams::default(), &Patch::Merge(&scale))
                    .await?;
            }
            return Ok(Outcome::Applied);
        }
    }
    let params = PatchParams::apply(FIELD_MANAGER).force();
    match api.patch(name, &params, &Patch::Apply(rendered)).await {
        Ok(_) => Ok(Outcome::Applied),
        Err(kube::Error::Api(status)) if status.code == 422 => {
            Ok(match denial(&status.message) {
                Some(denied) => Outcome::Rejected(denied.to_owned()),
                // The object itself is invalid: the resource says so.
                None => {
                    Outcome::NotDeployed(format!("the Deployment was refused: {}", status.message))
                }
            })
        }
        // Palisade may not do this here (403), or the cluster failed: the pass fails.
        Err(error) => Err(error.into()),
    }
}

/// Deletes this installation's Deployments and Jobs that belong to no target (resources
/// deleted, moved, or no longer deployable).
async fn collect_garbage(
    client: &ClusterClient,
    installation: &str,
    targets: &[Target],
) -> Result<(), ReconcileError> {
    let wanted: BTreeSet<(String, String, String, String)> = targets
        .iter()
        .filter(|t| !matches!(t.outcome, Outcome::NotDeployed(_)))
        .map(|t| {
            (
                t.namespace.clone(),
                t.key.boundary.clone(),
                t.key.resource_type.clone(),
                t.key.name.clone(),
            )
        })
        .collect();
    let selector = render::owned_selector(installation);
    let owner = |meta: &kube::api::ObjectMeta| -> Option<(String, String, String, String)> {
        let labels = meta.labels.as_ref()?;
        Some((
            meta.namespace.clone()?,
            labels.get(BOUNDARY)?.clone(),
            labels.get(RESOURCE_TYPE)?.clone(),
            labels.get(RESOURCE)?.clone(),
        ))
    };
    let deployments: Api<Deployment> = Api::all(client.client().clone());
    for deployment in deployments
        .list(&ListParams::default().labels(&selector))
        .await?
    {
        let Some(found) = owner(&deployment.metadata) else {
            continue;
        };
        if !wanted.contains(&found) {
            let api: Api<Deployment> = Api::namespaced(client.client().clone(), &found.0);
            if let Some(name) = &deployment.metadata.name {
                tracing::info!(namespace = %found.0, %name, "deleting the Deployment of a resource that is gone");
                delete_ignoring_absent(&api, name).await?;
            }
        }
    }
    let jobs: Api<Job> = Api::all(client.client().clone());
    for job in jobs.list(&ListParams::default().labels(&selector)).await? {
        let Some(found) = owner(&job.metadata) else {
            continue;
        };
        if !wanted.contains(&found) {
            let api: Api<Job> = Api::namespaced(client.client().clone(), &found.0);
            if let Some(name) = &job.metadata.name {
                delete_ignoring_absent(&api, name).await?;
            }
        }
    }
    Ok(())
}
