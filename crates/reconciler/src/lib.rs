//! palisade's Kubernetes adapter: installs a policy's rendered `ValidatingAdmissionPolicy` and
//! binding into a cluster with server-side apply (policy first, binding deleted first), and
//! reads what a cluster can enforce (`/version` and discovery). Rendering is
//! `palisade-vap`'s; this crate only talks to API servers.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client};
use palisade_policy::{Name, Policy};
use palisade_vap::render::{object_name, render, FIELD_MANAGER};

/// The oldest minor version whose `admissionregistration.k8s.io/v1` serves
/// ValidatingAdmissionPolicy (GA in 1.30).
pub const OLDEST_MINOR: u32 = 30;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    #[error("the kubeconfig cannot be used: {0}")]
    Kubeconfig(String),
    #[error("the API server refused or failed: {0}")]
    Kube(#[from] kube::Error),
    #[error("the API server reported a version palisade cannot read: {0}")]
    Version(String),
}

pub type Result<T, E = ReconcileError> = std::result::Result<T, E>;

/// Whether admission rules are enforced in a cluster, with the reason when not (SPEC 3.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    Enforced,
    NotEnforced(String),
}

/// What `probe` learnt of a cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterProbe {
    /// `/version`'s `gitVersion`, e.g. `v1.37.2`.
    pub kubernetes_version: String,
    pub admission: Admission,
}

/// A connection to one cluster.
#[derive(Clone)]
pub struct ClusterClient {
    client: Client,
}

impl std::fmt::Debug for ClusterClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterClient")
    }
}

impl ClusterClient {
    /// A client from a kubeconfig's text (inline credentials; checked by the API before it is
    /// stored).
    pub async fn from_kubeconfig(yaml: &str) -> Result<Self> {
        let kubeconfig =
            Kubeconfig::from_yaml(yaml).map_err(|e| ReconcileError::Kubeconfig(e.to_string()))?;
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| ReconcileError::Kubeconfig(e.to_string()))?;
        let client =
            Client::try_from(config).map_err(|e| ReconcileError::Kubeconfig(e.to_string()))?;
        Ok(ClusterClient { client })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The cluster's version and whether it can enforce admission rules: 1.30 or newer, and
    /// serving `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy and its bindings.
    pub async fn probe(&self) -> Result<ClusterProbe> {
        let info = self.client.apiserver_version().await?;
        let minor: u32 = info
            .minor
            .trim_end_matches('+')
            .parse()
            .map_err(|_| ReconcileError::Version(info.git_version.clone()))?;
        let major = info.major.clone();
        let admission = if major == "1" && minor < OLDEST_MINOR {
            Admission::NotEnforced(format!(
                "Kubernetes {major}.{minor} is older than 1.{OLDEST_MINOR}"
            ))
        } else if self.serves_admission_policies().await? {
            Admission::Enforced
        } else {
            Admission::NotEnforced(
                "the API server does not serve admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy"
                    .to_owned(),
            )
        };
        Ok(ClusterProbe {
            kubernetes_version: info.git_version,
            admission,
        })
    }

    async fn serves_admission_policies(&self) -> Result<bool> {
        match self
            .client
            .list_api_group_resources("admissionregistration.k8s.io/v1")
            .await
        {
            Ok(list) => {
                let served = |name: &str| list.resources.iter().any(|r| r.name == name);
                Ok(served("validatingadmissionpolicies")
                    && served("validatingadmissionpolicybindings"))
            }
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(other) => Err(other.into()),
        }
    }

    /// Server-side applies the policy's objects, policy first, then its binding. A policy
    /// without admission rules has no objects: any left from an earlier version are removed.
    pub async fn apply_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
    ) -> Result<()> {
        let Some(rendered) = render(boundary, policy, installation) else {
            return self.delete_policy(boundary, policy.name()).await;
        };
        let name = object_name(boundary, policy.name());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        Api::<ValidatingAdmissionPolicy>::all(self.client.clone())
            .patch(&name, &params, &Patch::Apply(&rendered.policy))
            .await?;
        Api::<ValidatingAdmissionPolicyBinding>::all(self.client.clone())
            .patch(&name, &params, &Patch::Apply(&rendered.binding))
            .await?;
        Ok(())
    }

    /// Deletes a policy's objects, binding first. Objects that are already gone are fine.
    pub async fn delete_policy(&self, boundary: &Name, policy: &Name) -> Result<()> {
        let name = object_name(boundary, policy);
        let gone = |result: std::result::Result<(), kube::Error>| match result {
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            other => other,
        };
        gone(
            Api::<ValidatingAdmissionPolicyBinding>::all(self.client.clone())
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
        )?;
        gone(
            Api::<ValidatingAdmissionPolicy>::all(self.client.clone())
                .delete(&name, &DeleteParams::default())
                .await
                .map(|_| ()),
        )?;
        Ok(())
    }
}
