//! The boundary overview the portal shows: its clusters with their admission status, its
//! policies with their install status per cluster, a page of its resources, and the
//! grandfathered ones (of the whole boundary, found by the plans they name without reading
//! the others, each with the policies that now disallow it). Read once; whoever renders it
//! does no I/O.

use palisade_api_types::view::{ClusterLayout, ClusterStatus, InstallStatus};
use palisade_api_types::PolicySpec;
use palisade_store::{ClusterRecord, PolicyRecord, ResourceQuery, ResourceRecord};

use crate::caller::{Access, Caller};
use crate::error::{AppError, AppResult};
use crate::App;

/// Resources per page of the overview.
pub const RESOURCES_PER_PAGE: usize = 1000;

/// Whether a cluster enforces admission rules, as palisade last observed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterAdmission {
    /// palisade has not reached the cluster yet.
    NotChecked,
    Enforced,
    /// The cluster cannot enforce them, and why.
    NotEnforced(String),
}

/// An attached cluster as the overview shows it.
#[derive(Clone, Debug)]
pub struct ClusterRow {
    pub name: String,
    pub kubernetes_version: Option<String>,
    pub admission: ClusterAdmission,
    /// Why the last reconcile of the cluster failed; `None` after a success.
    pub last_error: Option<String>,
    /// The admission layout in use there and why; `None` until the reconciler has said.
    pub layout: Option<ClusterLayout>,
    /// What palisade last found changed there by someone else and put back, and when.
    pub last_repair: Option<palisade_api_types::view::Repair>,
}

impl ClusterRow {
    fn of(record: ClusterRecord) -> ClusterRow {
        ClusterRow {
            admission: match record.admission_enforced {
                None => ClusterAdmission::NotChecked,
                Some(true) => ClusterAdmission::Enforced,
                Some(false) => ClusterAdmission::NotEnforced(
                    record
                        .admission_reason
                        .unwrap_or_else(|| "no reason recorded".to_owned()),
                ),
            },
            layout: record
                .admission_layout
                .zip(record.admission_layout_reason)
                .map(|(name, reason)| ClusterLayout { name, reason }),
            last_repair: record
                .last_repair
                .zip(record.last_repair_at)
                .map(|(message, at)| palisade_api_types::view::Repair { message, at }),
            name: record.name,
            kubernetes_version: record.kubernetes_version,
            last_error: record.last_error,
        }
    }

    /// Whether a policy's status there already says the cluster's own reason (the reconciler
    /// writes the cluster's reason into every policy's status), so it is shown once.
    pub fn says_own_reason(&self, status: &InstallStatus) -> bool {
        match (&self.admission, status) {
            (ClusterAdmission::NotEnforced(own), InstallStatus::NotEnforced(reason)) => {
                own == reason
            }
            _ => false,
        }
    }
}

/// A stored policy as the overview shows it.
#[derive(Clone, Debug)]
pub struct PolicyRow {
    pub name: String,
    /// `None` when the stored spec cannot be decoded.
    pub spec: Option<PolicySpec>,
    /// Install status per attached cluster in scope.
    pub install: Vec<ClusterStatus>,
    /// The staged rollout of its current version (SPEC 8), if it had one.
    pub rollout: Option<palisade_api_types::view::RolloutView>,
}

/// One resource as the overview lists it.
#[derive(Clone, Debug)]
pub struct ResourceRow {
    pub resource_type: String,
    pub name: String,
    /// `medium`, or `worker: small, sidecar: small` for container instances; "" without plans.
    pub plans: String,
    /// Workloads: what the cluster says (as the API's `status`); `None` for other types.
    pub status: Option<palisade_api_types::view::WorkloadStatus>,
}

impl ResourceRow {
    fn of(record: &ResourceRecord) -> ResourceRow {
        let body: serde_json::Value =
            serde_json::from_str(&record.body_json).unwrap_or(serde_json::Value::Null);
        let plans = match (body.get("plan"), body.get("components")) {
            (Some(plan), _) => plan.as_str().unwrap_or("").to_owned(),
            (None, Some(serde_json::Value::Array(components))) => components
                .iter()
                .map(|c| {
                    format!(
                        "{}: {}",
                        c.get("name").and_then(|v| v.as_str()).unwrap_or(""),
                        c.get("plan").and_then(|v| v.as_str()).unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
            _ => String::new(),
        };
        ResourceRow {
            resource_type: record.resource_type.clone(),
            name: record.name.clone(),
            plans,
            status: crate::resources::status_of(record),
        }
    }
}

/// Everything the boundary overview shows.
#[derive(Debug)]
pub struct Overview {
    pub caller: Caller,
    pub name: String,
    pub display_name: Option<String>,
    /// `None` for developers: cluster status is for admins and boundary-admins (SPEC 4.1).
    pub clusters: Option<Vec<ClusterRow>>,
    pub policies: Vec<PolicyRow>,
    pub resources: Vec<ResourceRow>,
    /// The `after` token of the next page of resources.
    pub next_page: Option<String>,
    /// Grandfathered resources and the policies that now disallow them; an error when the
    /// policies cannot be read.
    pub grandfathered: Result<Vec<(ResourceRow, Vec<String>)>, AppError>,
    /// The boundary's exceptions (SPEC 7), by name, with their status.
    pub exceptions: Vec<palisade_api_types::view::ExceptionView>,
}

impl App {
    /// The boundary's overview as the caller may see it; `after`: the page of resources.
    pub async fn overview(&self, access: &Access, after: Option<String>) -> AppResult<Overview> {
        let boundary = access.boundary();
        let caller = access.caller();
        let record = self
            .store
            .get_boundary(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        let clusters = if caller.require_boundary_admin().is_ok() {
            let records = self.attached_records(boundary).await?;
            Some(records.into_iter().map(ClusterRow::of).collect())
        } else {
            None
        };
        let records: Vec<PolicyRecord> = self
            .store
            .list_policies(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        let mut statuses = self.statuses(boundary, &records).await?;
        let policies = records
            .iter()
            .map(|r| PolicyRow {
                name: r.name.clone(),
                spec: serde_json::from_str(&r.spec_json).ok(),
                install: statuses
                    .remove(&r.name)
                    .map(|s| s.clusters)
                    .unwrap_or_default(),
                rollout: self.rollout_of(r),
            })
            .collect();
        let page = self
            .store
            .list_resources(
                boundary,
                &ResourceQuery {
                    resource_type: None,
                    limit: RESOURCES_PER_PAGE,
                    after: after.clone(),
                    plans: None,
                },
            )
            .await
            .map_err(|e| AppError::from_store(e, "resource"))?;
        let resources = page.items.iter().map(ResourceRow::of).collect();
        let grandfathered = match self.policy_cache().decode_all(&records, &self.catalog) {
            Err(error) => Err(error),
            Ok(decoded) => {
                // Grandfathering is about the whole boundary, not this page of it: beyond the
                // page, the resources of the sets of plans the policies disallow.
                let whole = if after.is_none() && page.next.is_none() {
                    page.items.clone()
                } else {
                    self.grandfathered_records(boundary, &decoded).await?
                };
                Ok(whole
                    .iter()
                    .filter_map(|record| {
                        let denied = self.denied_by_now(&decoded, record);
                        (!denied.is_empty()).then(|| (ResourceRow::of(record), denied))
                    })
                    .collect())
            }
        };
        let exceptions = self.exceptions(access).await?;
        Ok(Overview {
            caller: caller.clone(),
            name: record.name,
            display_name: record.display_name,
            clusters,
            policies,
            resources,
            next_page: page.next,
            grandfathered,
            exceptions,
        })
    }

    /// Every resource of the boundary whose plans the policies now disallow, in (type, name)
    /// order; the others are not read.
    async fn grandfathered_records(
        &self,
        boundary: &str,
        policies: &[palisade_policy::Policy],
    ) -> AppResult<Vec<ResourceRecord>> {
        let groups = self
            .store
            .plan_groups(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "resource"))?;
        let grandfathered: Vec<_> = groups
            .iter()
            .filter(|group| self.group_denied_now(policies, group))
            .collect();
        self.resources_in_groups(boundary, &grandfathered, None, None)
            .await
            .map_err(|e| AppError::from_store(e, "resource"))
    }
}
