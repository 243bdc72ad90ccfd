//! The confirmation of each exception in force (SPEC 7, "as policies"), with the activation
//! grace of a new version as a policy has.

use super::*;

impl Part<'_> {
    /// Confirms each exception in force in the cluster whose policy is installed here (SPEC 7:
    /// "as policies"): a dry-run create of an object it matches, violating a rule it lifts,
    /// is admitted. By exception name; an exception no such object exists for (e.g. its
    /// namespaces are not in this cluster) reads `installed`.
    pub(super) async fn confirm_exceptions(
        &mut self,
        client: &InLayout,
        after: &crate::cluster::Installed,
        boundary: &BoundaryState,
        in_cluster: &[Policy],
        namespaces: &[&str],
        unconfirmed: &mut usize,
    ) -> Vec<(String, InstallStatus)> {
        let cluster = self.name.as_str();
        let exceptions = boundary.exceptions_in(cluster);
        let all: Vec<&palisade_policy::Exception> = exceptions.iter().collect();
        let mut statuses = Vec::new();
        for exception in &exceptions {
            let Some(policy) = in_cluster.iter().find(|p| p.name() == &exception.policy) else {
                continue;
            };
            let probe =
                crate::excepted::excepted_pod(policy, in_cluster, exception, &all, namespaces);
            let site = client.site(after, &self.ctl.installation, &boundary.name);
            let settled = match probe {
                None => super::settle::Settled::installed(),
                Some(probe) => super::settle::exception_status(
                    client
                        .send(crate::verdict::exception_probe(&site, policy, &probe))
                        .await,
                ),
            };
            // A new exception is denied by the objects it replaces until the API server has
            // activated them: `pending` for a moment, as a policy is.
            let key = (
                cluster.to_owned(),
                boundary.name.to_string(),
                format!("exception/{}", exception.name),
                exception.expires_at.clone(),
            );
            let status = self.memory.within_grace(key, settled, unconfirmed);
            statuses.push((exception.name.to_string(), status));
        }
        statuses
    }
}
