//! The settle step of a cluster's part, pure: what a probe's outcome makes of a policy's or an
//! exception's status, and whether it confirms the layout the cluster is written in (what a
//! switch of layout waits for before the earlier layout's objects go).

use super::*;

/// What a probe settles a status at.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Settled {
    pub(super) status: InstallStatus,
    /// The probe confirmed the objects of the cluster's current layout at work (or found
    /// nothing to probe): a switch of layout may remove the earlier layout's.
    pub(super) confirms_layout: bool,
    /// The probe found what it also finds while the API server has not activated a version
    /// yet: the violating object admitted, or refused by another policy (the version it
    /// replaces). Told by the probe's outcome, not by the status's words: the activation wait
    /// and the grace both go by it.
    pub(super) settling: bool,
}

impl Settled {
    fn of(status: InstallStatus, confirms_layout: bool, settling: bool) -> Settled {
        Settled {
            status,
            confirms_layout,
            settling,
        }
    }

    /// Nothing to probe: `installed`.
    pub(super) fn installed() -> Settled {
        Settled::of(InstallStatus::Installed, true, false)
    }

    /// Writing it failed: `error: <reason>`, retried, and no grace (nothing new was written
    /// for the API server to activate).
    pub(super) fn write_failed(reason: &str) -> Settled {
        Settled::of(super::status_error(reason), false, false)
    }
}

/// A policy's status from its probe. An audit-mode policy confirmed denies nothing, so it is
/// never `enforced`. A namespace gone from the cluster meanwhile (404) leaves it `installed`.
pub(super) fn policy_status(
    mode: Mode,
    probe: Result<EnforcementProbe, ReconcileError>,
) -> Settled {
    let confirmed = || match mode {
        Mode::Enforce => InstallStatus::Enforced,
        Mode::Audit => InstallStatus::AuditActive,
    };
    match probe {
        Ok(EnforcementProbe::Enforced) => Settled::of(confirmed(), true, false),
        // Enforced, by the earlier layout's objects: the new ones are not proven yet.
        Ok(EnforcementProbe::EnforcedByEarlierLayout) => Settled::of(confirmed(), false, false),
        Ok(EnforcementProbe::NotEnforced(reason)) => {
            Settled::of(status_not_enforced(&reason), false, true)
        }
        Ok(EnforcementProbe::Inconclusive(reason)) => {
            Settled::of(status_error(&reason), false, true)
        }
        Err(error) if namespace_gone(&error) => Settled::installed(),
        Err(error) => Settled::of(status_error(&error.to_string()), false, false),
    }
}

/// An exception's status from its probe (SPEC 7, "as policies"): while the earlier layout's
/// objects still judge, `pending`.
pub(super) fn exception_status(probe: Result<EnforcementProbe, ReconcileError>) -> Settled {
    match probe {
        Ok(EnforcementProbe::EnforcedByEarlierLayout) => {
            Settled::of(InstallStatus::Pending, false, false)
        }
        probe => policy_status(Mode::Enforce, probe),
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

    /// (probe, the policy's mode, its status, whether it confirms the current layout, whether
    /// it may be a version not yet active).
    #[test]
    fn a_probe_settles_a_policys_status() {
        let cases: [(&str, Probe, Mode, &str, bool, bool); 8] = [
            (
                "denied",
                || Ok(EnforcementProbe::Enforced),
                Mode::Enforce,
                "enforced",
                true,
                false,
            ),
            (
                "warned",
                || Ok(EnforcementProbe::Enforced),
                Mode::Audit,
                "active (audit)",
                true,
                false,
            ),
            (
                "denied by the earlier layout",
                || Ok(EnforcementProbe::EnforcedByEarlierLayout),
                Mode::Enforce,
                "enforced",
                false,
                false,
            ),
            (
                "admitted",
                || Ok(EnforcementProbe::NotEnforced("admitted".into())),
                Mode::Enforce,
                "not enforced: admitted",
                false,
                true,
            ),
            (
                "refused for another reason",
                || Ok(EnforcementProbe::Inconclusive("quota".into())),
                Mode::Enforce,
                "error: quota",
                false,
                true,
            ),
            (
                "namespace gone",
                || Err(api_error(404)),
                Mode::Enforce,
                "installed",
                true,
                false,
            ),
            (
                "the API server failed",
                || Err(api_error(500)),
                Mode::Audit,
                "error: the API server answered 500 Internal Server Error: gone",
                false,
                false,
            ),
            (
                "no admission rules",
                || Err(ReconcileError::NoAdmissionRules("p".into())),
                Mode::Enforce,
                "error: policy 'p' has no admission rules: nothing is installed, nothing can be probed",
                false,
                false,
            ),
        ];
        for (case, probe, mode, status, confirms, settling) in cases {
            let got = policy_status(mode, probe());
            assert_eq!(
                (
                    got.status.to_string().as_str(),
                    got.confirms_layout,
                    got.settling
                ),
                (status, confirms, settling),
                "{case}"
            );
        }
    }

    #[test]
    fn a_probe_settles_an_exceptions_status() {
        let cases: [(Probe, &str, bool); 6] = [
            (|| Ok(EnforcementProbe::Enforced), "enforced", false),
            (
                || Ok(EnforcementProbe::EnforcedByEarlierLayout),
                "pending",
                false,
            ),
            (
                || Ok(EnforcementProbe::NotEnforced("denied".into())),
                "not enforced: denied",
                true,
            ),
            (
                || Ok(EnforcementProbe::Inconclusive("quota".into())),
                "error: quota",
                true,
            ),
            (|| Err(api_error(404)), "installed", false),
            (
                || Err(api_error(500)),
                "error: the API server answered 500 Internal Server Error: gone",
                false,
            ),
        ];
        for (probe, status, settling) in cases {
            let got = exception_status(probe());
            assert_eq!(
                (got.status.to_string().as_str(), got.settling),
                (status, settling)
            );
        }
    }
}
