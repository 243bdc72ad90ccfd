//! The per-boundary layout in a cluster (`palisade_vap::per_boundary`): a boundary's policies
//! of one mode in one `ValidatingAdmissionPolicy` and binding (at most 5 policies each), written
//! together, and found again by the policies they hold.

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use palisade_policy::Name;
use palisade_vap::per_boundary::held_policies;
use palisade_vap::render::POLICY_LABEL;
use palisade_vap::shared::MODE_LABEL;

use crate::cluster::{
    boundary_selector, delete_exact, is_ours, is_per_boundary, is_switch, ClusterClient,
};
use crate::Result;

/// The selector of an installation's per-boundary objects of one boundary.
fn selector(installation: &str, boundary: &Name) -> ListParams {
    ListParams::default().labels(&format!(
        "{},{MODE_LABEL},!{POLICY_LABEL}",
        boundary_selector(installation, boundary)
    ))
}

impl ClusterClient {
    /// Deletes this installation's per-boundary objects of `boundary` for which `doomed` holds,
    /// bindings first.
    async fn delete_per_boundary(
        &self,
        installation: &str,
        boundary: &Name,
        doomed: impl Fn(&ObjectMeta) -> bool,
    ) -> Result<()> {
        let params = selector(installation, boundary);
        let chosen = |meta: &ObjectMeta| {
            is_ours(meta, installation, boundary)
                && is_per_boundary(meta)
                && !is_switch(meta)
                && doomed(meta)
        };
        let bindings = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        for binding in bindings.list(&params).await?.items {
            if chosen(&binding.metadata) {
                delete_exact(&bindings, &binding.metadata).await?;
            }
        }
        let vaps = self.cluster_api::<ValidatingAdmissionPolicy>();
        for vap in vaps.list(&params).await?.items {
            if chosen(&vap.metadata) {
                delete_exact(&vaps, &vap.metadata).await?;
            }
        }
        Ok(())
    }

    /// Deletes the per-boundary objects of `boundary` that hold `policy` and no other
    /// (bindings first); an object that also holds other policies stays until the boundary is
    /// applied again without it.
    pub(crate) async fn delete_held_only(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Name,
    ) -> Result<()> {
        self.delete_per_boundary(installation, boundary, |meta| {
            held_policies(meta.annotations.as_ref()) == [policy.to_string()]
        })
        .await
    }
}
