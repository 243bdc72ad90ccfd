//! Clusters (platform-level, admin only) and their attachment to boundaries. Credentials are
//! checked by the one set of kubeconfig rules, stored sealed, and never returned.

use palisade_api_types::view::{Admission, ClusterLayout, ClusterList, ClusterView, Repair};
use palisade_store::{ClusterRecord, StoreError};

use crate::caller::{Access, Caller};
use crate::error::{AppError, AppResult};
use crate::paging::{ContinueTokens, PageRequest};
use crate::ports::ClusterError;
use crate::sealing::validate_kubeconfig;
use crate::App;

/// The cluster as the API shows it.
pub fn view(record: ClusterRecord) -> ClusterView {
    ClusterView {
        name: record.name,
        kubernetes_version: record.kubernetes_version,
        admission: Admission {
            enforced: record.admission_enforced.unwrap_or(false),
            reason: match record.admission_enforced {
                None => Some("not checked yet: palisade has not reached this cluster".into()),
                Some(_) => record.admission_reason,
            },
        },
        last_error: record.last_error,
        api_server_restarts: u64::try_from(record.apiserver_restarts).unwrap_or(0),
        api_server_restarted_at: record.apiserver_restarted_at,
        repairs: u64::try_from(record.repairs).unwrap_or(0),
        last_repair: record
            .last_repair
            .zip(record.last_repair_at)
            .map(|(message, at)| Repair { message, at }),
        layout: record
            .admission_layout
            .zip(record.admission_layout_reason)
            .map(|(name, reason)| ClusterLayout { name, reason }),
        reserved_namespaces: record.reserved_namespaces,
        reconciled_by: None,
        created_at: record.created_at,
        updated_at: record.updated_at,
    }
}

/// One page of `records`, in name order, of the list `list`.
fn cluster_page(
    tokens: &ContinueTokens,
    list: &str,
    mut records: Vec<ClusterRecord>,
    page: &PageRequest,
) -> AppResult<ClusterList> {
    records.sort_by(|a, b| a.name.cmp(&b.name));
    let page = page.page(tokens, list, records, |r| r.name.clone())?;
    Ok(ClusterList {
        items: page.items.into_iter().map(view).collect(),
        continue_token: page.continue_token,
    })
}

fn cluster_not_found(name: &str) -> AppError {
    AppError::NotFound(format!("cluster '{name}' not found"))
}

impl App {
    /// The cluster's kubeconfig, unsealed.
    pub(crate) fn kubeconfig_of(&self, record: &ClusterRecord) -> AppResult<String> {
        let plain = self.sealing.open(&record.kubeconfig_sealed).map_err(|e| {
            AppError::Internal(format!("cluster '{}' credentials: {e}", record.name))
        })?;
        String::from_utf8(plain)
            .map_err(|e| AppError::Internal(format!("cluster '{}' credentials: {e}", record.name)))
    }

    /// The cluster's record; 404 naming it when it is unknown.
    pub(crate) async fn find_cluster(&self, name: &str) -> AppResult<ClusterRecord> {
        self.store.get_cluster(name).await.map_err(|e| match e {
            StoreError::NotFound => cluster_not_found(name),
            other => AppError::from_store(other, "cluster"),
        })
    }

    /// Registers or replaces a cluster's credentials (admin). Answers the cluster and whether
    /// it was created.
    pub async fn put_cluster(
        &self,
        caller: &Caller,
        cluster: &str,
        kubeconfig: &str,
        reserved_namespaces: Option<&[String]>,
    ) -> AppResult<(ClusterView, bool)> {
        caller.require_admin()?;
        self.admit_write(caller, None)?;
        crate::path_name("cluster", cluster)?;
        let reserved = reserved_namespaces
            .map(palisade_policy::namespace::parse_reserved)
            .transpose()
            .map_err(AppError::InvalidRequest)?;
        // What is stored is the validated document itself (merge keys resolved), and the
        // adapter's own loader accepts it. Both read YAML: off the async workers.
        let text = kubeconfig.to_owned();
        let clusters = self.clusters.clone();
        // Read twice: once by palisade (`normalise`), once, as it was written out, by the
        // Kubernetes client's loader.
        let memory = palisade_api_types::yaml::peak_bound(&text).saturating_mul(2);
        let kubeconfig = self
            .off_workers(memory, move |_| {
                let kubeconfig = validate_kubeconfig(&text)?;
                clusters
                    .check_kubeconfig(&kubeconfig)
                    .map_err(|e| match e {
                        // `<pointer into the kubeconfig>: <why>`
                        ClusterError::Kubeconfig(why) => {
                            AppError::InvalidRequest(format!("/kubeconfig{why}"))
                        }
                        other => AppError::invalid("/kubeconfig", other),
                    })?;
                Ok::<_, AppError>(kubeconfig)
            })
            .await??;
        let sealed = self
            .sealing
            .seal(kubeconfig.as_bytes())
            .map_err(|e| AppError::Internal(e.to_string()))?;
        let created = self
            .store
            .put_cluster(cluster, &sealed, reserved.as_deref())
            .await
            .map_err(|e| AppError::from_store(e, "cluster"))?;
        let record = self
            .store
            .get_cluster(cluster)
            .await
            .map_err(|e| AppError::from_store(e, "cluster"))?;
        Ok((view(record), created))
    }

    /// A page of every cluster (admin).
    pub async fn list_clusters(
        &self,
        caller: &Caller,
        page: &PageRequest,
    ) -> AppResult<ClusterList> {
        caller.require_admin()?;
        page.limit()?;
        let records = self
            .store
            .list_clusters()
            .await
            .map_err(|e| AppError::from_store(e, "cluster"))?;
        let mut list = cluster_page(&self.continue_tokens(), "clusters", records, page)?;
        let holders = self.cluster_holders().await;
        for cluster in &mut list.items {
            cluster.reconciled_by = holders.get(&cluster.name).cloned();
        }
        Ok(list)
    }

    /// One cluster (admin).
    pub async fn get_cluster(&self, caller: &Caller, cluster: &str) -> AppResult<ClusterView> {
        caller.require_admin()?;
        let mut cluster = view(self.find_cluster(cluster).await?);
        cluster.reconciled_by = self.cluster_holders().await.remove(&cluster.name);
        Ok(cluster)
    }

    /// Which replica reconciles each cluster now; none known when the store cannot say (the
    /// clusters are shown without).
    async fn cluster_holders(&self) -> std::collections::BTreeMap<String, String> {
        let Ok(installation) = self.installation().await else {
            return Default::default();
        };
        self.store
            .cluster_holders(&installation)
            .await
            .unwrap_or_default()
    }

    /// Removes palisade's objects from the cluster (every boundary's policies, then the
    /// boundary-label guard), then forgets the cluster (admin). An unreachable cluster is a
    /// conflict unless `force`.
    pub async fn delete_cluster(
        &self,
        caller: &Caller,
        cluster: &str,
        force: bool,
    ) -> AppResult<()> {
        caller.require_admin()?;
        self.admit_write(caller, None)?;
        let record = self.find_cluster(cluster).await?;
        self.refuse_with_workloads(cluster, Placed::InCluster)
            .await?;
        let installation = self.installation().await?;
        let removed = match self.kubeconfig_of(&record) {
            Ok(kubeconfig) => self
                .clusters()
                .remove_installation(&kubeconfig, &installation)
                .await
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match removed {
            Ok(names) => tracing::info!(cluster, removed = ?names, "palisade's objects removed"),
            Err(reason) if force => {
                tracing::warn!(
                    cluster,
                    reason,
                    "cluster forgotten without removing palisade's objects (force)"
                );
            }
            Err(reason) => {
                return Err(AppError::Conflict(format!(
                    "cluster '{cluster}': palisade's objects cannot be removed ({reason}); \
                     retry when it is reachable, or add ?force=true to forget it and leave them"
                )))
            }
        }
        self.store
            .delete_cluster(cluster)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => cluster_not_found(cluster),
                other => AppError::from_store(other, "cluster"),
            })?;
        // A pass that ran meanwhile may have put objects back: sweep once more.
        if let Ok(kubeconfig) = self.kubeconfig_of(&record) {
            if let Err(error) = self
                .clusters()
                .remove_installation(&kubeconfig, &installation)
                .await
            {
                tracing::warn!(cluster, %error, "second sweep after forgetting the cluster failed");
            }
        }
        Ok(())
    }

    /// The records of the clusters attached to the boundary; 404 naming the boundary.
    pub(crate) async fn attached_records(&self, boundary: &str) -> AppResult<Vec<ClusterRecord>> {
        self.store
            .boundary_clusters(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))
    }

    /// A page of the clusters attached to the boundary (boundary-admin or admin).
    pub async fn attached_clusters(
        &self,
        access: &Access,
        page: &PageRequest,
    ) -> AppResult<ClusterList> {
        access.caller().require_boundary_admin()?;
        page.limit()?;
        let records = self.attached_records(access.boundary()).await?;
        let list = format!("clusters of {}", access.boundary());
        cluster_page(&self.continue_tokens(), &list, records, page)
    }

    /// Attaches a cluster to the boundary (admin).
    pub async fn attach_cluster(&self, access: &Access, cluster: &str) -> AppResult<ClusterView> {
        access.caller().require_admin()?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        self.store
            .attach_cluster(access.boundary(), cluster)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => cluster_not_found(cluster),
                other => AppError::from_store(other, "cluster"),
            })?;
        let record = self
            .store
            .get_cluster(cluster)
            .await
            .map_err(|e| AppError::from_store(e, "cluster"))?;
        Ok(view(record))
    }

    /// Detaches a cluster from the boundary (admin).
    pub async fn detach_cluster(&self, access: &Access, cluster: &str) -> AppResult<()> {
        access.caller().require_admin()?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let boundary = access.boundary();
        self.refuse_with_workloads(cluster, Placed::OfBoundary(boundary))
            .await?;
        self.store
            .detach_cluster(boundary, cluster)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => AppError::NotFound(format!(
                    "cluster '{cluster}' is not attached to boundary '{boundary}'"
                )),
                other => AppError::from_store(other, "cluster"),
            })
    }
}

/// Where the workloads a refusal looks for are placed.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Placed<'a> {
    /// Anywhere in the cluster.
    InCluster,
    /// In the cluster, of this boundary.
    OfBoundary(&'a str),
    /// In this namespace of the cluster, of this boundary.
    InNamespace {
        boundary: &'a str,
        namespace: &'a str,
    },
}

impl Placed<'_> {
    fn holds(&self, record: &palisade_store::ResourceRecord) -> bool {
        match *self {
            Placed::InCluster => true,
            Placed::OfBoundary(boundary) => record.boundary == boundary,
            Placed::InNamespace {
                boundary,
                namespace,
            } => {
                record.boundary == boundary
                    && serde_json::from_str::<serde_json::Value>(&record.body_json)
                        .ok()
                        .and_then(|body| body.get("namespace")?.as_str().map(str::to_owned))
                        .is_some_and(|placed| placed == namespace)
            }
        }
    }
}

impl App {
    /// 409 while workloads (where `placed` says) run in the cluster: their objects there would
    /// be left behind or taken away without anyone asking.
    pub(crate) async fn refuse_with_workloads(
        &self,
        cluster: &str,
        placed: Placed<'_>,
    ) -> AppResult<()> {
        let found: Vec<String> = self
            .store
            .resources_in_cluster(cluster)
            .await
            .map_err(|e| AppError::from_store(e, "cluster"))?
            .into_iter()
            .filter(|r| placed.holds(r))
            .map(|r| format!("{}/{}/{}", r.boundary, r.resource_type, r.name))
            .collect();
        if found.is_empty() {
            return Ok(());
        }
        let shown: Vec<&str> = found.iter().take(5).map(String::as_str).collect();
        let more = if found.len() > shown.len() {
            format!(" and {} more", found.len() - shown.len())
        } else {
            String::new()
        };
        let (place, elsewhere) = match placed {
            Placed::InNamespace { namespace, .. } => (
                format!("namespace '{namespace}' in cluster '{cluster}'"),
                "another namespace",
            ),
            _ => (format!("cluster '{cluster}'"), "another cluster"),
        };
        Err(AppError::Conflict(format!(
            "{place} runs {} workload(s): {}{more}; delete them or move them to {elsewhere} first",
            found.len(),
            shown.join(", ")
        )))
    }
}
