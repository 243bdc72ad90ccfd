//! The workload half of a cluster's part (SPEC 5) and the audits that came due.

use super::*;

impl Part<'_> {
    /// Applies the workloads placed in the cluster (SPEC 5) and hands their outcomes to the
    /// cluster's status watch (started here, and stopped when no workload is left).
    pub(super) async fn deploy_workloads(
        &mut self,
        connection: &Connection,
        attached: &[&BoundaryState],
    ) -> Result<(), ControllerError> {
        let (ctl, cluster) = (self.ctl, self.name.as_str());
        let records = ctl
            .records
            .resources_in_cluster(cluster)
            .await
            .map_err(ControllerError::ReadWorkloads)?;
        let namespaces: BTreeMap<String, Vec<NamespaceRecord>> = attached
            .iter()
            .map(|b| {
                let in_cluster = b.namespaces_in(cluster).cloned().collect();
                (b.name.to_string(), in_cluster)
            })
            .collect();
        let targets = workloads::sync(
            &connection.client,
            &ctl.installation,
            &records,
            &namespaces,
            &ctl.app.catalog,
            &ctl.settings.workloads,
        )
        .await
        .map_err(ControllerError::Workloads)?;
        self.memory
            .follow_statuses(&connection.sealed, targets, |targets| {
                StatusWatch::start(
                    connection.client.client().clone(),
                    &ctl.installation,
                    ctl.records.clone(),
                    targets,
                    ctl.builds_done.clone(),
                )
            });
        Ok(())
    }
}

/// Every workload placed in a cluster that nothing is written to says why.
pub(super) async fn not_deployed(
    port: &dyn Records,
    cluster: &str,
    reason: &str,
) -> Result<(), ControllerError> {
    let records = port
        .resources_in_cluster(cluster)
        .await
        .map_err(ControllerError::ReadWorkloads)?;
    let status = WorkloadStatus::NotDeployed(reason.to_owned());
    for record in records {
        let key = palisade_app::reconcile::ResourceKey {
            boundary: record.boundary,
            resource_type: record.resource_type,
            name: record.name,
        };
        port.record_workload_status(&key, &status)
            .await
            .map_err(ControllerError::Statuses)?;
    }
    Ok(())
}

/// The boundary's audit in the cluster, and the fingerprint of what it reads: offered to the
/// audits, it runs when due (no other runs until it ends; a change seen meanwhile is queued
/// behind it). It writes only while `fence` confirms the cluster's lease.
pub(super) fn audit_job(
    client: &ClusterClient,
    cluster_name: &Name,
    boundary: &BoundaryState,
    fence: &Fence,
) -> (AuditJob, String) {
    let cluster = cluster_name.as_str();
    let policies: Vec<(String, Policy)> = wanted(boundary, cluster_name)
        .filter_map(|(record, decoded)| {
            decoded
                .as_ref()
                .ok()
                .map(|policy| (record.etag.clone(), policy.clone()))
        })
        .collect();
    let namespaces: Vec<&str> = boundary
        .namespaces_in(cluster)
        .map(|n| n.name.as_str())
        .collect();
    let exceptions = boundary.exceptions_in(cluster);
    let mut fingerprint = audit::fingerprint(&policies, &namespaces);
    for exception in &exceptions {
        fingerprint.push_str(&format!(",x:{}@{}", exception.name, exception.expires_at));
    }
    let job = AuditJob {
        cluster: cluster.to_owned(),
        client: client.clone(),
        boundary: boundary.name.clone(),
        policies,
        exceptions,
        fence: fence.clone(),
    };
    (job, fingerprint)
}
