//! Changing a cluster's layout with no gap (SPEC 3.4): the new layout's objects are written
//! beside the old ones, with a warn-only switch binding beside each enforce-mode binding
//! ([`palisade_vap::render::switch_binding`]); once every probe of a boundary saw the switch
//! bindings warn, the old layout's objects and the switch bindings of that boundary go.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use kube::api::{Patch, PatchParams};
use palisade_policy::{Mode, Name};
use palisade_vap::render::{switch_binding_name, FIELD_MANAGER};
use palisade_vap::shared::shared_binding_name;
use palisade_vap::Layout;

use crate::cluster::{check_installation, delete_exact, is_switch, ClusterClient};
use crate::Result;

impl ClusterClient {
    /// The layouts of which this installation has objects of `boundary` in the cluster.
    pub async fn layouts_present(
        &self,
        installation: &str,
        boundary: &Name,
    ) -> Result<BTreeSet<Layout>> {
        Ok(self
            .installed(installation, Some(boundary))
            .await?
            .layouts(installation, boundary))
    }

    /// Writes switch bindings rendered already ([`switch_binding`]).
    pub(crate) async fn apply_switch(
        &self,
        installation: &str,
        switch: &[ValidatingAdmissionPolicyBinding],
    ) -> Result<()> {
        check_installation(installation)?;
        let api = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        for binding in switch {
            let name = binding.metadata.name.clone().unwrap_or_default();
            api.patch(&name, &params, &Patch::Apply(binding)).await?;
        }
        Ok(())
    }

    /// Deletes the switch binding of the installation's shared enforce binding, if there.
    pub async fn remove_shared_switch(&self, installation: &str) -> Result<()> {
        check_installation(installation)?;
        let api = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        let name = switch_binding_name(&shared_binding_name(installation, Mode::Enforce));
        if let Some(binding) = api.get_opt(&name).await? {
            if is_switch(&binding.metadata) {
                delete_exact(&api, &binding.metadata).await?;
            }
        }
        Ok(())
    }
}
