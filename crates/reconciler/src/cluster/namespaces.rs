//! Boundary namespaces: the label that puts a namespace in a boundary, its guard, releasing
//! and restoring it.

use super::*;

impl ClusterClient {
    /// Removes the boundary label from `namespace` when it carries `boundary`'s (palisade
    /// releases it; the namespace and its objects stay). `false` when there was nothing to
    /// remove.
    pub async fn release_namespace(&self, boundary: &Name, namespace: &str) -> Result<bool> {
        let api = self.cluster_api::<Namespace>();
        let Some(existing) = api.get_opt(namespace).await? else {
            return Ok(false);
        };
        let current = existing
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(BOUNDARY_LABEL));
        match current {
            Some(b) if b == boundary.as_str() => {}
            Some(other) => return Err(ReconcileError::LabelledForOtherBoundary(other.clone())),
            None => return Ok(false),
        }
        let patch = json!({"metadata": {
            "resourceVersion": existing.metadata.resource_version,
            "labels": {BOUNDARY_LABEL: null},
        }});
        api.patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(true)
    }

    /// The namespace's uid and boundary label as the cluster has them now, with the
    /// `resourceVersion` they were read at; `None` when there is no namespace of that name.
    pub async fn namespace_seen(&self, namespace: &str) -> Result<Option<NamespaceSeen>> {
        let api = self.cluster_api::<Namespace>();
        let Some(existing) = api.get_opt(namespace).await? else {
            return Ok(None);
        };
        Ok(Some(NamespaceSeen {
            label: existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(BOUNDARY_LABEL))
                .cloned(),
            uid: existing.metadata.uid,
            resource_version: existing.metadata.resource_version,
        }))
    }

    /// Puts `namespace`'s boundary label back, on the condition that the namespace is still
    /// at `resource_version` (as [`Self::namespace_seen`] read it): `false`, nothing
    /// written, when it changed meanwhile (it is looked at again next pass).
    pub async fn put_boundary_label_back(
        &self,
        boundary: &Name,
        namespace: &str,
        resource_version: Option<String>,
    ) -> Result<bool> {
        // resourceVersion makes the patch conditional, so the namespace labelled is the one
        // that was read (and its uid judged), never one made since under the same name.
        let patch = json!({"metadata": {
            "resourceVersion": resource_version,
            "labels": {BOUNDARY_LABEL: boundary.as_str()},
        }});
        match self
            .cluster_api::<Namespace>()
            .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if conflict(&e) || not_found(&e) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Server-side applies the installation's boundary-label guard (SPEC 3.4): only
    /// `palisade_identity` may add, change or remove a namespace's `palisade.dev/boundary`.
    pub async fn install_boundary_label_guard(
        &self,
        installation: &str,
        palisade_identity: &str,
    ) -> Result<()> {
        check_installation(installation)?;
        self.apply_rendered(&palisade_vap::boundary_label_guard(
            installation,
            palisade_identity,
        ))
        .await
    }

    /// Creates `namespace` labelled for `boundary`, or with `adopt` labels an existing,
    /// unlabelled one. A namespace labelled for another boundary is
    /// [`ReconcileError::LabelledForOtherBoundary`]; an existing unlabelled one without
    /// `adopt` is [`ReconcileError::NamespaceExists`].
    pub async fn label_namespace(
        &self,
        boundary: &Name,
        namespace: &str,
        adopt: bool,
    ) -> Result<LabelOutcome> {
        Ok(self
            .label_namespace_with_uid(boundary, namespace, adopt)
            .await?
            .0)
    }

    /// [`Self::label_namespace`], with the uid of the namespace it labelled (SPEC 3.4 v3.2:
    /// palisade restores the label on that namespace only).
    pub async fn label_namespace_with_uid(
        &self,
        boundary: &Name,
        namespace: &str,
        adopt: bool,
    ) -> Result<(LabelOutcome, Option<String>)> {
        let api = self.cluster_api::<Namespace>();
        // Lost races (created or changed meanwhile) are retried a few times.
        for _ in 0..5 {
            let Some(existing) = api.get_opt(namespace).await? else {
                let object = Namespace {
                    metadata: ObjectMeta {
                        name: Some(namespace.to_owned()),
                        labels: Some(BTreeMap::from([(
                            BOUNDARY_LABEL.to_owned(),
                            boundary.to_string(),
                        )])),
                        ..ObjectMeta::default()
                    },
                    ..Namespace::default()
                };
                match api.create(&PostParams::default(), &object).await {
                    Ok(made) => return Ok((LabelOutcome::Created, made.metadata.uid)),
                    Err(e) if conflict(&e) => continue,
                    Err(e) => return Err(e.into()),
                }
            };
            let current = existing
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(BOUNDARY_LABEL));
            match current {
                Some(b) if b == boundary.as_str() => {
                    return Ok((LabelOutcome::Unchanged, existing.metadata.uid))
                }
                Some(other) => return Err(ReconcileError::LabelledForOtherBoundary(other.clone())),
                None if !adopt => {
                    return Err(ReconcileError::NamespaceExists(namespace.to_owned()))
                }
                None => {}
            }
            // resourceVersion makes the merge patch conditional: no label added to a
            // namespace that someone else labelled meanwhile.
            let patch = json!({"metadata": {
                "resourceVersion": existing.metadata.resource_version,
                "labels": {BOUNDARY_LABEL: boundary.as_str()},
            }});
            match api
                .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(labelled) => return Ok((LabelOutcome::Adopted, labelled.metadata.uid)),
                Err(e) if conflict(&e) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(ReconcileError::Unexpected(format!(
            "namespace {namespace} kept changing while it was being labelled"
        )))
    }
}
