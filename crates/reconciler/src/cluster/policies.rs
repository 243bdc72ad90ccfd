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

    /// Server-side applies the policy's objects, policy first, then its binding. A policy
    /// without admission rules has no objects: any left from an earlier version are removed.
    /// Applying what is already there changes nothing (not even `resourceVersion`). Objects of
    /// the same name that another installation labelled as its own are left alone
    /// ([`ReconcileError::OtherInstallation`]).
    pub async fn apply_policy(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
    ) -> Result<()> {
        self.apply_policy_excepted(installation, boundary, policy, &[])
            .await
    }

    /// [`Self::apply_policy`] with the exceptions in force in this cluster (SPEC 7).
    pub async fn apply_policy_excepted(
        &self,
        installation: &str,
        boundary: &Name,
        policy: &Policy,
        exceptions: &[palisade_policy::Exception],
    ) -> Result<()> {
        let (before, namespaces) = self.observe_boundary(installation, boundary).await?;
        let none = std::collections::BTreeMap::new();
        let target = crate::admission::Target {
            installation,
            boundary,
            exceptions,
            namespaces: &namespaces,
            before: &before,
            staged: &none,
        };
        self.write_policy(&target, policy).await
    }

    /// Writes the admission objects of `boundary`'s `policies` in this cluster (in the order
    /// given). Per policy or shared: each policy as [`Self::apply_policy`] does. Per boundary:
    /// the boundary's objects, one per mode and 5 policies, written together; per-boundary
    /// objects of the boundary that no longer hold anything are deleted. Other objects of the
    /// boundary (policies not given, the other layouts') are left to [`Self::garbage_collect`].
    pub async fn apply_boundary(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
    ) -> Result<()> {
        self.apply_boundary_excepted(installation, boundary, policies, &[])
            .await
    }

    /// [`Self::apply_boundary`] with the exceptions in force in this cluster (SPEC 7).
    pub async fn apply_boundary_excepted(
        &self,
        installation: &str,
        boundary: &Name,
        policies: &[Policy],
        exceptions: &[palisade_policy::Exception],
    ) -> Result<()> {
        let (before, namespaces) = self.observe_boundary(installation, boundary).await?;
        let none = std::collections::BTreeMap::new();
        let target = crate::admission::Target {
            installation,
            boundary,
            exceptions,
            namespaces: &namespaces,
            before: &before,
            staged: &none,
        };
        self.write_boundary(&target, policies).await
    }

    /// What a write of `boundary` in this client's layout renders against: what is installed
    /// of it, and its namespaces (read only for a layout whose objects live in them).
    pub(crate) async fn observe_boundary(
        &self,
        installation: &str,
        boundary: &Name,
    ) -> Result<(Installed, Vec<String>)> {
        check_installation(installation)?;
        let before = self.installed(installation, Some(boundary)).await?;
        let namespaces = self.layout_namespaces(boundary).await?;
        Ok((before, namespaces))
    }

    /// `boundary`'s namespaces in the cluster when this client's layout writes into them;
    /// none (and nothing read) otherwise.
    pub(crate) async fn layout_namespaces(&self, boundary: &Name) -> Result<Vec<String>> {
        if crate::admission::of(self.layout).per_namespace() {
            self.boundary_namespaces(boundary).await
        } else {
            Ok(Vec::new())
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
    /// (bindings first), selected by labels; returns the names deleted. A per-boundary object
    /// goes when one of the policies it holds is not in `keep`. Objects of the layouts not in
    /// use (left by an earlier one) all go, and so do switch bindings.
    pub async fn garbage_collect(
        &self,
        installation: &str,
        boundary: &Name,
        keep: &[Name],
    ) -> Result<Vec<String>> {
        self.garbage_collect_keeping(installation, boundary, keep, &[self.layout], false)
            .await
    }

    /// [`Self::garbage_collect`] that keeps the kept policies' objects of every layout in
    /// `layouts` (during a switch: the old layout's and the new one's), and the switch
    /// bindings when `keep_switch`.
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
            deleted.extend(self.garbage_collect(installation, &boundary, &[]).await?);
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
