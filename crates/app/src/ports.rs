//! The ports the application reaches the outside through, other than the store: clusters.
//! The Kubernetes adapter (`palisade-reconciler`) implements [`Clusters`]; the binary injects
//! it with [`crate::App::with_clusters`].

use std::time::Duration;

use palisade_api_types::view::WorkloadStatus;
use palisade_policy::Name;
use palisade_store::{
    AuditRecord, ClusterRecord, ExceptionInstall, Lease, NamespaceRecord, PolicyRecord,
    ResourceKey, ResourceRecord, StoreError,
};

type StoreResult<T> = Result<T, StoreError>;

/// What labelling a namespace for a boundary did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabelOutcome {
    Created,
    Adopted,
    Unchanged,
}

impl LabelOutcome {
    /// The word of the API's answer: `created`, `adopted` or `unchanged`.
    pub fn as_str(self) -> &'static str {
        match self {
            LabelOutcome::Created => "created",
            LabelOutcome::Adopted => "adopted",
            LabelOutcome::Unchanged => "unchanged",
        }
    }
}

/// A namespace labelled for a boundary: what happened, and the uid of the namespace labelled
/// (SPEC 3.4 v3.2: palisade restores the label on that namespace only).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Labelled {
    pub outcome: LabelOutcome,
    pub uid: Option<String>,
}

/// Why a cluster operation did not happen. The texts name no secret.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterError {
    /// The namespace carries another boundary's label.
    #[error("the namespace is labelled for boundary '{0}'")]
    LabelledForOtherBoundary(String),
    /// The namespace exists without a boundary label and adopting was not asked for.
    #[error("namespace '{0}' exists and is not labelled for the boundary; adopt it to label it")]
    NamespaceExists(String),
    /// The kubeconfig is not one the adapter can use: `<JSON Pointer into it>: <why>`
    /// (the pointer is empty for the whole document).
    #[error("{0}")]
    Kubeconfig(String),
    /// The cluster could not be reached or refused the request (in words).
    #[error("{0}")]
    Failed(String),
}

/// The clusters port: the few cluster operations the use cases make themselves (the
/// reconcile loop does the rest). Each takes the cluster's kubeconfig as stored.
#[async_trait::async_trait]
pub trait Clusters: Send + Sync + std::fmt::Debug {
    /// Checks that the adapter's own loader accepts the kubeconfig (after the shared rules).
    fn check_kubeconfig(&self, kubeconfig: &str) -> Result<(), ClusterError>;

    /// Creates the namespace labelled for `boundary`, or labels it when it exists and
    /// `adopt` is set.
    async fn label_namespace(
        &self,
        kubeconfig: &str,
        boundary: &Name,
        namespace: &str,
        adopt: bool,
    ) -> Result<Labelled, ClusterError>;

    /// Removes the boundary's label from the namespace; the namespace stays.
    async fn release_namespace(
        &self,
        kubeconfig: &str,
        boundary: &Name,
        namespace: &str,
    ) -> Result<(), ClusterError>;

    /// Removes every object of this installation from the cluster; returns their names.
    async fn remove_installation(
        &self,
        kubeconfig: &str,
        installation: &str,
    ) -> Result<Vec<String>, ClusterError>;

    /// Reads what the cluster holds for one workload resource, live: its Deployment, pods,
    /// build Job and their latest events (`cluster` and `namespace` of the answer are left
    /// for the caller to fill).
    async fn workload_detail(
        &self,
        _kubeconfig: &str,
        _target: &WorkloadTarget,
    ) -> Result<palisade_api_types::view::WorkloadDetail, ClusterError> {
        Err(ClusterError::Failed(
            "this cluster adapter does not read workloads".into(),
        ))
    }

    /// Reads every checked object (SPEC 3.1 kinds) in the namespaces labelled for `boundary`,
    /// `page_size` at a time, handing each page to `visit` before the next is read.
    async fn scan(
        &self,
        kubeconfig: &str,
        boundary: &Name,
        page_size: u32,
        visit: Visit<'_>,
    ) -> Result<ScanInfo, ClusterError>;
}

/// Which objects in a cluster are a workload resource's: where they are and their names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadTarget {
    pub namespace: String,
    /// The Deployment palisade renders for it.
    pub deployment: String,
    /// The build Job of its current source, when it is built.
    pub build_job: Option<String>,
    /// The label selector of every object rendered for it (its type and name).
    pub selector: String,
}

/// What reading a boundary's objects in a cluster found and took.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanInfo {
    /// The boundary's namespaces in the cluster (labelled for it), by name.
    pub namespaces: Vec<String>,
    /// Objects read.
    pub listed: u64,
    /// Time spent waiting for the API server.
    pub list_time: Duration,
}

/// A visitor of listed objects, one page at a time.
pub type Visit<'a> = &'a mut (dyn FnMut(&[serde_json::Value]) + Send);

/// No cluster adapter: every operation is refused with the reason.
#[derive(Debug)]
pub struct NoClusters;

const NO_ADAPTER: &str = "palisade runs without a cluster adapter";

#[async_trait::async_trait]
impl Clusters for NoClusters {
    fn check_kubeconfig(&self, _kubeconfig: &str) -> Result<(), ClusterError> {
        Ok(())
    }

    async fn label_namespace(
        &self,
        _kubeconfig: &str,
        _boundary: &Name,
        _namespace: &str,
        _adopt: bool,
    ) -> Result<Labelled, ClusterError> {
        Err(ClusterError::Failed(NO_ADAPTER.into()))
    }

    async fn release_namespace(
        &self,
        _kubeconfig: &str,
        _boundary: &Name,
        _namespace: &str,
    ) -> Result<(), ClusterError> {
        Err(ClusterError::Failed(NO_ADAPTER.into()))
    }

    async fn remove_installation(
        &self,
        _kubeconfig: &str,
        _installation: &str,
    ) -> Result<Vec<String>, ClusterError> {
        Err(ClusterError::Failed(NO_ADAPTER.into()))
    }

    async fn scan(
        &self,
        _kubeconfig: &str,
        _boundary: &Name,
        _page_size: u32,
        _visit: Visit<'_>,
    ) -> Result<ScanInfo, ClusterError> {
        Err(ClusterError::Failed(NO_ADAPTER.into()))
    }
}

/// What the reconciler reads and records of the store, and nothing else: its one door to the
/// stored state besides the desired state the application reads for it (issue 43, item 5).
/// Errors are the store's: the reconciler tells a vanished row (`NotFound`) from an
/// unreachable store.
#[async_trait::async_trait]
pub trait Records: Send + Sync {
    /// The cluster as stored now (`NotFound` once deleted).
    async fn cluster_record(&self, name: &str) -> StoreResult<ClusterRecord>;

    /// The clusters attached to the boundary now.
    async fn clusters_of_boundary(&self, boundary: &str) -> StoreResult<Vec<ClusterRecord>>;

    /// Whether the policy is still stored.
    async fn policy_record(&self, boundary: &str, name: &str) -> StoreResult<PolicyRecord>;

    /// Moves the rollout of version `version` of a policy on (automatic promotion, a pause, the
    /// counters a stage starts from), where it is still as read (`expected`, the record's
    /// `rollout_json`); `PreconditionFailed` when it is not. An `event` goes into the policy's
    /// history.
    async fn record_rollout(
        &self,
        boundary: &str,
        name: &str,
        version: i64,
        expected: Option<&str>,
        rollout: &crate::rollout::StoredRollout,
        event: Option<&str>,
    ) -> StoreResult<()>;

    /// What the cluster's probe found: its version and whether it can enforce.
    async fn record_cluster_probe(
        &self,
        name: &str,
        kubernetes_version: Option<&str>,
        admission_enforced: Option<bool>,
        admission_reason: Option<&str>,
    ) -> StoreResult<()>;

    /// The cluster's last error (`None`: the last pass succeeded).
    async fn record_cluster_error(&self, name: &str, error: Option<&str>) -> StoreResult<()>;

    /// The layout the cluster is in, and why.
    async fn record_cluster_layout(
        &self,
        name: &str,
        layout: &str,
        reason: &str,
    ) -> StoreResult<()>;

    /// API server restarts seen in the cluster since the last reading.
    async fn record_apiserver_restarts(&self, name: &str, count: i64) -> StoreResult<()>;

    /// A repair of something changed in the cluster by someone else.
    async fn record_repair(&self, name: &str, what: &str) -> StoreResult<()>;

    /// The boundary's policies' statuses in the cluster, replaced whole.
    async fn record_policy_statuses(
        &self,
        cluster: &str,
        boundary: &str,
        statuses: Vec<crate::reconcile::PolicyInstall>,
    ) -> StoreResult<()>;

    /// The boundary's policies' statuses in every cluster.
    async fn policy_statuses(
        &self,
        boundary: &str,
    ) -> StoreResult<Vec<crate::reconcile::PolicyInstall>>;

    /// The exceptions installed in the cluster and what their probes found, replaced whole.
    async fn record_exception_installs(
        &self,
        cluster: &str,
        installs: Vec<ExceptionInstall>,
    ) -> StoreResult<()>;

    /// The exceptions last recorded as installed in the cluster.
    async fn exception_installs_in(&self, cluster: &str) -> StoreResult<Vec<ExceptionInstall>>;

    /// A workload's status as Kubernetes decided it; `false` when the resource is gone.
    async fn record_workload_status(
        &self,
        key: &ResourceKey,
        status: &WorkloadStatus,
    ) -> StoreResult<bool>;

    /// The resources placed in the cluster.
    async fn resources_in_cluster(&self, cluster: &str) -> StoreResult<Vec<ResourceRecord>>;

    /// Records the uid of a namespace recorded without one (learnt once from the cluster).
    async fn learn_namespace_uid(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
        uid: &str,
    ) -> StoreResult<bool>;

    /// Marks a namespace of the boundary deleted in the cluster (or made again by someone
    /// else): it reads `gone`, and nothing labels it.
    async fn namespace_gone(&self, boundary: &str, cluster: &str, name: &str) -> StoreResult<bool>;

    /// A namespace of the boundary in the cluster.
    async fn namespace_record(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
    ) -> StoreResult<NamespaceRecord>;

    /// The boundary's audit reports of the cluster, replaced whole.
    async fn record_audit_reports(
        &self,
        cluster: &str,
        boundary: &str,
        reports: Vec<AuditRecord>,
    ) -> StoreResult<()>;

    /// Changes of what the reconciler works from: a counter that moves on every write.
    async fn subscribe_changes(&self) -> StoreResult<tokio::sync::watch::Receiver<u64>>;

    /// This replica's membership of the installation's fleet of reconcilers, when it may
    /// join (see [`Lease`]).
    async fn join_fleet(&self, installation: &str, replica: &str) -> StoreResult<Option<Lease>>;
}
