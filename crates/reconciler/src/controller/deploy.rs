//! The workload half of a cluster's part (SPEC 5) and the audits that came due.

use super::*;

impl Controller {
    /// Applies the workloads placed in the cluster (SPEC 5) and hands their outcomes to the
    /// cluster's status watch (started here, and stopped when no workload is left).
    pub(super) async fn deploy_workloads(
        &self,
        connection: &Connection,
        cluster: &str,
        attached: &[&BoundaryState],
    ) -> Result<(), ControllerError> {
        let records = self
            .app
            .resources_in_cluster(cluster)
            .await
            .map_err(ControllerError::ReadWorkloads)?;
        let namespaces: BTreeMap<String, Vec<NamespaceRecord>> = attached
            .iter()
            .map(|b| {
                let in_cluster = b
                    .namespaces
                    .iter()
                    .filter(|n| n.cluster == cluster)
                    .cloned()
                    .collect();
                (b.name.to_string(), in_cluster)
            })
            .collect();
        let targets = workloads::sync(
            &connection.client,
            &self.installation,
            &records,
            &namespaces,
            &self.app.catalog,
            &self.settings.workloads,
        )
        .await
        .map_err(ControllerError::Workloads)?;
        self.follow_statuses(cluster, connection, targets);
        Ok(())
    }

    pub(super) fn follow_statuses(
        &self,
        cluster: &str,
        connection: &Connection,
        targets: Vec<Target>,
    ) {
        let replaced = self.memory.with(cluster, |memory| {
            if targets.is_empty() {
                return memory.status_watch.take();
            }
            if let Some((sealed, watch)) = &memory.status_watch {
                if *sealed == connection.sealed && watch.is_running() {
                    watch.update(targets);
                    return None;
                }
            }
            let watch = StatusWatch::start(
                connection.client.client().clone(),
                &self.installation,
                self.app.clone(),
                targets,
                self.builds_done.clone(),
            );
            memory
                .status_watch
                .replace((connection.sealed.clone(), watch))
        });
        // Stopped once the memory is free again.
        drop(replaced);
    }

    /// Every workload placed in a cluster that nothing is written to says why.
    pub(super) async fn not_deployed(
        &self,
        cluster: &str,
        reason: &str,
    ) -> Result<(), ControllerError> {
        let records = self
            .app
            .resources_in_cluster(cluster)
            .await
            .map_err(ControllerError::ReadWorkloads)?;
        let stopped = self.memory.with(cluster, |m| m.status_watch.take());
        drop(stopped);
        let status = WorkloadStatus::NotDeployed(reason.to_owned());
        for record in records {
            let key = palisade_app::reconcile::ResourceKey {
                boundary: record.boundary,
                resource_type: record.resource_type,
                name: record.name,
            };
            self.app
                .record_workload_status(&key, &status)
                .await
                .map_err(ControllerError::Statuses)?;
        }
        Ok(())
    }

    /// The boundary's audit in the cluster when it is due (no other runs until it ends; a
    /// change seen meanwhile is queued behind it). It writes only while `fence` confirms the
    /// cluster's lease.
    pub(super) fn audit_due(
        &self,
        client: &ClusterClient,
        cluster: &str,
        cluster_name: &Name,
        boundary: &BoundaryState,
        fence: &Fence,
    ) -> Option<AuditJob> {
        let policies: Vec<(String, Policy)> = wanted(boundary, cluster_name)
            .filter_map(|(record, decoded)| {
                decoded
                    .as_ref()
                    .ok()
                    .map(|policy| (record.etag.clone(), policy.clone()))
            })
            .collect();
        let namespaces: Vec<&str> = boundary
            .namespaces
            .iter()
            .filter(|n| n.cluster == cluster)
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
        self.audits
            .offer(job, fingerprint, self.settings.audit_interval)
    }
}
