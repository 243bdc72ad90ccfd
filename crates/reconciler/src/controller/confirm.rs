//! What a probe's answer means for a status: the activation grace of a new version, and the
//! confirmation of each exception in force (SPEC 7, "as policies").

use super::*;

impl Part<'_> {
    /// Confirms each exception in force in the cluster whose policy is installed here (SPEC 7:
    /// "as policies"): a dry-run create of an object it matches, violating a rule it lifts,
    /// is admitted. By exception name; an exception no such object exists for (e.g. its
    /// namespaces are not in this cluster) reads `installed`.
    pub(super) async fn confirm_exceptions(
        &mut self,
        client: &ClusterClient,
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
            let status = match probe {
                None => InstallStatus::Installed,
                Some(probe) => super::settle::exception_status(
                    client
                        .probe_exception_in(
                            Some(after),
                            &self.ctl.installation,
                            &boundary.name,
                            policy,
                            &probe,
                        )
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
            let status = self.memory.within_grace(key, status, unconfirmed);
            statuses.push((exception.name.to_string(), status));
        }
        statuses
    }
}

/// Whether a status is what a probe of a version the API server has not activated yet gives:
/// the violating object admitted (`not enforced`), or refused by the version it replaces
/// (`error: ` + [`crate::probe::PROBE_REFUSED`]). The one definition the activation wait and
/// the grace both use.
pub(super) fn settling(status: &InstallStatus) -> bool {
    match status {
        InstallStatus::NotEnforced(_) => true,
        InstallStatus::Error(reason) => reason.starts_with(crate::probe::PROBE_REFUSED),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_settling_only_when_the_new_version_may_not_be_active_yet() {
        let refused = format!("{}: denied by policy old", crate::probe::PROBE_REFUSED);
        let cases = [
            (InstallStatus::NotEnforced("admitted".into()), true),
            (InstallStatus::Error(refused), true),
            (InstallStatus::Error("connection refused".into()), false),
            (InstallStatus::Enforced, false),
            (InstallStatus::AuditActive, false),
            (InstallStatus::Installed, false),
            (InstallStatus::Pending, false),
        ];
        for (status, expected) in cases {
            assert_eq!(settling(&status), expected, "{status}");
        }
    }
}
