//! `ClusterClient`: palisade's connection to one cluster. It writes only what `palisade-vap`
//! renders, with server-side apply and one field manager, and deletes only objects that carry
//! palisade's labels for the caller's installation and boundary.

mod create;
mod installed;
mod namespaces;
mod policies;
mod write;

pub(crate) use write::established;

pub(crate) use crate::installed::{is_ours, is_per_boundary, is_switch};
pub use crate::installed::{Installed, Keep};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, ObjectMeta};
use k8s_openapi::ClusterResourceScope;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::KubeConfigOptions;
use kube::{Api, Client, Resource};
use palisade_policy::{LabelValue, Name};
use palisade_vap::render::{BOUNDARY_LABEL, FIELD_MANAGER, INSTALLATION_LABEL, MANAGED_BY_LABEL};

use palisade_vap::Layout;
use palisade_vap::{object_name, Rendered};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::answer::{parse_warning_header, AdmissionAnswer};
use crate::cause::{describe, transport};
use crate::kubeconfig::read as read_kubeconfig;
use crate::probe::{parse_minor, too_old, Admission, ClusterProbe, NOT_SERVED};
use crate::{ReconcileError, Result};

const ADMISSION_GROUP_VERSION: &str = "admissionregistration.k8s.io/v1";

/// How long connecting to an API server may take.
const CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How long one request may wait for an answer.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// What `label_namespace` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelOutcome {
    /// The namespace did not exist; it was created with the boundary label.
    Created,
    /// An existing, unlabelled namespace was labelled (`adopt`).
    Adopted,
    /// The namespace already carried this boundary's label.
    Unchanged,
}

/// A namespace as the cluster has it: its boundary label, uid and resourceVersion.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceSeen {
    pub label: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
}

impl NamespaceSeen {
    /// How its boundary label differs from `boundary`'s, if it does.
    pub fn tampering(&self, boundary: &str) -> Option<LabelTampering> {
        match &self.label {
            Some(b) if b == boundary => None,
            Some(other) => Some(LabelTampering::Changed(other.clone())),
            None => Some(LabelTampering::Removed),
        }
    }
}

/// How a namespace's boundary label was found, when it was not the boundary's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LabelTampering {
    /// Removed.
    Removed,
    /// Set to another boundary's name (the value found).
    Changed(String),
}

impl LabelTampering {
    /// The repair in words, e.g. `namespace web lost its boundary label; restored`.
    pub fn repair(&self, namespace: &str) -> String {
        match self {
            LabelTampering::Removed => {
                format!("namespace {namespace} lost its boundary label; restored")
            }
            LabelTampering::Changed(other) => {
                format!("namespace {namespace}'s boundary label was changed to '{other}'; restored")
            }
        }
    }
}

/// A connection to one cluster.
#[derive(Clone)]
pub struct ClusterClient {
    client: Client,
    /// Discovery of one group-version at a time, for dry-run creates of any kind.
    resources: Arc<Mutex<HashMap<String, Vec<APIResource>>>>,
}

impl fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClusterClient")
    }
}

/// An error's message and, when it has one, its innermost cause in words.
fn with_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let top = error.to_string();
    match error.source() {
        Some(source) => format!("{top}: {}", transport(source)),
        None => top,
    }
}

pub(crate) fn check_installation(installation: &str) -> Result<()> {
    match LabelValue::parse(installation) {
        Ok(_) if !installation.is_empty() => Ok(()),
        _ => Err(ReconcileError::InvalidInstallation(installation.to_owned())),
    }
}

fn not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

fn conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// Whether someone other than palisade holds part of the object's `spec` (status writes
/// aside): server-side apply leaves what another manager added in place.
fn spec_held_by_others(meta: &ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|entry| {
        entry.manager.as_deref() != Some(FIELD_MANAGER)
            && entry.subresource.as_deref().is_none_or(str::is_empty)
            && entry
                .fields_v1
                .as_ref()
                .is_some_and(|fields| fields.0.get("f:spec").is_some())
    })
}

/// Server-side applies `object` (named `name`) as palisade, and makes its `spec` palisade's
/// alone: where someone else holds part of it (say, a validation action or a match condition
/// added beside palisade's, which an apply keeps, or which makes the apply itself invalid),
/// the spec is replaced with palisade's and applied again. The object as the API server
/// returned it.
pub(crate) async fn apply_owned<K>(
    api: &Api<K>,
    name: &str,
    object: &(impl serde::Serialize + fmt::Debug),
) -> Result<K>
where
    K: Resource + Clone + DeserializeOwned + serde::Serialize + fmt::Debug,
{
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let applied = match api.patch(name, &params, &Patch::Apply(object)).await {
        Ok(applied) if !spec_held_by_others(applied.meta()) => return Ok(applied),
        Ok(applied) => applied,
        // Invalid as merged with someone else's fields (e.g. `Deny` beside their `Warn`).
        Err(kube::Error::Api(status)) if status.code == 422 => match api.get_opt(name).await? {
            Some(live) if spec_held_by_others(live.meta()) => live,
            _ => return Err(kube::Error::Api(status).into()),
        },
        Err(other) => return Err(other.into()),
    };
    let mut replaced = serde_json::to_value(&applied).map_err(crate::ReconcileError::Json)?;
    let wanted = serde_json::to_value(object).map_err(crate::ReconcileError::Json)?;
    replaced["spec"] = wanted["spec"].clone();
    let replaced: K = serde_json::from_value(replaced).map_err(crate::ReconcileError::Json)?;
    let put = PostParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PostParams::default()
    };
    api.replace(name, &put, &replaced).await?;
    tracing::info!(name, "spec taken back from another field manager");
    Ok(api.patch(name, &params, &Patch::Apply(object)).await?)
}

/// The label selector of one installation's objects in one boundary.
pub(crate) fn boundary_selector(installation: &str, boundary: &Name) -> String {
    format!(
        "{MANAGED_BY_LABEL}=palisade,{INSTALLATION_LABEL}={installation},{BOUNDARY_LABEL}={boundary}"
    )
}

/// Deletes `meta`'s object (exactly that one: its uid is a precondition). Gone already, or
/// replaced meanwhile, is fine.
pub(crate) async fn delete_exact<K>(api: &Api<K>, meta: &ObjectMeta) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    let Some(name) = &meta.name else {
        return Ok(false);
    };
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: meta.uid.clone(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    crate::deletions::deleting(meta.uid.as_deref());
    match api.delete(name, &params).await {
        Ok(_) => {
            tracing::info!(
                kind = K::kind(&Default::default()).as_ref(),
                name,
                "deleted"
            );
            Ok(true)
        }
        Err(e) if not_found(&e) || conflict(&e) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Deletes the object `name` when it is palisade's for `installation` and `boundary`.
async fn delete_if_ours<K>(
    api: &Api<K>,
    name: &str,
    installation: &str,
    boundary: &Name,
) -> Result<bool>
where
    K: Resource + Clone + DeserializeOwned + fmt::Debug,
    <K as Resource>::DynamicType: Default,
{
    match api.get_opt(name).await? {
        Some(object) if is_ours(object.meta(), installation, boundary) => {
            delete_exact(api, object.meta()).await
        }
        Some(_) => {
            tracing::warn!(
                name,
                installation,
                %boundary,
                "not deleted: the object is not labelled as this installation's"
            );
            Ok(false)
        }
        None => Ok(false),
    }
}

impl ClusterClient {
    /// A client from a kubeconfig's text. Only inline credentials are accepted (SPEC 4.1):
    /// one cluster, user and context, an `https` server, no file paths, programs or proxies.
    pub async fn from_kubeconfig(yaml: &str) -> Result<Self> {
        let mut kubeconfig =
            read_kubeconfig(yaml).map_err(|e| ReconcileError::Kubeconfig(e.to_string()))?;
        // One context is allowed; without `current-context` it is the one meant.
        if kubeconfig.current_context.is_none() && kubeconfig.contexts.len() == 1 {
            kubeconfig.current_context = kubeconfig.contexts.first().map(|c| c.name.clone());
        }
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| ReconcileError::Kubeconfig(with_cause(&e)))?;
        // An unreachable cluster fails fast instead of holding up a pass.
        config.connect_timeout = Some(CONNECT_TIMEOUT);
        config.read_timeout = Some(READ_TIMEOUT);
        config.write_timeout = Some(READ_TIMEOUT);
        let client =
            Client::try_from(config).map_err(|e| ReconcileError::Kubeconfig(describe(&e)))?;
        Ok(ClusterClient::from_client(client))
    }

    /// Wraps a client made elsewhere (tests: impersonation).
    pub fn from_client(client: Client) -> Self {
        ClusterClient {
            client,
            resources: Arc::default(),
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    pub(crate) fn cluster_api<K>(&self) -> Api<K>
    where
        K: Resource<Scope = ClusterResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::all(self.client.clone())
    }

    /// The cluster's version and whether it can enforce admission rules: 1.30 or newer, and
    /// serving `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy and its bindings.
    pub async fn probe(&self) -> Result<ClusterProbe> {
        let info = self.client.apiserver_version().await?;
        let minor = parse_minor(&info.minor)
            .ok_or_else(|| ReconcileError::Version(info.git_version.clone()))?;
        let admission = if let Some(reason) = too_old(&info.major, minor) {
            Admission::NotEnforced(reason)
        } else if self.serves_admission_policies().await? {
            Admission::Enforced
        } else {
            Admission::NotEnforced(NOT_SERVED.to_owned())
        };
        Ok(ClusterProbe {
            kubernetes_version: info.git_version,
            minor,
            admission,
        })
    }

    async fn serves_admission_policies(&self) -> Result<bool> {
        match self
            .client
            .list_api_group_resources(ADMISSION_GROUP_VERSION)
            .await
        {
            Ok(list) => {
                let served = |name: &str| list.resources.iter().any(|r| r.name == name);
                Ok(served("validatingadmissionpolicies")
                    && served("validatingadmissionpolicybindings"))
            }
            Err(e) if not_found(&e) => Ok(false),
            Err(other) => Err(other.into()),
        }
    }

    /// The user name this client acts as (a `SelfSubjectReview`, authentication.k8s.io/v1).
    pub async fn whoami(&self) -> Result<String> {
        let review = self
            .cluster_api::<SelfSubjectReview>()
            .create(&PostParams::default(), &SelfSubjectReview::default())
            .await?;
        review
            .status
            .and_then(|s| s.user_info)
            .and_then(|u| u.username)
            .ok_or_else(|| {
                ReconcileError::Unexpected("the SelfSubjectReview named no user".to_owned())
            })
    }

    /// When the API server answering this client started (seconds since the epoch), from its
    /// `/metrics` (`process_start_time_seconds`; about 2 MB, read only when there is a reason:
    /// `restarts`).
    pub async fn apiserver_started_at(&self) -> Result<f64> {
        let request = http::Request::get(crate::rbac::METRICS_PATH)
            .body(Vec::new())
            .map_err(|e| ReconcileError::Unexpected(e.to_string()))?;
        let text = self.client.request_text(request).await?;
        text.lines()
            .find_map(|line| line.strip_prefix("process_start_time_seconds "))
            .and_then(|value| value.trim().parse::<f64>().ok())
            .ok_or_else(|| {
                ReconcileError::Unexpected(
                    "the API server's /metrics has no process_start_time_seconds".to_owned(),
                )
            })
    }

    /// The denials the API server answering this client counted for each of `bindings` (its
    /// `/metrics`, about 2 MB: read when a stage of a rollout starts and when it is due).
    pub async fn denials(&self, bindings: &[String]) -> Result<Vec<u64>> {
        let request = http::Request::get(crate::rbac::METRICS_PATH)
            .body(Vec::new())
            .map_err(|e| ReconcileError::Unexpected(e.to_string()))?;
        let text = self.client.request_text(request).await?;
        Ok(bindings
            .iter()
            .map(|b| crate::denials::denials(&text, b))
            .collect())
    }

    /// The identities of the cluster's API servers: the `holderIdentity` of each API server's
    /// identity Lease (`kube-system`, label `apiserver.kubernetes.io/identity=kube-apiserver`),
    /// which an API server makes anew (a new UUID) each time it starts. About 1.7 KB a read
    /// for one API server, where its `/metrics` is about 2 MB.
    pub async fn apiserver_identities(&self) -> Result<BTreeSet<String>> {
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(self.client.clone(), crate::restarts::IDENTITY_NAMESPACE);
        let list = leases
            .list(&kube::api::ListParams::default().labels(crate::restarts::IDENTITY_SELECTOR))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter_map(|lease| lease.spec.and_then(|spec| spec.holder_identity))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    fn entry(manager: &str, subresource: Option<&str>, fields: Value) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.to_owned()),
            subresource: subresource.map(str::to_owned),
            fields_v1: Some(FieldsV1(fields)),
            ..ManagedFieldsEntry::default()
        }
    }

    #[test]
    fn the_spec_is_held_by_others_only_where_another_manager_owns_part_of_it() {
        let spec = json!({"f:spec": {"f:validationActions": {}}});
        let labels = json!({"f:metadata": {"f:labels": {"f:team": {}}}});
        let cases = [
            (vec![entry("palisade", None, spec.clone())], false),
            (
                vec![
                    entry("palisade", None, spec.clone()),
                    entry("kubectl-patch", None, spec.clone()),
                ],
                true,
            ),
            // A label someone added is theirs to keep.
            (
                vec![
                    entry("palisade", None, spec.clone()),
                    entry("kubectl-label", None, labels),
                ],
                false,
            ),
            // The API server's status writes are not the spec.
            (
                vec![
                    entry("palisade", None, spec.clone()),
                    entry("kube-apiserver", Some("status"), json!({"f:status": {}})),
                ],
                false,
            ),
        ];
        for (entries, held) in cases {
            let meta = ObjectMeta {
                managed_fields: Some(entries.clone()),
                ..ObjectMeta::default()
            };
            assert_eq!(spec_held_by_others(&meta), held, "{entries:?}");
        }
    }
}
