//! What the reconciler reads and records, through the application (issue 24: the application
//! is its only door to the store). The reconciler is built from an [`App`] and holds no store:
//! the desired state is read and decoded here (through the same policy cache as the API's plan
//! guard, so a policy decodes one way), credentials are opened here, and every status it
//! records goes through these methods.
//!
//! Errors stay the store's ([`StoreError`]): the reconciler tells a vanished row (`NotFound`:
//! deleted while a pass ran) from an unreachable store, and says which in its statuses.

use std::collections::{BTreeMap, BTreeSet};

use palisade_api_types::view::{InstallStatus, WorkloadStatus};
use palisade_policy::rollout::Phase;
use palisade_policy::{Exception, Name, Policy};
pub use palisade_store::{
    now, AuditRecord, BoundaryRecord, ClusterRecord, ExceptionInstall, Fence, Lease, Lost,
    NamespaceRecord, PolicyRecord, PolicyStatusRecord, ResourceKey, ResourceRecord, StoreError,
    LEASE_CONFIRM_INTERVAL, LEASE_LIFETIME, LEASE_QUERY_TIMEOUT,
};

use crate::ports::Records;
use crate::App;

type Result<T> = std::result::Result<T, StoreError>;

/// A policy's status in a cluster, typed as the reconciler decided it. The store keeps it as
/// text, through one codec ([`InstallStatus`]'s `Display` and `FromStr`); a row that does not
/// read back is `error: unreadable status '<text>'`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyInstall {
    pub boundary: String,
    pub policy: String,
    pub cluster: String,
    pub policy_etag: String,
    pub status: InstallStatus,
    pub updated_at: String,
}

impl PolicyInstall {
    /// The status a stored row holds.
    pub fn from_row(row: PolicyStatusRecord) -> Self {
        PolicyInstall {
            status: read_status(&row.status),
            boundary: row.boundary,
            policy: row.policy,
            cluster: row.cluster,
            policy_etag: row.policy_etag,
            updated_at: row.updated_at,
        }
    }

    /// The row the store keeps.
    pub fn into_row(self) -> PolicyStatusRecord {
        PolicyStatusRecord {
            boundary: self.boundary,
            policy: self.policy,
            cluster: self.cluster,
            policy_etag: self.policy_etag,
            status: self.status.to_string(),
            updated_at: self.updated_at,
        }
    }
}

/// A stored status's text read back (the other half of the codec).
pub(crate) fn read_status(text: &str) -> InstallStatus {
    text.parse()
        .unwrap_or_else(|_| InstallStatus::Error(format!("unreadable status '{text}'")))
}

/// Everything a pass works from, read at one moment.
#[derive(Debug)]
pub struct DesiredState {
    pub clusters: Vec<ClusterRecord>,
    pub boundaries: Vec<BoundaryState>,
}

/// One boundary as a pass sees it.
#[derive(Debug)]
pub struct BoundaryState {
    pub name: Name,
    /// Every stored policy, decoded (or why it cannot be).
    pub policies: Vec<(PolicyRecord, std::result::Result<Policy, String>)>,
    /// The clusters attached to it, by name.
    pub clusters: BTreeSet<String>,
    pub namespaces: Vec<NamespaceRecord>,
    /// The approved exceptions to admission rules in force when the state was read (SPEC 7).
    pub exceptions: Vec<Exception>,
    /// The sequence number of the boundary's latest policy, exception or resource write: the
    /// reconciler's sign that the workloads it placed in its clusters changed.
    pub last_change: i64,
    /// The policies being rolled out (SPEC 8), by name: each one's decoded policy above is the
    /// version being rolled out.
    pub rollouts: BTreeMap<String, Rolling>,
}

/// A policy being rolled out (SPEC 8; running or paused), as the clusters need it: where its
/// stage has reached, the version being rolled out applies in its mode; elsewhere `previous`
/// applies exactly as before and the new version audits. Its stages are the decoded policy's
/// `rollout()`.
#[derive(Clone, Debug, PartialEq)]
pub struct Rolling {
    /// The version being rolled out.
    pub version: u64,
    /// The version in force before (the last that reached everywhere); `None` for a new
    /// policy, which only audits where its stage has not reached.
    pub previous: Option<Policy>,
    /// The stage in force, from 0.
    pub stage: usize,
    /// The rollout as stored (its progress, its counters).
    pub stored: crate::rollout::StoredRollout,
}

/// What a pass installs of a stored policy, given its rollout: the policy (or why it cannot be
/// decoded) and, while a rollout runs or is paused, the rollout. An aborted rollout puts the
/// version it ran over back (`None`: a new policy, aborted, has nothing installed).
fn in_force(
    record: &PolicyRecord,
    decoded: std::result::Result<Policy, String>,
    decode: &dyn Fn(&str) -> std::result::Result<Policy, String>,
) -> Option<(std::result::Result<Policy, String>, Option<Rolling>)> {
    let Some(stored) = crate::rollout::StoredRollout::of(record) else {
        return Some((decoded, None));
    };
    let previous = || {
        match &stored.previous_spec {
        None => Ok(None),
        Some(spec) => decode(spec).map(Some).map_err(|why| {
            format!(
                "the version in force before this one's rollout (version {}) cannot be decoded: {why}",
                stored.progress.previous_version.unwrap_or_default()
            )
        }),
    }
    };
    match &stored.progress.phase {
        Phase::Done => Some((decoded, None)),
        Phase::Aborted => match previous() {
            Ok(None) => None,
            Ok(Some(previous)) => Some((Ok(previous), None)),
            Err(why) => Some((Err(why), None)),
        },
        Phase::Running | Phase::Paused(_) => match (decoded, previous()) {
            (Err(why), _) | (_, Err(why)) => Some((Err(why), None)),
            (Ok(policy), Ok(previous)) => {
                let rolling = policy.rollout().is_some().then_some(Rolling {
                    version: stored.progress.version,
                    previous,
                    stage: stored.progress.stage,
                    stored: stored.clone(),
                });
                Some((Ok(policy), rolling))
            }
        },
    }
}

impl BoundaryState {
    /// A copy without the namespaces of `cluster` that `gone` names as `(boundary, namespace)`.
    pub fn without_namespaces(
        &self,
        cluster: &str,
        gone: &BTreeSet<(String, String)>,
    ) -> BoundaryState {
        BoundaryState {
            name: self.name.clone(),
            policies: self.policies.clone(),
            clusters: self.clusters.clone(),
            namespaces: self
                .namespaces
                .iter()
                .filter(|n| {
                    n.cluster != cluster || !gone.contains(&(self.name.to_string(), n.name.clone()))
                })
                .cloned()
                .collect(),
            exceptions: self.exceptions.clone(),
            last_change: self.last_change,
            rollouts: self.rollouts.clone(),
        }
    }

    /// The boundary's namespaces in `cluster`.
    pub fn namespaces_in<'a>(
        &'a self,
        cluster: &str,
    ) -> impl Iterator<Item = &'a NamespaceRecord> + use<'a> {
        let cluster = cluster.to_owned();
        self.namespaces.iter().filter(move |n| n.cluster == cluster)
    }

    /// The exceptions in force in `cluster`.
    pub fn exceptions_in(&self, cluster: &str) -> Vec<Exception> {
        self.exceptions
            .iter()
            .filter(|x| x.in_cluster(cluster))
            .cloned()
            .collect()
    }
}

impl App {
    /// The clusters and every boundary with its policies (decoded through the application's
    /// policy cache), clusters, namespaces and exceptions in force, as they were at one moment
    /// (the store's snapshot).
    pub async fn desired_state(&self) -> Result<DesiredState> {
        // One read transaction, six statements, whatever the number of boundaries.
        let snapshot = self.store.snapshot().await?;
        let mut boundaries = Vec::with_capacity(snapshot.boundaries.len());
        for b in snapshot.boundaries {
            let Ok(name) = Name::parse(&b.boundary.name) else {
                tracing::warn!(boundary = %b.boundary.name, "skipped: not a valid boundary name");
                continue;
            };
            let mut policies = Vec::with_capacity(b.policies.len());
            let mut rollouts = BTreeMap::new();
            for record in b.policies {
                let decoded = self.policies.decode_or_why(&record, &self.catalog);
                let decode =
                    |spec: &str| crate::plans::decode_spec(&record.name, spec, &self.catalog);
                let Some((decoded, rolling)) = in_force(&record, decoded, &decode) else {
                    continue;
                };
                if let Some(rolling) = rolling {
                    rollouts.insert(record.name.clone(), rolling);
                }
                policies.push((record, decoded));
            }
            boundaries.push(BoundaryState {
                name,
                policies,
                clusters: b.clusters.into_iter().collect(),
                // A namespace found gone is no longer the boundary's (SPEC 3.4 v3.2).
                namespaces: b
                    .namespaces
                    .into_iter()
                    .filter(|n| n.gone_at.is_none())
                    .collect(),
                exceptions: crate::exceptions::in_force(&b.exceptions),
                last_change: b.last_change,
                rollouts,
            });
        }
        Ok(DesiredState {
            clusters: snapshot.clusters,
            boundaries,
        })
    }

    /// The plain kubeconfig of `cluster`, opened with the server's key.
    pub fn cluster_kubeconfig(
        &self,
        cluster: &ClusterRecord,
    ) -> std::result::Result<String, String> {
        let plain = self
            .sealing
            .open(&cluster.kubeconfig_sealed)
            .map_err(|e| e.to_string())?;
        String::from_utf8(plain).map_err(|_| "the kubeconfig is not UTF-8".to_owned())
    }

    /// What the reconciler reads and records of the store (the port it is given; the
    /// application's use cases keep the rest).
    pub fn records(&self) -> std::sync::Arc<dyn Records> {
        std::sync::Arc::new(StoreRecords {
            store: self.store.clone(),
            live: self.live.clone(),
        })
    }
}

/// [`Records`] on the store: each method one store operation.
struct StoreRecords {
    store: palisade_store::SharedStore,
    live: std::sync::Arc<crate::live::WorkloadChanges>,
}

/// Who moves a rollout on by itself, in the policy's history.
pub const ROLLOUT_ACTOR: &str = "palisade (automatic promotion)";

#[async_trait::async_trait]
impl Records for StoreRecords {
    /// The cluster as stored now (`NotFound` once deleted).
    async fn cluster_record(&self, name: &str) -> Result<ClusterRecord> {
        self.store.get_cluster(name).await
    }

    /// The clusters attached to the boundary now.
    async fn clusters_of_boundary(&self, boundary: &str) -> Result<Vec<ClusterRecord>> {
        self.store.boundary_clusters(boundary).await
    }

    /// Whether the policy is still stored.
    async fn policy_record(&self, boundary: &str, name: &str) -> Result<PolicyRecord> {
        self.store.get_policy(boundary, name).await
    }

    async fn record_rollout(
        &self,
        boundary: &str,
        name: &str,
        version: i64,
        expected: Option<&str>,
        rollout: &crate::rollout::StoredRollout,
        event: Option<&str>,
    ) -> Result<()> {
        let text = rollout.encode();
        self.store
            .set_policy_rollout(
                boundary,
                name,
                palisade_store::RolloutMove {
                    version,
                    expected,
                    rollout_json: Some(&text),
                    event,
                    actor: ROLLOUT_ACTOR,
                },
            )
            .await
            .map(|_| ())
    }

    /// What the cluster's probe found: its version and whether it can enforce.
    async fn record_cluster_probe(
        &self,
        name: &str,
        kubernetes_version: Option<&str>,
        admission_enforced: Option<bool>,
        admission_reason: Option<&str>,
    ) -> Result<()> {
        self.store
            .set_cluster_status(
                name,
                kubernetes_version,
                admission_enforced,
                admission_reason,
            )
            .await
    }

    /// The cluster's last error (`None`: the last pass succeeded).
    async fn record_cluster_error(&self, name: &str, error: Option<&str>) -> Result<()> {
        self.store.set_cluster_error(name, error).await
    }

    /// The layout the cluster is in, and why.
    async fn record_cluster_layout(&self, name: &str, layout: &str, reason: &str) -> Result<()> {
        self.store.set_cluster_layout(name, layout, reason).await
    }

    /// API server restarts seen in the cluster since the last reading.
    async fn record_apiserver_restarts(&self, name: &str, count: i64) -> Result<()> {
        self.store.add_apiserver_restarts(name, count).await
    }

    /// A repair of something changed in the cluster by someone else.
    async fn record_repair(&self, name: &str, what: &str) -> Result<()> {
        self.store.record_repair(name, what).await
    }

    /// The boundary's policies' statuses in the cluster, replaced whole.
    async fn record_policy_statuses(
        &self,
        cluster: &str,
        boundary: &str,
        statuses: Vec<PolicyInstall>,
    ) -> Result<()> {
        let rows = statuses.into_iter().map(PolicyInstall::into_row).collect();
        self.store
            .replace_policy_statuses(cluster, boundary, rows)
            .await
    }

    /// The boundary's policies' statuses in every cluster.
    async fn policy_statuses(&self, boundary: &str) -> Result<Vec<PolicyInstall>> {
        let rows = self.store.policy_statuses(boundary).await?;
        Ok(rows.into_iter().map(PolicyInstall::from_row).collect())
    }

    /// The exceptions installed in the cluster and what their probes found, replaced whole.
    async fn record_exception_installs(
        &self,
        cluster: &str,
        installs: Vec<ExceptionInstall>,
    ) -> Result<()> {
        self.store
            .replace_exception_installs(cluster, installs)
            .await
    }

    /// The exceptions last recorded as installed in the cluster.
    async fn exception_installs_in(&self, cluster: &str) -> Result<Vec<ExceptionInstall>> {
        self.store.exception_installs_in(cluster).await
    }

    /// A workload's status as Kubernetes decided it; `false` when the resource is gone.
    async fn record_workload_status(
        &self,
        key: &ResourceKey,
        status: &WorkloadStatus,
    ) -> Result<bool> {
        let written = self
            .store
            .set_resource_status(key, &status.to_string())
            .await?;
        if written {
            self.live.moved();
        }
        Ok(written)
    }

    /// The resources placed in the cluster.
    async fn resources_in_cluster(&self, cluster: &str) -> Result<Vec<ResourceRecord>> {
        self.store.resources_in_cluster(cluster).await
    }

    /// Records the uid of a namespace recorded without one (learnt once from the cluster).
    async fn learn_namespace_uid(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
        uid: &str,
    ) -> Result<bool> {
        self.store
            .learn_namespace_uid(boundary, cluster, name, uid)
            .await
    }

    /// Marks a namespace of the boundary deleted in the cluster (or made again by someone
    /// else): it reads `gone`, and nothing labels it.
    async fn namespace_gone(&self, boundary: &str, cluster: &str, name: &str) -> Result<bool> {
        self.store.namespace_gone(boundary, cluster, name).await
    }

    /// A namespace of the boundary in the cluster.
    async fn namespace_record(
        &self,
        boundary: &str,
        cluster: &str,
        name: &str,
    ) -> Result<NamespaceRecord> {
        self.store.get_namespace(boundary, cluster, name).await
    }

    /// The boundary's audit reports of the cluster, replaced whole.
    async fn record_audit_reports(
        &self,
        cluster: &str,
        boundary: &str,
        reports: Vec<AuditRecord>,
    ) -> Result<()> {
        self.store
            .replace_audit_reports(cluster, boundary, reports)
            .await
    }

    /// Changes of what the reconciler works from: a counter that moves on every write.
    async fn subscribe_changes(&self) -> Result<tokio::sync::watch::Receiver<u64>> {
        self.store.subscribe().await
    }

    /// This replica's membership of the installation's fleet of reconcilers, when it may
    /// join (see [`Lease`]).
    async fn join_fleet(&self, installation: &str, replica: &str) -> Result<Option<Lease>> {
        self.store.join_fleet(installation, replica).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install(status: InstallStatus) -> PolicyInstall {
        PolicyInstall {
            boundary: "shop".to_owned(),
            policy: "labels".to_owned(),
            cluster: "c1".to_owned(),
            policy_etag: "\"1\"".to_owned(),
            status,
            updated_at: "2026-12-07T00:00:00.000Z".to_owned(),
        }
    }

    /// Every status the reconciler records reads back as itself; a row that does not is an
    /// error that quotes it.
    #[test]
    fn a_status_goes_to_the_store_and_back_unchanged() {
        let statuses = [
            InstallStatus::Pending,
            InstallStatus::Installed,
            InstallStatus::Enforced,
            InstallStatus::AuditActive,
            InstallStatus::Error("no answer within 60 s".to_owned()),
            InstallStatus::NotEnforced("binding x was deleted: restoring".to_owned()),
        ];
        for status in statuses {
            let row = install(status.clone()).into_row();
            assert_eq!(PolicyInstall::from_row(row), install(status));
        }
        let mut row = install(InstallStatus::Enforced).into_row();
        row.status = "enforcing".to_owned();
        assert_eq!(
            PolicyInstall::from_row(row).status,
            InstallStatus::Error("unreadable status 'enforcing'".to_owned())
        );
    }
}
