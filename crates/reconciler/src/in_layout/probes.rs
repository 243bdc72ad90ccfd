//! Confirming enforcement outside a pass: what is installed read now, the probe decided by
//! [`crate::verdict`], sent as a server-side dry-run create, and its answer judged there.

use palisade_policy::{Name, Policy};

use super::InLayout;
use crate::cluster::{check_installation, Installed};
use crate::excepted::ExceptedProbe;
use crate::probe::EnforcementProbe;
use crate::verdict::{exception_probe, policy_probe, Probe, Site};
use crate::Result;

impl InLayout {
    /// Confirms enforcement: a server-side dry-run create of a Pod violating `policy` into
    /// `namespace` (a namespace of the boundary). Enforce mode: `Enforced` when denied with
    /// the policy's message; audit mode: when admitted with its warning.
    pub async fn probe_enforcement(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_enforcement_among(installation, boundary, policy, &[], namespace)
            .await
    }

    /// [`Self::probe_enforcement`] with a probe Pod that also complies with `others` (the
    /// boundary's other policies in this cluster) where possible, so that their denials do
    /// not hide this policy's.
    pub async fn probe_enforcement_among(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_policy(installation, boundary, policy, others, namespace, false)
            .await
    }

    /// [`Self::probe_enforcement_among`] while the cluster changes to this layout and the
    /// earlier layout's objects are still there ([`palisade_vap::render::switch_binding`]):
    /// an enforce-mode policy is confirmed in the new layout only when its switch binding
    /// warned; denied with the policy's message without that warning, it is
    /// [`EnforcementProbe::EnforcedByEarlierLayout`].
    pub async fn probe_during_switch(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
    ) -> Result<EnforcementProbe> {
        self.probe_policy(installation, boundary, policy, others, namespace, true)
            .await
    }

    async fn probe_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        others: &[Policy],
        namespace: &str,
        switching: bool,
    ) -> Result<EnforcementProbe> {
        check_installation(installation)?;
        let installed = self.installed(installation, Some(boundary)).await?;
        let site = self.site(&installed, installation, boundary);
        let probe = policy_probe(&site, policy, others, namespace, switching, None)?;
        self.send(probe).await
    }

    /// Confirms an exception (SPEC 7) like a policy: a server-side dry-run create of `probe`
    /// ([`crate::excepted::excepted_pod`]), which violates a rule of `policy` the exception
    /// lifts, must be admitted without the policy's denial or warning. That objects it does
    /// not match are still denied is the policy's own probe.
    pub async fn probe_exception(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        probe: &ExceptedProbe,
    ) -> Result<EnforcementProbe> {
        check_installation(installation)?;
        let installed = self.installed(installation, Some(boundary)).await?;
        let site = self.site(&installed, installation, boundary);
        self.send(exception_probe(&site, policy, probe)).await
    }

    /// Where a probe is decided: this layout, judging from `installed`.
    pub(crate) fn site<'a>(
        &self,
        installed: &'a Installed,
        installation: &'a str,
        boundary: &'a Name,
    ) -> Site<'a> {
        Site {
            layout: self.layout,
            installed,
            installation,
            boundary,
        }
    }

    /// Sends a probe and judges the answer; a status decided without one is that status.
    pub(crate) async fn send(
        &self,
        probe: std::result::Result<Probe, EnforcementProbe>,
    ) -> Result<EnforcementProbe> {
        match probe {
            Ok(probe) => {
                let answer = self.dry_run_create(&probe.namespace, &probe.pod).await?;
                Ok(probe.verdict(&answer))
            }
            Err(status) => Ok(status),
        }
    }
}
