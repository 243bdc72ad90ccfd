//! The application's clusters port, implemented with [`ClusterClient`]: what the use cases
//! ask of a cluster themselves (namespaces, removing an installation, the loader's own check
//! of a kubeconfig). The binary injects [`KubeClusters`] into the application.

use palisade_app::ports::{
    ClusterError, Clusters, LabelOutcome as Outcome, Labelled, ScanInfo, Visit, WorkloadTarget,
};
use palisade_policy::Name;

use crate::{ClusterClient, LabelOutcome, ReconcileError};

/// Clusters reached with kube-rs.
#[derive(Debug, Default)]
pub struct KubeClusters;

fn failed(error: ReconcileError) -> ClusterError {
    match error {
        ReconcileError::LabelledForOtherBoundary(other) => {
            ClusterError::LabelledForOtherBoundary(other)
        }
        ReconcileError::NamespaceExists(namespace) => ClusterError::NamespaceExists(namespace),
        ReconcileError::Kubeconfig(why) => ClusterError::Kubeconfig(why),
        other => ClusterError::Failed(other.to_string()),
    }
}

async fn client(kubeconfig: &str) -> Result<ClusterClient, ClusterError> {
    ClusterClient::from_kubeconfig(kubeconfig)
        .await
        .map_err(failed)
}

#[async_trait::async_trait]
impl Clusters for KubeClusters {
    fn check_kubeconfig(&self, kubeconfig: &str) -> Result<(), ClusterError> {
        crate::kubeconfig::read(kubeconfig)
            .map(|_| ())
            .map_err(|e| ClusterError::Kubeconfig(e.to_string()))
    }

    async fn label_namespace(
        &self,
        kubeconfig: &str,
        boundary: &Name,
        namespace: &str,
        adopt: bool,
    ) -> Result<Labelled, ClusterError> {
        let (outcome, uid) = client(kubeconfig)
            .await?
            .label_namespace_with_uid(boundary, namespace, adopt)
            .await
            .map_err(failed)?;
        let outcome = match outcome {
            LabelOutcome::Created => Outcome::Created,
            LabelOutcome::Adopted => Outcome::Adopted,
            LabelOutcome::Unchanged => Outcome::Unchanged,
        };
        Ok(Labelled { outcome, uid })
    }

    async fn release_namespace(
        &self,
        kubeconfig: &str,
        boundary: &Name,
        namespace: &str,
    ) -> Result<(), ClusterError> {
        client(kubeconfig)
            .await?
            .release_namespace(boundary, namespace)
            .await
            .map(|_| ())
            .map_err(failed)
    }

    async fn remove_installation(
        &self,
        kubeconfig: &str,
        installation: &str,
    ) -> Result<Vec<String>, ClusterError> {
        client(kubeconfig)
            .await?
            .remove_installation(installation)
            .await
            .map_err(failed)
    }

    async fn workload_detail(
        &self,
        kubeconfig: &str,
        target: &WorkloadTarget,
    ) -> Result<palisade_api_types::view::WorkloadDetail, ClusterError> {
        client(kubeconfig)
            .await?
            .workload_detail(target)
            .await
            .map_err(failed)
    }

    async fn scan(
        &self,
        kubeconfig: &str,
        boundary: &Name,
        page_size: u32,
        visit: Visit<'_>,
    ) -> Result<ScanInfo, ClusterError> {
        let scanned = client(kubeconfig)
            .await?
            .scan_boundary(boundary, page_size, visit)
            .await
            .map_err(failed)?;
        Ok(ScanInfo {
            namespaces: scanned.namespaces,
            listed: scanned.listed,
            list_time: scanned.list_time,
        })
    }
}
