//! The settle step of a cluster's part, pure: what a probe's outcome makes of a policy's or an
//! exception's status, and whether it confirms the layout the cluster is written in (what a
//! switch of layout waits for before the earlier layout's objects go).

use super::*;

/// A policy's status from its probe, and whether the probe confirmed the objects of the
/// cluster's current layout at work. An audit-mode policy confirmed denies nothing, so it is
/// never `enforced`. A namespace gone from the cluster meanwhile (404) leaves it `installed`.
pub(super) fn policy_status(
    mode: Mode,
    probe: Result<EnforcementProbe, ReconcileError>,
) -> (InstallStatus, bool) {
    let confirmed = || match mode {
        Mode::Enforce => InstallStatus::Enforced,
        Mode::Audit => InstallStatus::AuditActive,
    };
    match probe {
        Ok(EnforcementProbe::Enforced) => (confirmed(), true),
        // Enforced, by the earlier layout's objects: the new ones are not proven yet.
        Ok(EnforcementProbe::EnforcedByEarlierLayout) => (confirmed(), false),
        Ok(EnforcementProbe::NotEnforced(reason)) => (status_not_enforced(&reason), false),
        Ok(EnforcementProbe::Inconclusive(reason)) => (status_error(&reason), false),
        Err(error) if namespace_gone(&error) => (InstallStatus::Installed, true),
        Err(error) => (status_error(&error.to_string()), false),
    }
}

/// An exception's status from its probe (SPEC 7, "as policies"): while the earlier layout's
/// objects still judge, `pending`.
pub(super) fn exception_status(probe: Result<EnforcementProbe, ReconcileError>) -> InstallStatus {
    match probe {
        Ok(EnforcementProbe::Enforced) => InstallStatus::Enforced,
        Ok(EnforcementProbe::EnforcedByEarlierLayout) => InstallStatus::Pending,
        Ok(EnforcementProbe::NotEnforced(reason)) => status_not_enforced(&reason),
        Ok(EnforcementProbe::Inconclusive(reason)) => status_error(&reason),
        Err(error) if namespace_gone(&error) => InstallStatus::Installed,
        Err(error) => status_error(&error.to_string()),
    }
}

/// The probe's namespace is gone from the cluster (the dry-run create answered 404).
fn namespace_gone(error: &ReconcileError) -> bool {
    matches!(error, ReconcileError::Kube(kube::Error::Api(status)) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> ReconcileError {
        let mut status = kube::core::Status::failure("gone", "NotFound");
        status.code = code;
        ReconcileError::from(kube::Error::Api(Box::new(status)))
    }

    type Probe = fn() -> Result<EnforcementProbe, ReconcileError>;

    /// (probe, the policy's mode, its status, whether it confirms the current layout).
    #[test]
    fn a_probe_settles_a_policys_status() {
        let cases: [(&str, Probe, Mode, &str, bool); 8] = [
            (
                "denied",
                || Ok(EnforcementProbe::Enforced),
                Mode::Enforce,
                "enforced",
                true,
            ),
            (
                "warned",
                || Ok(EnforcementProbe::Enforced),
                Mode::Audit,
                "active (audit)",
                true,
            ),
            (
                "denied by the earlier layout",
                || Ok(EnforcementProbe::EnforcedByEarlierLayout),
                Mode::Enforce,
                "enforced",
                false,
            ),
            (
                "admitted",
                || Ok(EnforcementProbe::NotEnforced("admitted".into())),
                Mode::Enforce,
                "not enforced: admitted",
                false,
            ),
            (
                "refused for another reason",
                || Ok(EnforcementProbe::Inconclusive("quota".into())),
                Mode::Enforce,
                "error: quota",
                false,
            ),
            (
                "namespace gone",
                || Err(api_error(404)),
                Mode::Enforce,
                "installed",
                true,
            ),
            (
                "the API server failed",
                || Err(api_error(500)),
                Mode::Audit,
                "error: the API server answered 500 Internal Server Error: gone",
                false,
            ),
            (
                "no admission rules",
                || Err(ReconcileError::NoAdmissionRules("p".into())),
                Mode::Enforce,
                "error: policy 'p' has no admission rules: nothing is installed, nothing can be probed",
                false,
            ),
        ];
        for (case, probe, mode, status, confirms) in cases {
            let (got, confirmed) = policy_status(mode, probe());
            assert_eq!(
                (got.to_string().as_str(), confirmed),
                (status, confirms),
                "{case}"
            );
        }
    }

    #[test]
    fn a_probe_settles_an_exceptions_status() {
        let cases: [(Probe, &str); 5] = [
            (|| Ok(EnforcementProbe::Enforced), "enforced"),
            (|| Ok(EnforcementProbe::EnforcedByEarlierLayout), "pending"),
            (
                || Ok(EnforcementProbe::NotEnforced("denied".into())),
                "not enforced: denied",
            ),
            (
                || Ok(EnforcementProbe::Inconclusive("quota".into())),
                "error: quota",
            ),
            (|| Err(api_error(404)), "installed"),
        ];
        for (probe, status) in cases {
            assert_eq!(exception_status(probe()).to_string(), status);
        }
    }
}
