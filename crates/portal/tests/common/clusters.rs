//! A test double of the application's clusters port: every attached cluster holds the same
//! fixed objects, which a preview's `scan` hands over in one page. The real cluster path is
//! proven on real API servers in the reconciler's end-to-end tests.

use palisade_app::ports::{ClusterError, Clusters, LabelOutcome, ScanInfo, Visit};
use palisade_policy::Name;
use serde_json::{json, Value};

#[derive(Debug, Default)]
pub struct FixedClusters {
    /// The boundary's namespaces (what `scan` reports).
    pub namespaces: Vec<String>,
    /// The objects stored in them.
    pub objects: Vec<Value>,
}

#[async_trait::async_trait]
impl Clusters for FixedClusters {
    fn check_kubeconfig(&self, _kubeconfig: &str) -> Result<(), ClusterError> {
        Ok(())
    }

    async fn label_namespace(
        &self,
        _kubeconfig: &str,
        _boundary: &Name,
        _namespace: &str,
        _adopt: bool,
    ) -> Result<palisade_app::ports::Labelled, ClusterError> {
        Ok(palisade_app::ports::Labelled {
            outcome: LabelOutcome::Created,
            uid: None,
        })
    }

    async fn release_namespace(
        &self,
        _kubeconfig: &str,
        _boundary: &Name,
        _namespace: &str,
    ) -> Result<(), ClusterError> {
        Ok(())
    }

    async fn remove_installation(
        &self,
        _kubeconfig: &str,
        _installation: &str,
    ) -> Result<Vec<String>, ClusterError> {
        Ok(Vec::new())
    }

    async fn scan(
        &self,
        _kubeconfig: &str,
        _boundary: &Name,
        _page_size: u32,
        visit: Visit<'_>,
    ) -> Result<ScanInfo, ClusterError> {
        visit(&self.objects);
        Ok(ScanInfo {
            namespaces: self.namespaces.clone(),
            listed: self.objects.len() as u64,
            list_time: std::time::Duration::ZERO,
        })
    }
}

/// A Deployment with `replicas` running `image`, labelled `labels` on itself and its pods.
pub fn deployment(namespace: &str, name: &str, replicas: u64, image: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels.clone(), "uid": format!("uid-{name}")},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels.clone()},
            "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": name, "image": image}]}}
        },
        "status": {"replicas": replicas}
    })
}
