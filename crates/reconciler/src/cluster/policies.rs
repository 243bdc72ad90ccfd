//! Writing and removing a boundary's admission objects (server-side apply, one field manager;
//! only this installation's objects of the boundary are deleted, bindings first).

use super::*;

impl ClusterClient {
    pub(crate) async fn apply_rendered(&self, rendered: &Rendered) -> Result<()> {
        let name = rendered.policy.metadata.name.clone().unwrap_or_default();
        apply_owned(
            &self.cluster_api::<ValidatingAdmissionPolicy>(),
            &name,
            &rendered.policy,
        )
        .await?;
        let name = rendered.binding.metadata.name.clone().unwrap_or_default();
        apply_owned(
            &self.cluster_api::<ValidatingAdmissionPolicyBinding>(),
            &name,
            &rendered.binding,
        )
        .await?;
        Ok(())
    }

    /// Objects of the same name (a policy object and its binding) labelled for another
    /// installation are never taken over.
    pub(crate) async fn refuse_other_installation_named(
        &self,
        name: &str,
        installation: &str,
    ) -> Result<()> {
        let owner = |meta: &ObjectMeta| {
            meta.labels
                .as_ref()
                .filter(|l| l.get(MANAGED_BY_LABEL).is_some_and(|m| m == "palisade"))
                .and_then(|l| l.get(INSTALLATION_LABEL))
                .filter(|i| i.as_str() != installation)
                .cloned()
        };
        let policy = self
            .cluster_api::<ValidatingAdmissionPolicy>()
            .get_opt(name)
            .await?;
        let binding = self
            .cluster_api::<ValidatingAdmissionPolicyBinding>()
            .get_opt(name)
            .await?;
        let other = policy
            .and_then(|p| owner(&p.metadata))
            .or_else(|| binding.and_then(|b| owner(&b.metadata)));
        match other {
            Some(other) => Err(ReconcileError::OtherInstallation {
                name: name.to_owned(),
                installation: other,
            }),
            None => Ok(()),
        }
    }

    /// Deletes a policy's objects in every layout, binding first. Only objects labelled as
    /// palisade's, of this installation and boundary, are deleted; absent objects are fine. A
    /// per-boundary object that also holds other policies stays until the boundary is applied
    /// again without this one.
    pub async fn delete_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Name,
    ) -> Result<()> {
        check_installation(installation)?;
        // Whatever the layout: objects of another one may be left by a switch.
        self.delete_held_only(installation, boundary, policy)
            .await?;
        self.delete_parameters(installation, boundary, policy)
            .await?;
        let name = object_name(boundary, policy);
        delete_if_ours(
            &self.cluster_api::<ValidatingAdmissionPolicyBinding>(),
            &name,
            installation,
            boundary,
        )
        .await?;
        delete_if_ours(
            &self.cluster_api::<ValidatingAdmissionPolicy>(),
            &name,
            installation,
            boundary,
        )
        .await?;
        Ok(())
    }

    /// Deletes this installation's objects of `boundary` whose policy is not in `keep`
    /// (bindings first), selected by labels; returns the names deleted. It keeps the kept
    /// policies' objects of every layout in `layouts` (during a switch: the old layout's and
    /// the new one's), and the switch bindings when `keep_switch`. A per-boundary object goes
    /// when one of the policies it holds is not kept.
    pub async fn garbage_collect_keeping(
        &self,
        installation: &str,
        boundary: &Name,
        keep: &[Name],
        layouts: &[Layout],
        keep_switch: bool,
    ) -> Result<Vec<String>> {
        let installed = self.installed(installation, Some(boundary)).await?;
        let keep = Keep {
            policies: keep,
            layouts,
            switch_bindings: keep_switch,
        };
        self.collect(&installed, installation, boundary, keep).await
    }

    /// Deletes `boundary`'s objects among `installed` that `keep` does not keep (parameter
    /// objects, bindings, then policies), each by its uid; returns the names deleted.
    pub async fn collect(
        &self,
        installed: &Installed,
        installation: &str,
        boundary: &Name,
        keep: Keep<'_>,
    ) -> Result<Vec<String>> {
        check_installation(installation)?;
        let keep_parameters = if keep.layouts.contains(&Layout::Shared) {
            keep.policies
        } else {
            &[][..]
        };
        let mut deleted = self
            .collect_parameters(installation, boundary, installed, keep_parameters)
            .await?;
        let (stale_bindings, stale_policies) = installed.stale(installation, boundary, keep);
        let bindings = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        for binding in stale_bindings {
            if delete_exact(&bindings, binding).await? {
                deleted.push(binding.name.clone().unwrap_or_default());
            }
        }
        let policies = self.cluster_api::<ValidatingAdmissionPolicy>();
        for policy in stale_policies {
            if delete_exact(&policies, policy).await? {
                let name = policy.name.clone().unwrap_or_default();
                if !deleted.contains(&name) {
                    deleted.push(name);
                }
            }
        }
        Ok(deleted)
    }

    /// The boundaries this installation has objects of in the cluster (from their labels).
    pub async fn installed_boundaries(
        &self,
        installation: &str,
    ) -> Result<std::collections::BTreeSet<String>> {
        Ok(self.installed(installation, None).await?.boundaries())
    }

    /// Removes everything this installation put in the cluster: every boundary's policy
    /// objects (bindings first), then the boundary-label guard, and the audit's reports.
    /// Returns the names of the policy objects deleted.
    /// A cluster that does not serve the ValidatingAdmissionPolicy API holds nothing of
    /// palisade's (nothing is written to a cluster that cannot enforce): nothing to remove.
    pub async fn remove_installation(&self, installation: &str) -> Result<Vec<String>> {
        check_installation(installation)?;
        let mut deleted = Vec::new();
        self.remove_reports(installation).await?;
        if !self.serves_admission_policies().await? {
            return Ok(deleted);
        }
        for boundary in self.installed_boundaries(installation).await? {
            let Ok(boundary) = Name::parse(&boundary) else {
                continue;
            };
            deleted.extend(
                self.garbage_collect_keeping(installation, &boundary, &[], &[], false)
                    .await?,
            );
        }
        deleted.extend(self.remove_shared(installation).await?);
        let name = palisade_vap::guard_name(installation);
        let is_guard = |meta: &ObjectMeta| {
            meta.labels.as_ref().is_some_and(|l| {
                l.get(MANAGED_BY_LABEL).is_some_and(|v| v == "palisade")
                    && l.get(INSTALLATION_LABEL).is_some_and(|v| v == installation)
                    && !l.contains_key(BOUNDARY_LABEL)
            })
        };
        let bindings = self.cluster_api::<ValidatingAdmissionPolicyBinding>();
        if let Some(binding) = bindings.get_opt(&name).await? {
            if is_guard(&binding.metadata) {
                delete_exact(&bindings, &binding.metadata).await?;
            }
        }
        let policies = self.cluster_api::<ValidatingAdmissionPolicy>();
        if let Some(policy) = policies.get_opt(&name).await? {
            if is_guard(&policy.metadata) && delete_exact(&policies, &policy.metadata).await? {
                deleted.push(name);
            }
        }
        Ok(deleted)
    }
}
