//! `ClusterClient`: palisade's connection to one cluster. It writes only what `palisade-vap`
//! renders, with server-side apply and one field manager, and deletes only objects that carry
//! palisade's labels for the caller's installation and boundary.

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
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::config::KubeConfigOptions;
use kube::{Api, Client, Resource};
use palisade_policy::{LabelValue, Mode, Name, Policy};
use palisade_vap::per_boundary::held_policies;
use palisade_vap::render::{
    BOUNDARY_LABEL, FIELD_MANAGER, INSTALLATION_LABEL, MANAGED_BY_LABEL, POLICY_LABEL,
};
use palisade_vap::shared::{shared_binding_name, shared_policy_name};
use palisade_vap::Layout;
use palisade_vap::{object_name, render, Rendered};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::answer::{parse_warning_header, AdmissionAnswer};
use crate::cause::{describe, transport};
use crate::kubeconfig::read as read_kubeconfig;
use crate::per_boundary::is_per_boundary;
use crate::probe::{
    parse_minor, too_old, Admission, ClusterProbe, EnforcementProbe, ADMITTED_VIOLATING,
    NOT_SERVED, NOT_WARNED, PROBE_REFUSED,
};
use crate::violating::violating_pod_among;
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
    /// How policies become objects in this cluster.
    layout: Layout,
    /// Installations whose shared objects this client applied (shared layout).
    shared: Arc<Mutex<BTreeSet<String>>>,
    /// Installations whose shared objects this client removed (the other layouts).
    unshared: Arc<Mutex<BTreeSet<String>>>,
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

/// The label selector of one installation's objects in one boundary.
pub(crate) fn boundary_selector(installation: &str, boundary: &Name) -> String {
    format!(
        "{MANAGED_BY_LABEL}=palisade,{INSTALLATION_LABEL}={installation},{BOUNDARY_LABEL}={boundary}"
    )
}

pub(crate) fn is_ours(meta: &ObjectMeta, installation: &str, boundary: &Name) -> bool {
    let Some(labels) = &meta.labels else {
        return false;
    };
    let has = |key: &str, value: &str| labels.get(key).is_some_and(|v| v == value);
    has(MANAGED_BY_LABEL, "palisade")
        && has(INSTALLATION_LABEL, installation)
        && has(BOUNDARY_LABEL, boundary.as_str())
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
            layout: Layout::default(),
            shared: Arc::default(),
            unshared: Arc::default(),
        }
    }

    /// This client with policies written in `layout`.
    pub fn with_layout(mut self, layout: Layout) -> Self {
        self.layout = layout;
        self
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    pub(crate) fn shared_installed(&self, installation: &str) -> bool {
        self.shared
            .lock()
            .is_ok_and(|set| set.contains(installation))
    }

    pub(crate) fn mark_shared_installed(&self, installation: &str) {
        if let Ok(mut set) = self.shared.lock() {
            set.insert(installation.to_owned());
        }
        // Installed again (a switch back to the shared layout): a later switch away removes
        // it again.
        if let Ok(mut set) = self.unshared.lock() {
            set.remove(installation);
        }
    }

    /// Removes the installation's shared policy and bindings once per client (in a layout
    /// other than shared, after a switch from it); later calls do nothing.
    pub async fn remove_shared_once(&self, installation: &str) -> Result<()> {
        check_installation(installation)?;
        let done = self
            .unshared
            .lock()
            .is_ok_and(|set| set.contains(installation));
        if done || self.layout == Layout::Shared {
            return Ok(());
        }
        self.remove_shared(installation).await?;
        if let Ok(mut set) = self.unshared.lock() {
            set.insert(installation.to_owned());
        }
        Ok(())
    }

    pub(crate) fn forget_shared(&self, installation: &str) {
        if let Ok(mut set) = self.shared.lock() {
            set.remove(installation);
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

    pub(crate) async fn apply_rendered(&self, rendered: &Rendered) -> Result<()> {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let name = rendered.policy.metadata.name.clone().unwrap_or_default();
        self.cluster_api::<ValidatingAdmissionPolicy>()
            .patch(&name, &params, &Patch::Apply(&rendered.policy))
            .await?;
        let name = rendered.binding.metadata.name.clone().unwrap_or_default();
        self.cluster_api::<ValidatingAdmissionPolicyBinding>()
            .patch(&name, &params, &Patch::Apply(&rendered.binding))
            .await?;
        Ok(())
    }

    /// Objects of the same name labelled for another installation are never taken over.
    pub(crate) async fn refuse_other_installation(
        &self,
        rendered: &Rendered,
        installation: &str,
    ) -> Result<()> {
        let name = rendered.policy.metadata.name.clone().unwrap_or_default();
        let owner = |meta: &ObjectMeta| {
            meta.labels
                .as_ref()
                .filter(|l| l.get(MANAGED_BY_LABEL).is_some_and(|m| m == "palisade"))
                .and_then(|l| l.get(INSTALLATION_LABEL))
                .filter(|i| i.as_str() != installation)
                .cloned()
        };
        let policy = self
            .cluster_api::<ValidatingAdmissionPolicy>()
            .get_opt(&name)
            .await?;
        let binding = self
            .cluster_api::<ValidatingAdmissionPolicyBinding>()
            .get_opt(&name)
            .await?;
        let other = policy
            .and_then(|p| owner(&p.metadata))
            .or_else(|| binding.and_then(|b| owner(&b.metadata)));
        match other {
            Some(other) => Err(ReconcileError::OtherInstallation {
                name,
                installation: other,
            }),
            None => Ok(()),
        }
    }

    /// Server-side applies the policy's objects, policy first, then its binding. A policy
    /// without admission rules has no objects: any left from an earlier version are removed.
    /// Applying what is already there changes nothing (not even `resourceVersion`). Objects of
    /// the same name that another installation labelled as its own are left alone
    /// ([`ReconcileError::OtherInstallation`]).
    pub async fn apply_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
    ) -> Result<()> {
        check_installation(installation)?;
        match self.layout {
            Layout::Shared => return self.apply_parameters(installation, boundary, policy).await,
            Layout::PerBoundary => {
                return Err(ReconcileError::WholeBoundary(policy.name().to_string()))
            }
            Layout::PerPolicy => {}
        }
        match render(boundary, policy, installation) {
            Some(rendered) => {
                self.refuse_other_installation(&rendered, installation)
                    .await?;
                self.apply_rendered(&rendered).await
            }
            None => {
                self.delete_policy(installation, boundary, policy.name())
                    .await
            }
        }
    }

    /// Writes the admission objects of `boundary`'s `policies` in this cluster (in the order
    /// given). Per policy or shared: each policy as [`Self::apply_policy`] does. Per boundary:
    /// the boundary's objects, one per mode and 5 policies, written together; per-boundary
    /// objects of the boundary that no longer hold anything are deleted. Other objects of the
    /// boundary (policies not given, the other layouts') are left to [`Self::garbage_collect`].
    pub async fn apply_boundary(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Result<()> {
        check_installation(installation)?;
        if self.layout == Layout::PerBoundary {
            return self
                .apply_boundary_objects(installation, boundary, policies)
                .await;
        }
        for policy in policies {
            self.apply_policy(installation, boundary, policy).await?;
        }
        Ok(())
    }

    /// Deletes a policy's objects, binding first. Only objects labelled as palisade's, of this
    /// installation and boundary, are deleted; absent objects are fine. In the per-boundary
    /// layout, an object that also holds other policies stays until the boundary is applied
    /// again without this one.
    pub async fn delete_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Name,
    ) -> Result<()> {
        check_installation(installation)?;
        if self.layout == Layout::PerBoundary {
            self.delete_held_only(installation, boundary, policy)
                .await?;
        }
        self.delete_parameters(installation, boundary, policy)
            .await?;
        let name = object_name(boundary, policy);
        delete_if_ours(
            &self.cluster_api::<ValidatingAdmissionPolicyBinding>(),
            &name,
            installation,
            boundary,
        )
        .await?;
        delete_if_ours(
            &self.cluster_api::<ValidatingAdmissionPolicy>(),
            &name,
            installation,
            boundary,
        )
        .await?;
        Ok(())
    }

    /// Deletes this installation's objects of `boundary` whose policy is not in `keep`
    /// (bindings first), selected by labels; returns the names deleted. A per-boundary object
    /// goes when one of the policies it holds is not in `keep`. Objects of the layouts not in
    /// use (left by an earlier one) all go, and so do switch bindings.
    pub async fn garbage_collect(
        &self,
        installation: &str,
        boundary: &Name,
        keep: &[Name],
    ) -> Result<Vec<String>> {
        self.garbage_collect_keeping(installation, boundary, keep, &[self.layout], false)
            .await
    }

    /// [`Self::garbage_collect`] that keeps the kept policies' objects of every layout in
    /// `layouts` (during a switch: the old layout's and the new one's), and the switch
    /// bindings when `keep_switch`.
    pub async fn garbage_collect_keeping(
        &self,
        installation: &str,
        boundary: &Name,
        keep: &[Name],
        layouts: &[Layout],
        keep_switch: bool,
    ) -> Result<Vec<String>> {
        check_installation(installation)?;
        let keep_parameters = if layouts.contains(&Layout::Shared) {
            keep
        } else {
            &[][..]
        };
        let mut deleted = self
            .collect_parameters(installation, boundary, keep_parameters)
            .await?;
        let params = ListParams::default().labels(&boundary_selector(installation, boundary));
        let kept = |policy: &str| keep.iter().any(|k| k.as_str() == policy);
        let stale = |meta: &ObjectMeta| {
            // The selector already holds; checked again in case a server ignored it.
            if !is_ours(meta, installation, boundary) {
                return false;
            }
            if crate::switch::is_switch(meta) && !keep_switch {
                return true;
            }
            if is_per_boundary(meta) {
                let held = held_policies(meta.annotations.as_ref());
                return !layouts.contains(&Layout::PerBoundary)
                    || held.is_empty()
                    || !held.iter().all(|p| kept(p));
            }
            !layouts.contains(&Layout::PerPolicy)
                || !meta
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(POLICY_LABEL))
                    .is_some_and(|p| kept(p))
        };
        let bindings = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        for binding in bindings.list(&params).await?.items {
            if stale(&binding.metadata) && delete_exact(&bindings, &binding.metadata).await? {
                deleted.push(binding.metadata.name.unwrap_or_default());
            }
        }
        let policies = self.cluster_api::<ValidatingAdmissionPolicy>();
        for policy in policies.list(&params).await?.items {
            if stale(&policy.metadata) && delete_exact(&policies, &policy.metadata).await? {
                let name = policy.metadata.name.unwrap_or_default();
                if !deleted.contains(&name) {
                    deleted.push(name);
                }
            }
        }
        Ok(deleted)
    }

    /// The boundaries this installation has objects of in the cluster (from their labels).
    pub async fn installed_boundaries(
        &self,
        installation: &str,
    ) -> Result<std::collections::BTreeSet<String>> {
        check_installation(installation)?;
        let params = ListParams::default().labels(&format!(
            "{MANAGED_BY_LABEL}=palisade,{INSTALLATION_LABEL}={installation}"
        ));
        let boundary_of = |meta: &ObjectMeta| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(BOUNDARY_LABEL))
                .cloned()
        };
        let mut boundaries = std::collections::BTreeSet::new();
        for binding in self
            .cluster_api::<ValidatingAdmissionPolicyBinding>()
            .list(&params)
            .await?
            .items
        {
            boundaries.extend(boundary_of(&binding.metadata));
        }
        for policy in self
            .cluster_api::<ValidatingAdmissionPolicy>()
            .list(&params)
            .await?
            .items
        {
            boundaries.extend(boundary_of(&policy.metadata));
        }
        boundaries.extend(self.parameter_boundaries(installation).await?);
        Ok(boundaries)
    }

    /// Removes everything this installation put in the cluster: every boundary's policy
    /// objects (bindings first), then the boundary-label guard, and the audit's reports.
    /// Returns the names of the policy objects deleted.
    /// A cluster that does not serve the ValidatingAdmissionPolicy API holds nothing of
    /// palisade's (nothing is written to a cluster that cannot enforce): nothing to remove.
    pub async fn remove_installation(&self, installation: &str) -> Result<Vec<String>> {
        check_installation(installation)?;
        let mut deleted = Vec::new();
        self.remove_reports(installation).await?;
        if !self.serves_admission_policies().await? {
            return Ok(deleted);
        }
        for boundary in self.installed_boundaries(installation).await? {
            let Ok(boundary) = Name::parse(&boundary) else {
                continue;
            };
            deleted.extend(self.garbage_collect(installation, &boundary, &[]).await?);
        }
        deleted.extend(self.remove_shared(installation).await?);
        let name = palisade_vap::guard_name(installation);
        let is_guard = |meta: &ObjectMeta| {
            meta.labels.as_ref().is_some_and(|l| {
                l.get(MANAGED_BY_LABEL).is_some_and(|v| v == "palisade")
                    && l.get(INSTALLATION_LABEL).is_some_and(|v| v == installation)
                    && !l.contains_key(BOUNDARY_LABEL)
            })
        };
        let bindings = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        if let Some(binding) = bindings.get_opt(&name).await? {
            if is_guard(&binding.metadata) {
                delete_exact(&bindings, &binding.metadata).await?;
            }
        }
        let policies = self.cluster_api::<ValidatingAdmissionPolicy>();
        if let Some(policy) = policies.get_opt(&name).await? {
            if is_guard(&policy.metadata) && delete_exact(&policies, &policy.metadata).await? {
                deleted.push(name);
            }
        }
        Ok(deleted)
    }

    /// Removes the boundary label from `namespace` when it carries `boundary`'s (palisade
    /// releases it; the namespace and its objects stay). `false` when there was nothing to
    /// remove.
    pub async fn release_namespace(&self, boundary: &Name, namespace: &str) -> Result<bool> {
        let api = self.cluster_api::<Namespace>();
        let Some(existing) = api.get_opt(namespace).await? else {
            return Ok(false);
        };
        let current = existing
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(BOUNDARY_LABEL));
        match current {
            Some(b) if b == boundary.as_str() => {}
            Some(other) => return Err(ReconcileError::LabelledForOtherBoundary(other.clone())),
            None => return Ok(false),
        }
        let patch = json!({"metadata": {
            "resourceVersion": existing.metadata.resource_version,
            "labels": {BOUNDARY_LABEL: null},
        }});
        api.patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(true)
    }

    /// Puts `boundary`'s label back on `namespace` when someone else removed or changed it (the
    /// store says the namespace is the boundary's; SPEC 3.4: palisade owns that label). Answers
    /// what it found (`None`: the label is right, or the namespace is gone).
    pub async fn restore_boundary_label(
        &self,
        boundary: &Name,
        namespace: &str,
    ) -> Result<Option<LabelTampering>> {
        let api = self.cluster_api::<Namespace>();
        let Some(existing) = api.get_opt(namespace).await? else {
            return Ok(None);
        };
        let tampering = match existing
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(BOUNDARY_LABEL))
        {
            Some(b) if b == boundary.as_str() => return Ok(None),
            Some(other) => LabelTampering::Changed(other.clone()),
            None => LabelTampering::Removed,
        };
        // Conditional on what was read: a namespace changed meanwhile is looked at next pass.
        let patch = json!({"metadata": {
            "resourceVersion": existing.metadata.resource_version,
            "labels": {BOUNDARY_LABEL: boundary.as_str()},
        }});
        api.patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(Some(tampering))
    }

    /// When the API server answering this client started (seconds since the epoch), from its
    /// `/metrics` (`process_start_time_seconds`).
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

    /// Confirms enforcement: a server-side dry-run create of a Pod violating `policy` into
    /// `namespace` (a namespace of the boundary). Enforce mode: `Enforced` when denied with
    /// the policy's message; audit mode: when admitted with its warning.
    pub async fn probe_enforcement(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_enforcement_among(installation, boundary, policy, &[], namespace)
            .await
    }

    /// [`Self::probe_enforcement`] with a probe Pod that also complies with `others` (the
    /// boundary's other policies in this cluster) where possible, so that their denials do
    /// not hide this policy's.
    pub async fn probe_enforcement_among(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_policy(installation, boundary, policy, others, namespace, false)
            .await
    }

    /// [`Self::probe_enforcement_among`] while the cluster changes to this client's layout and
    /// the earlier layout's objects are still there ([`palisade_vap::render::switch_binding`]):
    /// an enforce-mode policy is confirmed in the new layout only when its switch binding
    /// warned; denied with the policy's message without that warning, it is
    /// [`EnforcementProbe::EnforcedByEarlierLayout`].
    pub async fn probe_during_switch(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_policy(installation, boundary, policy, others, namespace, true)
            .await
    }

    async fn probe_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
        switching: bool,
    ) -> Result<EnforcementProbe> {
        check_installation(installation)?;
        let (pod, message) = violating_pod_among(policy, others)
            .ok_or_else(|| ReconcileError::NoAdmissionRules(policy.name().to_string()))?;
        let (name, binding) = match self.layout {
            Layout::PerPolicy => {
                let name = object_name(boundary, policy.name());
                let installed = self
                    .cluster_api::<ValidatingAdmissionPolicy>()
                    .get_opt(&name)
                    .await?;
                if !installed.is_some_and(|p| is_ours(&p.metadata, installation, boundary)) {
                    return Ok(EnforcementProbe::NotEnforced(format!(
                        "palisade's ValidatingAdmissionPolicy '{name}' is not installed"
                    )));
                }
                (name.clone(), name)
            }
            Layout::Shared => {
                if !self
                    .parameters_present(installation, boundary, policy.name(), namespace)
                    .await?
                {
                    return Ok(EnforcementProbe::NotEnforced(format!(
                        "palisade's parameters of policy '{}' are not in namespace '{namespace}'",
                        policy.name()
                    )));
                }
                (
                    shared_policy_name(installation),
                    shared_binding_name(installation, policy.mode()),
                )
            }
            Layout::PerBoundary => {
                match self
                    .object_holding(installation, boundary, policy.name())
                    .await?
                {
                    Some(name) => (name.clone(), name),
                    None => {
                        return Ok(EnforcementProbe::NotEnforced(format!(
                            "no ValidatingAdmissionPolicy of palisade's holding policy '{}' is installed",
                            policy.name()
                        )))
                    }
                }
            }
        };
        let answer = self.dry_run_create(namespace, &pod).await?;
        let switch = palisade_vap::render::switch_binding_name(&binding);
        Ok(match policy.mode() {
            Mode::Enforce if answer.admitted() => {
                EnforcementProbe::NotEnforced(ADMITTED_VIOLATING.to_owned())
            }
            Mode::Enforce if switching && answer.denial_message() == Some(message.as_str()) => {
                if answer.has_warning(&name, &switch, &message) {
                    EnforcementProbe::Enforced
                } else {
                    EnforcementProbe::EnforcedByEarlierLayout
                }
            }
            Mode::Enforce
                if answer.denying_policy() == Some(name.as_str())
                    && answer.denial_message() == Some(message.as_str()) =>
            {
                EnforcementProbe::Enforced
            }
            Mode::Audit if answer.admitted() && answer.has_warning(&name, &binding, &message) => {
                EnforcementProbe::Enforced
            }
            Mode::Audit if answer.admitted() => {
                EnforcementProbe::NotEnforced(NOT_WARNED.to_owned())
            }
            _ => EnforcementProbe::Inconclusive(format!(
                "{PROBE_REFUSED}: {}",
                answer.message.unwrap_or_default()
            )),
        })
    }

    /// Server-side applies the installation's boundary-label guard (SPEC 3.4): only
    /// `palisade_identity` may add, change or remove a namespace's `palisade.dev/boundary`.
    pub async fn install_boundary_label_guard(
        &self,
        installation: &str,
        palisade_identity: &str,
    ) -> Result<()> {
        check_installation(installation)?;
        self.apply_rendered(&palisade_vap::boundary_label_guard(
            installation,
            palisade_identity,
        ))
        .await
    }

    /// Creates `namespace` labelled for `boundary`, or with `adopt` labels an existing,
    /// unlabelled one. A namespace labelled for another boundary is
    /// [`ReconcileError::LabelledForOtherBoundary`]; an existing unlabelled one without
    /// `adopt` is [`ReconcileError::NamespaceExists`].
    pub async fn label_namespace(
        &self,
        boundary: &Name,
        namespace: &str,
        adopt: bool,
    ) -> Result<LabelOutcome> {
        let api = self.cluster_api::<Namespace>();
        // Lost races (created or changed meanwhile) are retried a few times.
        for _ in 0..5 {
            let Some(existing) = api.get_opt(namespace).await? else {
                let object = Namespace {
                    metadata: ObjectMeta {
                        name: Some(namespace.to_owned()),
                        labels: Some(BTreeMap::from([(
                            BOUNDARY_LABEL.to_owned(),
                            boundary.to_string(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                };
                match api.create(&PostParams::default(), &object).await {
                    Ok(_) => return Ok(LabelOutcome::Created),
                    Err(e) if conflict(&e) => continue,
                    Err(e) => return Err(e.into()),
                }
            };
            let current = existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(BOUNDARY_LABEL));
            match current {
                Some(b) if b == boundary.as_str() => return Ok(LabelOutcome::Unchanged),
                Some(other) => return Err(ReconcileError::LabelledForOtherBoundary(other.clone())),
                None if !adopt => {
                    return Err(ReconcileError::NamespaceExists(namespace.to_owned()))
                }
                None => {}
            }
            // resourceVersion makes the merge patch conditional: no label added to a
            // namespace that someone else labelled meanwhile.
            let patch = json!({"metadata": {
                "resourceVersion": existing.metadata.resource_version,
                "labels": {BOUNDARY_LABEL: boundary.as_str()},
            }});
            match api
                .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => return Ok(LabelOutcome::Adopted),
                Err(e) if conflict(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ReconcileError::Unexpected(format!(
            "namespace {namespace} kept changing while it was being labelled"
        )))
    }

    /// The resource name and scope of `kind` in `api_version`, from discovery (cached).
    async fn resource_for(&self, api_version: &str, kind: &str) -> Result<(String, bool)> {
        let cached = self
            .resources
            .lock()
            .map_err(|_| ReconcileError::Unexpected("discovery cache poisoned".to_owned()))?
            .get(api_version)
            .cloned();
        let resources = match cached {
            Some(resources) => resources,
            None => {
                let list = if api_version.contains('/') {
                    self.client.list_api_group_resources(api_version).await
                } else {
                    self.client.list_core_api_resources(api_version).await
                };
                let resources = match list {
                    Ok(list) => list.resources,
                    Err(e) if not_found(&e) => Vec::new(),
                    Err(e) => return Err(e.into()),
                };
                if let Ok(mut cache) = self.resources.lock() {
                    cache.insert(api_version.to_owned(), resources.clone());
                }
                resources
            }
        };
        resources
            .into_iter()
            .find(|r| r.kind == kind && !r.name.contains('/'))
            .map(|r| (r.name, r.namespaced))
            .ok_or_else(|| ReconcileError::UnknownKind(format!("{api_version} {kind}")))
    }

    /// A server-side dry-run (`dryRun=All`) create of `object` (any kind the server serves)
    /// into `namespace` (ignored for cluster-scoped kinds). Refusals are answers, not errors.
    pub async fn dry_run_create(&self, namespace: &str, object: &Value) -> Result<AdmissionAnswer> {
        self.send_create(namespace, object, true).await
    }

    /// Creates `object` for real, like [`ClusterClient::dry_run_create`] (refusals are
    /// answers, not errors).
    pub async fn create(&self, namespace: &str, object: &Value) -> Result<AdmissionAnswer> {
        self.send_create(namespace, object, false).await
    }

    async fn send_create(
        &self,
        namespace: &str,
        object: &Value,
        dry_run: bool,
    ) -> Result<AdmissionAnswer> {
        let field = |name: &str| {
            object
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| ReconcileError::UnknownKind(format!("the object has no {name}")))
        };
        let api_version = field("apiVersion")?;
        let kind = field("kind")?;
        let (plural, namespaced) = self.resource_for(api_version, kind).await?;
        let base = if api_version.contains('/') {
            format!("/apis/{api_version}")
        } else {
            format!("/api/{api_version}")
        };
        let mut object = object.clone();
        let path = if namespaced {
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.insert("namespace".to_owned(), Value::String(namespace.to_owned()));
            }
            format!("{base}/namespaces/{namespace}/{plural}")
        } else {
            format!("{base}/{plural}")
        };
        let params = PostParams {
            dry_run,
            field_manager: None,
        };
        let body = serde_json::to_vec(&object).map_err(ReconcileError::Json)?;
        let request = kube::core::Request::new(path)
            .create(&params, body)
            .map_err(|e| ReconcileError::Kube(kube::Error::BuildRequest(e)))?;
        let response = self
            .client
            .send(request.map(kube::client::Body::from))
            .await?;
        let code = response.status().as_u16();
        let warnings: Vec<String> = response
            .headers()
            .get_all(http::header::WARNING)
            .iter()
            .flat_map(|v| parse_warning_header(&String::from_utf8_lossy(v.as_bytes())))
            .collect();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(ReconcileError::Kube)?
            .to_bytes();
        let (message, reason) = if (200..300).contains(&code) {
            (None, None)
        } else {
            match serde_json::from_slice::<kube::core::Status>(&bytes) {
                Ok(status) => (Some(status.message), Some(status.reason)),
                Err(_) => (Some(String::from_utf8_lossy(&bytes).into_owned()), None),
            }
        };
        Ok(AdmissionAnswer {
            code,
            message,
            reason,
            warnings,
        })
    }
}
