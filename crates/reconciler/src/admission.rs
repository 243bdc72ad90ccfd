//! The three admission layouts as a cluster sees them, behind one trait: what a layout
//! prepares per cluster, how it writes a boundary's policies, which object and binding judge a
//! policy (what a probe reads), and its enforce-mode bindings (what a switch copies). [`of`] is
//! the one place a [`Layout`] is matched; a fourth layout is a fourth value here.
//!
//! The objects themselves are rendered by `palisade_vap::layout`; the requests are
//! [`ClusterClient`]'s.

use async_trait::async_trait;
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use palisade_policy::{Exception, Mode, Name, Policy};
use palisade_vap::shared::{shared_binding_name, shared_objects, shared_policy_name};
use palisade_vap::{object_name, render, render_boundary, render_excepted, Layout};

use crate::cluster::{is_ours, ClusterClient, Installed};
use crate::{ReconcileError, Result};

/// Which policy object and binding judge a policy in a namespace, or why none does (`not
/// enforced: <reason>`).
pub(crate) type Judge = std::result::Result<(String, String), String>;

/// What one layout decides in a cluster.
#[async_trait]
pub(crate) trait AdmissionLayout: Send + Sync {
    /// Installation-wide objects the layout needs before any boundary is written, applied on
    /// every pass so that objects changed or deleted by others come back.
    async fn prepare(
        &self,
        _client: &ClusterClient,
        _installation: &str,
        _identity: &str,
    ) -> Result<()> {
        Ok(())
    }

    /// Whether a boundary's policies are written together (one object holds several), so one
    /// policy cannot be written alone.
    fn writes_boundary_together(&self) -> bool {
        false
    }

    /// Writes one policy's objects (a policy without admission rules has its objects removed)
    /// with the `exceptions` in force in the cluster.
    async fn apply_policy(
        &self,
        client: &ClusterClient,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        exceptions: &[Exception],
    ) -> Result<()>;

    /// Writes a boundary's policies, in the order given; `before` is what the cluster held
    /// before (this pass's read).
    async fn apply_boundary(
        &self,
        client: &ClusterClient,
        _before: &Installed,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
        exceptions: &[Exception],
    ) -> Result<()> {
        for policy in policies {
            self.apply_policy(client, installation, boundary, policy, exceptions)
                .await?;
        }
        Ok(())
    }

    /// The policy object and binding that judge `policy` in `namespace` (read from the
    /// cluster: installed, and palisade's), or why none does.
    async fn judge(
        &self,
        client: &ClusterClient,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        namespace: &str,
    ) -> Result<Judge>;

    /// The enforce-mode bindings of `policies` in this layout: what a switch to it copies.
    fn enforce_bindings(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding>;
}

/// The layout's value.
pub(crate) fn of(layout: Layout) -> &'static dyn AdmissionLayout {
    match layout {
        Layout::PerPolicy => &PerPolicy,
        Layout::PerBoundary => &PerBoundary,
        Layout::Shared => &Shared,
    }
}

fn denies(binding: &ValidatingAdmissionPolicyBinding) -> bool {
    binding
        .spec
        .as_ref()
        .and_then(|s| s.validation_actions.as_deref())
        .is_some_and(|actions| actions.iter().any(|a| a == "Deny"))
}

/// One policy object and binding per policy and boundary (SPEC 3.4).
struct PerPolicy;

#[async_trait]
impl AdmissionLayout for PerPolicy {
    async fn apply_policy(
        &self,
        client: &ClusterClient,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        exceptions: &[Exception],
    ) -> Result<()> {
        let exceptions: Vec<&Exception> = exceptions.iter().collect();
        match render_excepted(boundary, policy, installation, &exceptions) {
            Some(rendered) => {
                client
                    .refuse_other_installation(&rendered, installation)
                    .await?;
                client.apply_rendered(&rendered).await
            }
            None => {
                client
                    .delete_policy(installation, boundary, policy.name())
                    .await
            }
        }
    }

    async fn judge(
        &self,
        client: &ClusterClient,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        _namespace: &str,
    ) -> Result<Judge> {
        let name = object_name(boundary, policy.name());
        let installed = client
            .cluster_api::<ValidatingAdmissionPolicy>()
            .get_opt(&name)
            .await?;
        Ok(
            if installed.is_some_and(|p| is_ours(&p.metadata, installation, boundary)) {
                Ok((name.clone(), name))
            } else {
                Err(format!(
                    "palisade's ValidatingAdmissionPolicy '{name}' is not installed"
                ))
            },
        )
    }

    fn enforce_bindings(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding> {
        policies
            .iter()
            .filter(|p| p.mode() == Mode::Enforce)
            .filter_map(|p| render(boundary, p, installation))
            .map(|r| r.binding)
            .filter(denies)
            .collect()
    }
}

/// One policy object and binding per boundary and mode, at most 5 policies each.
struct PerBoundary;

#[async_trait]
impl AdmissionLayout for PerBoundary {
    fn writes_boundary_together(&self) -> bool {
        true
    }

    async fn apply_policy(
        &self,
        _client: &ClusterClient,
        _installation: &str,
        _boundary: &Name,
        policy: &Policy,
        _exceptions: &[Exception],
    ) -> Result<()> {
        Err(ReconcileError::WholeBoundary(policy.name().to_string()))
    }

    async fn apply_boundary(
        &self,
        client: &ClusterClient,
        before: &Installed,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
        exceptions: &[Exception],
    ) -> Result<()> {
        client
            .apply_boundary_objects(before, installation, boundary, policies, exceptions)
            .await
    }

    async fn judge(
        &self,
        client: &ClusterClient,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        _namespace: &str,
    ) -> Result<Judge> {
        Ok(
            match client
                .object_holding(installation, boundary, policy.name())
                .await?
            {
                Some(name) => Ok((name.clone(), name)),
                None => Err(format!(
                    "no ValidatingAdmissionPolicy of palisade's holding policy '{}' is installed",
                    policy.name()
                )),
            },
        )
    }

    fn enforce_bindings(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding> {
        render_boundary(boundary, policies, installation)
            .into_iter()
            .map(|o| o.rendered.binding)
            .filter(denies)
            .collect()
    }
}

/// One policy and two bindings per installation; each policy's rules in parameter objects.
struct Shared;

#[async_trait]
impl AdmissionLayout for Shared {
    async fn prepare(
        &self,
        client: &ClusterClient,
        installation: &str,
        identity: &str,
    ) -> Result<()> {
        client.install_shared(installation).await?;
        client
            .install_parameters_guard(installation, identity)
            .await
    }

    async fn apply_policy(
        &self,
        client: &ClusterClient,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        exceptions: &[Exception],
    ) -> Result<()> {
        client
            .apply_parameters(installation, boundary, policy, exceptions)
            .await
    }

    async fn judge(
        &self,
        client: &ClusterClient,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        namespace: &str,
    ) -> Result<Judge> {
        Ok(
            if client
                .parameters_present(installation, boundary, policy.name(), namespace)
                .await?
            {
                Ok((
                    shared_policy_name(installation),
                    shared_binding_name(installation, policy.mode()),
                ))
            } else {
                Err(format!(
                    "palisade's parameters of policy '{}' are not in namespace '{namespace}'",
                    policy.name()
                ))
            },
        )
    }

    fn enforce_bindings(
        &self,
        installation: &str,
        _boundary: &Name,
        _policies: &[Policy],
    ) -> Vec<ValidatingAdmissionPolicyBinding> {
        vec![shared_objects(installation).enforce]
    }
}
