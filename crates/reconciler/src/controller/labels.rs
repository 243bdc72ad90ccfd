//! Boundary labels put back before a pass probes anything (SPEC 3.4: a namespace without its
//! label is judged by none of the boundary's policies).

use super::*;

impl Controller {
    /// Puts each boundary namespace's `palisade.dev/boundary` label back where someone removed
    /// or changed it (the guard stops everyone but palisade; a cluster admin may still delete
    /// the guard), before anything is probed: a namespace without its label is judged by none
    /// of the boundary's policies. Each repair is counted and recorded on the cluster.
    pub(super) async fn restore_labels(
        &self,
        client: &ClusterClient,
        cluster: &str,
        attached: &[&BoundaryState],
    ) -> Result<(), ControllerError> {
        for boundary in attached {
            for namespace in boundary.namespaces.iter().filter(|n| n.cluster == cluster) {
                let Some((tampering, version)) = client
                    .boundary_label_tampering(&boundary.name, &namespace.name)
                    .await
                    .map_err(ControllerError::RestoreLabel)?
                else {
                    continue;
                };
                // Read again after the label was found missing: a release (the record, then
                // the label) since the pass read its state leaves it removed.
                if !self
                    .still_registered(&boundary.name, cluster, &namespace.name)
                    .await
                {
                    continue;
                }
                if !client
                    .put_boundary_label_back(&boundary.name, &namespace.name, version)
                    .await
                    .map_err(ControllerError::RestoreLabel)?
                {
                    continue;
                }
                let repair = tampering.repair(&namespace.name);
                tracing::warn!(cluster, boundary = %boundary.name, repair, "boundary label repaired");
                metrics::repaired(cluster, "namespace_label");
                let result = self
                    .app
                    .record_repair(cluster, &repair)
                    .await
                    .map_err(ControllerError::ClusterStatus);
                self.recorded(cluster, "a repair", result);
            }
        }
        Ok(())
    }

    /// Whether `namespace` is still registered for `boundary` in the store, read again before a
    /// missing label is put back: a release (which removes the record, then the label) may have
    /// run since the pass read its state; its label must stay removed. A store that cannot be
    /// read counts as registered (the label is put back; a release removes it again).
    pub(super) async fn still_registered(
        &self,
        boundary: &Name,
        cluster: &str,
        namespace: &str,
    ) -> bool {
        !matches!(
            self.app
                .namespace_record(boundary.as_str(), cluster, namespace)
                .await,
            Err(StoreError::NotFound)
        )
    }
}
