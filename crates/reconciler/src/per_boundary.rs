//! The per-boundary layout in a cluster (`palisade_vap::per_boundary`): a boundary's policies
//! of one mode in one `ValidatingAdmissionPolicy` and binding (at most 5 policies each), written
//! together, and found again by the policies they hold.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ListParams;
use palisade_policy::{Exception, Name, Policy};
use palisade_vap::per_boundary::{held_policies, render_boundary_excepted};
use palisade_vap::render::POLICY_LABEL;
use palisade_vap::shared::MODE_LABEL;

use crate::cluster::{
    boundary_selector, delete_exact, is_ours, is_per_boundary, is_switch, ClusterClient, Installed,
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
    /// Server-side applies the boundary's objects (enforce-mode objects first, each policy
    /// before its binding), then deletes this installation's per-boundary objects of the
    /// boundary that the rendering no longer has (bindings first). A policy moving from one
    /// object to another is in both for that moment, never in neither; an unchanged rendering
    /// writes nothing.
    pub(crate) async fn apply_boundary_objects(
        &self,
        before: &Installed,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
        exceptions: &[Exception],
    ) -> Result<()> {
        let exceptions: Vec<&Exception> = exceptions.iter().collect();
        let objects = render_boundary_excepted(boundary, policies, installation, &exceptions);
        for object in &objects {
            self.refuse_other_installation(&object.rendered, installation)
                .await?;
        }
        let mut written = BTreeSet::new();
        for object in &objects {
            self.apply_rendered(&object.rendered).await?;
            written.insert(
                object
                    .rendered
                    .policy
                    .metadata
                    .name
                    .clone()
                    .unwrap_or_default(),
            );
        }
        // Objects not in `before` were written by this pass: only its names are kept.
        let doomed = |meta: &ObjectMeta| {
            is_ours(meta, installation, boundary)
                && is_per_boundary(meta)
                && !is_switch(meta)
                && meta.name.as_ref().is_some_and(|n| !written.contains(n))
        };
        let bindings = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        for binding in before.bindings.iter().filter(|m| doomed(m)) {
            delete_exact(&bindings, binding).await?;
        }
        let vaps = self.cluster_api::<ValidatingAdmissionPolicy>();
        for vap in before.policies.iter().filter(|m| doomed(m)) {
            delete_exact(&vaps, vap).await?;
        }
        Ok(())
    }

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

    /// The name of this installation's per-boundary object of `boundary` that holds `policy`
    /// (the first by name, should a change leave it in two for a moment).
    pub(crate) async fn object_holding(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Name,
    ) -> Result<Option<String>> {
        let list = self
            .cluster_api::<ValidatingAdmissionPolicy>()
            .list(&selector(installation, boundary))
            .await?;
        Ok(list
            .items
            .into_iter()
            .filter(|p| is_ours(&p.metadata, installation, boundary))
            .filter(|p| {
                held_policies(p.metadata.annotations.as_ref())
                    .iter()
                    .any(|h| h == policy.as_str())
            })
            .filter_map(|p| p.metadata.name)
            .min())
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
