//! A boundary's namespaces: palisade creates a namespace labelled
//! `palisade.dev/boundary=<boundary>` in an attached cluster, or adopts (labels) an existing
//! one; the boundary's admission rules apply there from then on. Deleting releases it: the
//! label is removed, the namespace and its objects stay.

use std::collections::BTreeMap;

use palisade_api_types::view::{NamespaceList, NamespaceView};
use palisade_policy::namespace;
use palisade_store::{ClusterRecord, NamespaceRecord, StoreError};

use crate::caller::Access;
use crate::clusters::Placed;
use crate::error::{AppError, AppResult};
use crate::paging::PageRequest;
use crate::ports::ClusterError;
use crate::App;

/// The API's view of a namespace record: `status` is `active`, or `gone: ...` once the
/// namespace palisade labelled was deleted in the cluster, or `reserved: ...` for one recorded
/// before its name was reserved (SPEC 3.4 v3.2).
fn view(record: NamespaceRecord, reserved: &[String], action: Option<&str>) -> NamespaceView {
    let status = if record.gone_at.is_some() {
        namespace::gone_status(&record.name, &record.cluster)
    } else if namespace::is_reserved(&record.name, reserved) {
        namespace::reserved_status(&record.name, &record.cluster)
    } else {
        namespace::ACTIVE.to_owned()
    };
    NamespaceView {
        boundary: record.boundary,
        cluster: record.cluster,
        name: record.name,
        created_at: record.created_at,
        uid: record.uid,
        status,
        action: action.map(str::to_owned),
    }
}

/// A store failure on one namespace: `NotFound` names it.
fn namespace_error(error: StoreError, boundary: &str, cluster: &str, namespace: &str) -> AppError {
    match error {
        StoreError::NotFound => AppError::NotFound(format!(
            "namespace '{namespace}' of boundary '{boundary}' not found in cluster '{cluster}'"
        )),
        other => AppError::from_store(other, "namespace"),
    }
}

fn not_attached(boundary: &str, cluster: &str) -> AppError {
    AppError::NotFound(format!(
        "cluster '{cluster}' is not attached to boundary '{boundary}'"
    ))
}

fn label_error(cluster: &str, namespace: &str, error: ClusterError) -> AppError {
    match error {
        ClusterError::LabelledForOtherBoundary(other) => AppError::Conflict(format!(
            "namespace '{namespace}' in cluster '{cluster}' is labelled for boundary '{other}'"
        )),
        ClusterError::NamespaceExists(_) => AppError::Conflict(format!(
            "namespace '{namespace}' already exists in cluster '{cluster}' without a boundary \
             label; send {{\"adopt\": true}} to adopt it"
        )),
        other => AppError::ClusterUnavailable(format!(
            "cluster '{cluster}' could not label namespace '{namespace}': {other}"
        )),
    }
}

impl App {
    /// The names each cluster attached to the boundary reserves besides `default` and `kube-*`.
    async fn reserved_in(&self, boundary: &str) -> AppResult<BTreeMap<String, Vec<String>>> {
        let attached = self.attached_records(boundary).await?;
        Ok(attached
            .into_iter()
            .map(|c| (c.name, c.reserved_namespaces))
            .collect())
    }

    /// The attached cluster's record (404 when the cluster is not attached to the boundary).
    async fn attached_cluster(&self, boundary: &str, cluster: &str) -> AppResult<ClusterRecord> {
        let attached = self.attached_records(boundary).await?;
        attached
            .into_iter()
            .find(|c| c.name == cluster)
            .ok_or_else(|| not_attached(boundary, cluster))
    }

    /// Creates (or with `adopt`, labels) the namespace in an attached cluster
    /// (boundary-admin or admin). Answers it, with what happened, and whether palisade
    /// recorded it now.
    pub async fn put_namespace(
        &self,
        access: &Access,
        cluster: &str,
        namespace: &str,
        adopt: bool,
    ) -> AppResult<(NamespaceView, bool)> {
        access.caller().require_boundary_admin()?;
        // Adopting hands palisade something someone else made (SPEC 3.4 v3.2).
        if adopt && !access.caller().is_admin() {
            return Err(AppError::Forbidden(namespace::ADOPT_NEEDS_ADMIN.into()));
        }
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let boundary = access.boundary();
        crate::path_name("namespace", namespace)?;
        let record = self.attached_cluster(boundary, cluster).await?;
        let boundary_name = crate::path_name("boundary", boundary)?;
        if namespace::is_reserved(namespace, &record.reserved_namespaces) {
            return Err(AppError::Conflict(namespace::reserved_message(
                namespace, cluster,
            )));
        }
        // Another boundary's namespace is refused before the cluster is touched.
        let known = self
            .store
            .cluster_namespaces(cluster)
            .await
            .map_err(|e| AppError::from_store(e, "namespace"))?;
        if let Some(other) = known
            .iter()
            .find(|n| n.name == namespace && n.boundary != boundary)
        {
            return Err(AppError::Conflict(format!(
                "namespace '{namespace}' in cluster '{cluster}' belongs to boundary '{}'",
                other.boundary
            )));
        }
        let kubeconfig = self.kubeconfig_of(&record)?;
        let labelled = self
            .clusters()
            .label_namespace(&kubeconfig, &boundary_name, namespace, adopt)
            .await
            .map_err(|e| label_error(cluster, namespace, e))?;
        let created = self
            .store
            .put_namespace(boundary, cluster, namespace, labelled.uid.as_deref())
            .await
            .map_err(|e| match e {
                StoreError::NotFound => not_attached(boundary, cluster),
                other => AppError::from_store(other, "namespace"),
            })?;
        let stored = self
            .store
            .get_namespace(boundary, cluster, namespace)
            .await
            .map_err(|e| AppError::from_store(e, "namespace"))?;
        Ok((
            view(
                stored,
                &record.reserved_namespaces,
                Some(labelled.outcome.as_str()),
            ),
            created,
        ))
    }

    /// One namespace of the boundary.
    pub async fn get_namespace(
        &self,
        access: &Access,
        cluster: &str,
        namespace: &str,
    ) -> AppResult<NamespaceView> {
        let boundary = access.boundary();
        let record = self
            .store
            .get_namespace(boundary, cluster, namespace)
            .await
            .map_err(|e| namespace_error(e, boundary, cluster, namespace))?;
        let reserved = self.reserved_in(boundary).await?;
        let reserved = reserved.get(cluster).map_or(&[][..], Vec::as_slice);
        Ok(view(record, reserved, None))
    }

    /// A page of the boundary's namespaces, by cluster and name.
    pub async fn list_namespaces(
        &self,
        access: &Access,
        page: &PageRequest,
    ) -> AppResult<NamespaceList> {
        page.limit()?;
        let records = self
            .store
            .list_namespaces(access.boundary())
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        let reserved = self.reserved_in(access.boundary()).await?;
        let mut views: Vec<NamespaceView> = records
            .into_iter()
            .map(|r| {
                let names = reserved.get(&r.cluster).map_or(&[][..], Vec::as_slice);
                view(r, names, None)
            })
            .collect();
        views.sort_by(|a, b| (&a.cluster, &a.name).cmp(&(&b.cluster, &b.name)));
        // The key `<cluster>/<namespace>` orders as (cluster, namespace): names hold no `/`.
        let list = format!("namespaces of {}", access.boundary());
        let page = page.page(&self.continue_tokens(), &list, views, |n| {
            format!("{}/{}", n.cluster, n.name)
        })?;
        Ok(NamespaceList {
            items: page.items,
            continue_token: page.continue_token,
        })
    }

    /// Releases the namespace (boundary-admin or admin): its label is removed in the cluster,
    /// then palisade forgets it. 409 while workloads of the boundary are placed there: without
    /// the namespace they could not be deployed, and their objects would be taken away.
    pub async fn release_namespace(
        &self,
        access: &Access,
        cluster: &str,
        namespace: &str,
    ) -> AppResult<()> {
        access.caller().require_boundary_admin()?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let boundary = access.boundary();
        self.store
            .get_namespace(boundary, cluster, namespace)
            .await
            .map_err(|e| namespace_error(e, boundary, cluster, namespace))?;
        self.refuse_with_workloads(
            cluster,
            Placed::InNamespace {
                boundary,
                namespace,
            },
        )
        .await?;
        let record = self.find_cluster(cluster).await?;
        let boundary_name = crate::path_name("boundary", boundary)?;
        let kubeconfig = self.kubeconfig_of(&record)?;
        // The record goes first: the reconciler puts back the label of a namespace the store
        // still holds, so removing the label first could see it restored by a pass under way.
        self.store
            .delete_namespace(boundary, cluster, namespace)
            .await
            .map_err(|e| namespace_error(e, boundary, cluster, namespace))?;
        match self
            .clusters()
            .release_namespace(&kubeconfig, &boundary_name, namespace)
            .await
        {
            // Relabelled by a cluster admin meanwhile: nothing of ours to remove.
            Ok(()) | Err(ClusterError::LabelledForOtherBoundary(_)) => Ok(()),
            Err(other) => {
                // Nothing half-done: the namespace stays the boundary's, as it still is in the
                // cluster.
                if let Err(error) = self
                    .store
                    .put_namespace(boundary, cluster, namespace, None)
                    .await
                {
                    tracing::warn!(boundary, cluster, namespace, %error, "a namespace whose release failed is no longer registered");
                }
                Err(AppError::ClusterUnavailable(format!(
                    "cluster '{cluster}' could not release namespace '{namespace}': {other}"
                )))
            }
        }
    }
}
