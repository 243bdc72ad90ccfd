//! Resources of a boundary and the plan picker: where the compute-plan rule is enforced.
//! A create, or a merge patch that moves a plan (container-instance components matched by
//! name), is checked inside the write's transaction; functions are never checked but carry a
//! `Warning`; any other change succeeds on a now-disallowed plan (grandfathering).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use palisade_api_types::resource::{merge_patch, Resource};
use palisade_api_types::view::{Picker, PickerPlan, ResourceList, ResourceView, WorkloadStatus};
use palisade_policy::compute_plan::{decide, picker_options, plan_checks, PlanCheck, Plans};
use palisade_policy::{Name, PlanName, Policy, ResourceType};
use palisade_store::{
    Edit, Guard, NewResource, PlanGroup, ResourceKey, ResourceQuery, ResourceRecord, StoreError,
};
use tokio::time::Instant;

use crate::caller::Access;
use crate::error::{boundary_not_found, AppError, AppResult};
use crate::paging::PageRequest;
use crate::plans::{count_decision, outcome_of, PlanGuard, WarningSink};
use crate::uploads::upload_missing;
use crate::workloads::{place, Placements};
use crate::App;

/// A resource as written, with the `Warning` texts of the write (audit policies, functions).
#[derive(Clone, Debug)]
pub struct Written {
    pub view: ResourceView,
    pub warnings: Vec<palisade_policy::Warning>,
}

/// What a resource list asks for.
#[derive(Clone, Debug, Default)]
pub struct ResourceFilter {
    /// Only resources of this type (as given; checked here).
    pub resource_type: Option<String>,
    /// Only resources whose current plan the policies now disallow.
    pub grandfathered: bool,
}

/// The resource as the API shows it.
pub fn view(record: ResourceRecord, denied_by: Option<Vec<String>>) -> ResourceView {
    let status = status_of(&record);
    ResourceView {
        body: serde_json::from_str(&record.body_json).unwrap_or(serde_json::Value::Null),
        boundary: record.boundary,
        etag: record.etag,
        created_at: record.created_at,
        updated_at: record.updated_at,
        status,
        denied_by,
    }
}

/// A workload's status: what its cluster said, `deploying` until the reconciler has acted,
/// and for a workload with nowhere to run, why. Other types have none. A stored status that
/// cannot be read (only the reconciler writes them, from the same type) counts as none yet.
pub(crate) fn status_of(record: &ResourceRecord) -> Option<WorkloadStatus> {
    if let Some(text) = &record.status {
        match text.parse() {
            Ok(status) => return Some(status),
            Err(error) => tracing::warn!(
                boundary = %record.boundary,
                resource = %record.name,
                %error,
                "stored workload status unreadable"
            ),
        }
    }
    let workload = ResourceType::parse(&record.resource_type).is_ok_and(ResourceType::is_workload);
    match (&record.cluster, workload) {
        (Some(_), _) => Some(WorkloadStatus::Deploying),
        (None, true) => Some(WorkloadStatus::NotDeployed(
            palisade_policy::reason::no_placement(&record.boundary),
        )),
        (None, false) => None,
    }
}

fn stored_resource(record: &ResourceRecord) -> AppResult<Resource> {
    serde_json::from_str(&record.body_json).map_err(|e| {
        AppError::Internal(format!(
            "stored resource {}/{}/{} cannot be decoded: {e}",
            record.boundary, record.resource_type, record.name
        ))
    })
}

/// The plans a stored resource runs on (one per component of a container instance); none
/// when its body cannot be read.
pub(crate) fn plans_of(record: &ResourceRecord) -> Vec<PlanName> {
    let Ok(resource) = stored_resource(record) else {
        return Vec::new();
    };
    match resource.plans() {
        Plans::Single(plan) => vec![plan],
        Plans::Components(list) => list.into_iter().map(|(_, plan)| plan).collect(),
        Plans::None => Vec::new(),
    }
}

/// The plans of a group of resources (see [`PlanGroup`]) as the core names them; a name that
/// is not a plan is left out, as [`plans_of`] leaves it out of a body.
pub(crate) fn group_plans(group: &PlanGroup) -> Vec<PlanName> {
    group
        .plans
        .iter()
        .filter_map(|plan| PlanName::parse(plan).ok())
        .collect()
}

/// A resource body as stored; a body that cannot be written is an error, never `""`.
fn body_json(resource: &Resource) -> AppResult<String> {
    serde_json::to_string(resource)
        .map_err(|e| AppError::Internal(format!("resource cannot be encoded: {e}")))
}

fn resource_key(access: &Access, resource_type: &str, name: &str) -> AppResult<ResourceKey> {
    let key = ResourceKey {
        boundary: access.boundary().to_owned(),
        resource_type: resource_type.to_owned(),
        name: name.to_owned(),
    };
    match ResourceType::parse(resource_type) {
        Ok(_) => Ok(key),
        Err(_) => Err(resource_not_found(&key)),
    }
}

/// `NotFound` unless `resource_type` names a type: a resource of an unknown type is an
/// unknown resource, answered before anything else about the request is looked at.
pub fn known_type(access: &Access, resource_type: &str, name: &str) -> AppResult<()> {
    resource_key(access, resource_type, name).map(|_| ())
}

fn resource_not_found(key: &ResourceKey) -> AppError {
    AppError::NotFound(format!(
        "{} '{}' not found in boundary '{}'",
        key.resource_type, key.name, key.boundary
    ))
}

impl App {
    /// Reads and decodes the boundary's policies outside a write (picker, functions, lists).
    pub async fn read_policies(&self, boundary: &str) -> AppResult<Vec<Policy>> {
        let records = tokio::time::timeout(self.policy_timeout, self.store.list_policies(boundary))
            .await
            .map_err(|_| AppError::PolicyUnavailable("policy read timed out".into()))?
            .map_err(|e| AppError::from_store_on_plan_path(e, "boundary"))?;
        self.policy_cache().decode_all(&records, &self.catalog)
    }

    /// The boundary's resources in `groups`, in (type, name) order, after the one the
    /// continue token `after` (`<type>/<name>`) names: the first `want` of them, or all with
    /// `None`. Each group is one range of an index read for at most `want` rows, so what this
    /// reads grows with `want` and the groups, not with the boundary.
    pub(crate) async fn resources_in_groups(
        &self,
        boundary: &str,
        groups: &[&PlanGroup],
        after: Option<&str>,
        want: Option<usize>,
    ) -> Result<Vec<ResourceRecord>, StoreError> {
        let mut out = Vec::new();
        if want == Some(0) {
            return Ok(out);
        }
        for group in groups {
            let query = ResourceQuery {
                resource_type: Some(group.resource_type.clone()),
                // 0: the whole group.
                limit: want.unwrap_or(0),
                after: after.map(str::to_owned),
                plans: Some(group.plans.clone()),
            };
            out.extend(self.store.list_resources(boundary, &query).await?.items);
        }
        out.sort_by(|a, b| (&a.resource_type, &a.name).cmp(&(&b.resource_type, &b.name)));
        if let Some(want) = want {
            out.truncate(want);
        }
        Ok(out)
    }

    /// The `Warning` for a function whose plan changes (never a refusal).
    async fn function_warnings(
        &self,
        boundary: &str,
        checks: &[PlanCheck],
    ) -> Vec<palisade_policy::Warning> {
        if checks.is_empty() {
            return Vec::new();
        }
        let policies = match self.read_policies(boundary).await {
            Ok(policies) => policies,
            Err(_) => {
                count_decision("function", "unavailable");
                return vec![palisade_policy::Warning::FunctionPlanUnchecked];
            }
        };
        let mut warnings = Vec::new();
        for check in checks {
            if let Ok(decision) = decide(
                &policies,
                &self.catalog,
                ResourceType::Function,
                &check.plan,
            ) {
                count_decision("function", "not_enforced");
                if !decision.allowed {
                    warnings.push(palisade_policy::Warning::FunctionPlanNotEnforced {
                        plan: check.plan.to_string(),
                        policies: decision.denied_by.iter().map(ToString::to_string).collect(),
                    });
                }
            }
        }
        warnings
    }

    /// Creates a resource: validation (400), name (409), then, for a checked type, the plan
    /// check inside the write's transaction (503, 422). The store gives up before its commit
    /// when `deadline` passes (nothing written); a commit under way decides the answer.
    pub async fn create_resource(
        &self,
        access: &Access,
        value: &serde_json::Value,
        deadline: Instant,
    ) -> AppResult<Written> {
        let boundary = access.boundary();
        self.admit_write(access.caller(), Some(boundary))?;
        let (mut resource, ty) = Resource::from_value(value, &self.catalog, None)
            .map_err(|e| AppError::InvalidRequest(e.to_string()))?;
        let cluster = if ty.is_workload() {
            let placements = self.placements(boundary).await?;
            if let Some(upload) = &resource.upload {
                self.check_upload(boundary, upload).await?;
            }
            place(&mut resource, ty, boundary, &placements)?
        } else {
            None
        };
        let checks = plan_checks(None, &resource.plans());
        let sink = WarningSink::default();
        let guard = (ty.is_plan_checked() && !checks.is_empty()).then(|| {
            let guard: Guard = Box::new(PlanGuard {
                cache: self.policies_arc(),
                catalog: self.catalog.clone(),
                ty,
                name: resource.name.clone(),
                checks: checks.clone(),
                sink: sink.clone(),
            });
            guard
        });
        let guarded = guard.is_some();
        let new = NewResource {
            boundary: boundary.to_owned(),
            resource_type: ty.as_str().to_owned(),
            name: resource.name.clone(),
            body_json: body_json(&resource)?,
            cluster: cluster.clone(),
            upload: resource.upload.clone(),
        };
        let result = self
            .store
            .create_resource(new, guard, Some(deadline.into_std()))
            .await
            .map_err(|e| match e {
                StoreError::Conflict(_) => AppError::Conflict(format!(
                    "{ty} '{}' already exists in boundary '{boundary}'",
                    resource.name
                )),
                StoreError::NotFound => boundary_not_found(boundary),
                StoreError::UploadMissing(upload) => upload_missing(boundary, &upload),
                other if guarded => AppError::from_store_on_plan_path(other, "resource"),
                other => AppError::from_store(other, "resource"),
            });
        let record = match result {
            Ok(done) => done,
            Err(error) => {
                if guarded {
                    count_decision(ty.as_str(), outcome_of(&error));
                }
                return Err(error);
            }
        };
        if guarded {
            count_decision(ty.as_str(), "allowed");
        }
        // The guard's warnings, from its last answer.
        let mut warnings = sink.lock().map(|w| w.clone()).unwrap_or_default();
        if ty == ResourceType::Function {
            warnings.extend(self.function_warnings(boundary, &checks).await);
            if let (Some(cluster), Some(_)) = (&cluster, &resource.upload) {
                warnings.extend(self.latest_builder_warnings(boundary, cluster).await);
            }
        }
        warnings.extend(self.platform_image_warnings(&record).await);
        Ok(Written {
            view: view(record, None),
            warnings,
        })
    }

    /// Applies a JSON merge patch to a resource. A change that moves a plan is checked inside
    /// the write's transaction; any other change succeeds, even on a now-disallowed plan.
    pub async fn patch_resource(
        &self,
        access: &Access,
        resource_type: &str,
        name: &str,
        if_match: Option<&str>,
        patch: serde_json::Value,
        deadline: Instant,
    ) -> AppResult<Written> {
        let key = resource_key(access, resource_type, name)?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        if !patch.is_object() {
            return Err(AppError::InvalidRequest(format!(
                "the body must be a JSON merge patch object, got {}",
                palisade_api_types::resource::json_kind(&patch)
            )));
        }
        let plan_path = moves_a_plan(&patch);
        let workload = ResourceType::parse(resource_type).is_ok_and(ResourceType::is_workload);
        let placements = if workload {
            if let Some(upload) = patch.get("upload").and_then(serde_json::Value::as_str) {
                self.check_upload(&key.boundary, upload).await?;
            }
            self.placements(&key.boundary).await?
        } else {
            Placements::default()
        };
        let patch_sets_upload = patch.get("upload").is_some_and(|u| !u.is_null());
        let boundary = key.boundary.clone();
        let catalog = self.catalog.clone();
        let cache = self.policies_arc();
        let function_checks = Arc::new(Mutex::new(Vec::new()));
        let function_checks_out = function_checks.clone();
        let guarded = Arc::new(AtomicBool::new(false));
        let guarded_out = guarded.clone();
        let sink = WarningSink::default();
        let sink_out = sink.clone();
        let editor: palisade_store::Editor = Box::new(move |current: &ResourceRecord| {
            let veto = |e: AppError| -> palisade_store::Veto { Box::new(e) };
            let old = stored_resource(current).map_err(veto)?;
            let mut merged =
                serde_json::to_value(&old).map_err(|e| veto(AppError::Internal(e.to_string())))?;
            merge_patch(&mut merged, &patch);
            for field in ["type", "name"] {
                let before = if field == "type" {
                    &old.resource_type
                } else {
                    &old.name
                };
                if merged.get(field).and_then(serde_json::Value::as_str) != Some(before.as_str()) {
                    return Err(veto(AppError::invalid(
                        &format!("/{field}"),
                        format!(
                            "cannot be changed (it is '{before}'); create a new resource instead"
                        ),
                    )));
                }
            }
            let (mut new, ty) = Resource::from_value(&merged, &catalog, Some(&old))
                .map_err(|e| veto(AppError::InvalidRequest(e.to_string())))?;
            let cluster = place(&mut new, ty, &boundary, &placements).map_err(veto)?;
            let checks = plan_checks(Some(&old.plans()), &new.plans());
            let guard = if ty.is_plan_checked() && !checks.is_empty() {
                guarded.store(true, Ordering::Relaxed);
                let guard: Guard = Box::new(PlanGuard {
                    cache: cache.clone(),
                    catalog: catalog.clone(),
                    ty,
                    name: new.name.clone(),
                    checks,
                    sink: sink.clone(),
                });
                Some(guard)
            } else {
                if ty == ResourceType::Function {
                    if let Ok(mut out) = function_checks.lock() {
                        *out = checks;
                    }
                }
                None
            };
            Ok(Edit {
                body_json: body_json(&new).map_err(veto)?,
                guard,
                cluster,
                upload: new.upload.clone(),
            })
        });
        let result = self
            .store
            .update_resource(&key, if_match, editor, Some(deadline.into_std()))
            .await;
        let was_guarded = guarded_out.load(Ordering::Relaxed);
        let result = match result {
            Err(StoreError::NotFound) => Err(resource_not_found(&key)),
            Err(StoreError::UploadMissing(upload)) => Err(upload_missing(&key.boundary, &upload)),
            Err(e) if plan_path || was_guarded => {
                Err(AppError::from_store_on_plan_path(e, "resource"))
            }
            Err(e) => Err(AppError::from_store(e, "resource")),
            Ok(done) => Ok(done),
        };
        let record = match result {
            Ok(done) => done,
            Err(error) => {
                if was_guarded {
                    count_decision(&key.resource_type, outcome_of(&error));
                }
                return Err(error);
            }
        };
        if was_guarded {
            count_decision(&key.resource_type, "allowed");
        }
        let mut warnings = sink_out.lock().map(|w| w.clone()).unwrap_or_default();
        let checks = function_checks_out
            .lock()
            .map(|c| c.clone())
            .unwrap_or_default();
        warnings.extend(self.function_warnings(&key.boundary, &checks).await);
        if key.resource_type == ResourceType::Function.as_str() && patch_sets_upload {
            if let Some(cluster) = &record.cluster {
                warnings.extend(self.latest_builder_warnings(&key.boundary, cluster).await);
            }
        }
        warnings.extend(self.platform_image_warnings(&record).await);
        Ok(Written {
            view: view(record, None),
            warnings,
        })
    }

    /// One resource.
    pub async fn get_resource(
        &self,
        access: &Access,
        resource_type: &str,
        name: &str,
    ) -> AppResult<ResourceView> {
        let record = self.resource_record(access, resource_type, name).await?;
        Ok(view(record, None))
    }

    /// One resource as stored; 404 naming it when the caller's boundary has none such.
    pub(crate) async fn resource_record(
        &self,
        access: &Access,
        resource_type: &str,
        name: &str,
    ) -> AppResult<ResourceRecord> {
        let key = resource_key(access, resource_type, name)?;
        self.store.get_resource(&key).await.map_err(|e| match e {
            StoreError::NotFound => resource_not_found(&key),
            other => AppError::from_store(other, "resource"),
        })
    }

    /// Deletes a resource (`if_match`: the etag the caller read).
    pub async fn delete_resource(
        &self,
        access: &Access,
        resource_type: &str,
        name: &str,
        if_match: Option<&str>,
    ) -> AppResult<()> {
        let key = resource_key(access, resource_type, name)?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        self.store
            .delete_resource(&key, if_match)
            .await
            .map_err(|e| match e {
                StoreError::NotFound => resource_not_found(&key),
                other => AppError::from_store(other, "resource"),
            })
    }

    /// A page of the boundary's resources; with `grandfathered`, only those whose current
    /// plan the policies now disallow, each with the policies that do.
    pub async fn list_resources(
        &self,
        access: &Access,
        filter: &ResourceFilter,
        page: &PageRequest,
    ) -> AppResult<ResourceList> {
        let boundary = access.boundary();
        if let Some(ty) = &filter.resource_type {
            ResourceType::parse(ty).map_err(|e| AppError::invalid("/type", e))?;
        }
        let limit = page.limit()?;
        // One list, of which the grandfathered resources are a view: they share its tokens.
        let tokens = self.continue_tokens();
        let list = format!("resources of {boundary}");
        let after = page.after(&tokens, &list)?;
        let store_error = |e| match e {
            // A key the store cannot read (the tokens are issued by this list, so only a
            // token of an older format).
            StoreError::NotFound => {
                AppError::invalid("/continue", "is not a continue token of this list")
            }
            other => AppError::from_store(other, "resource"),
        };
        if !filter.grandfathered {
            let query = ResourceQuery {
                resource_type: filter.resource_type.clone(),
                limit,
                after,
                plans: None,
            };
            let found = self
                .store
                .list_resources(boundary, &query)
                .await
                .map_err(store_error)?;
            let continue_token = match found.next {
                Some(key) => Some(tokens.issue(&list, &key)?),
                None => None,
            };
            return Ok(ResourceList {
                items: found.items.into_iter().map(|r| view(r, None)).collect(),
                continue_token,
            });
        }
        // Grandfathered: the resources of the sets of plans the policies now disallow, from
        // the first after `continue`, one more than the page (to know whether more follow).
        let policies = self.read_policies(boundary).await?;
        if after.as_deref().is_some_and(|key| !key.contains('/')) {
            return Err(store_error(StoreError::NotFound));
        }
        let groups = self
            .store
            .plan_groups(boundary)
            .await
            .map_err(store_error)?;
        let grandfathered: Vec<&PlanGroup> = groups
            .iter()
            .filter(|group| {
                filter
                    .resource_type
                    .as_ref()
                    .is_none_or(|ty| *ty == group.resource_type)
                    && self.group_denied_now(&policies, group)
            })
            .collect();
        let records = self
            .resources_in_groups(boundary, &grandfathered, after.as_deref(), Some(limit + 1))
            .await
            .map_err(store_error)?;
        let items: Vec<(String, ResourceView)> = records
            .into_iter()
            .filter_map(|record| {
                let denied = self.denied_by_now(&policies, &record);
                (!denied.is_empty()).then(|| {
                    let key = format!("{}/{}", record.resource_type, record.name);
                    (key, view(record, Some(denied)))
                })
            })
            .collect();
        // The reads already started after `continue`: page the matches by their keys.
        let listed = PageRequest {
            limit: page.limit,
            continue_token: None,
        }
        .page(&tokens, &list, items, |(key, _)| key.clone())?;
        Ok(ResourceList {
            items: listed.items.into_iter().map(|(_, v)| v).collect(),
            continue_token: listed.continue_token,
        })
    }

    /// The enforce-mode policies that now disallow a resource's current plans.
    pub fn denied_by_now(&self, policies: &[Policy], record: &ResourceRecord) -> Vec<String> {
        let Ok(ty) = ResourceType::parse(&record.resource_type) else {
            return Vec::new();
        };
        if !ty.is_plan_checked() {
            return Vec::new();
        }
        let mut names = BTreeSet::new();
        for plan in plans_of(record) {
            if let Ok(decision) = decide(policies, &self.catalog, ty, &plan) {
                names.extend(decision.denied_by.iter().map(Name::to_string));
            }
        }
        names.into_iter().collect()
    }

    /// Whether the enforce-mode policies now disallow a plan of the resources of `group`: as
    /// [`App::denied_by_now`] answers for each of them, from the plans alone.
    pub(crate) fn group_denied_now(&self, policies: &[Policy], group: &PlanGroup) -> bool {
        let Ok(ty) = ResourceType::parse(&group.resource_type) else {
            return false;
        };
        ty.is_plan_checked()
            && group_plans(group).iter().any(|plan| {
                decide(policies, &self.catalog, ty, plan)
                    .is_ok_and(|decision| !decision.denied_by.is_empty())
            })
    }

    /// The plan picker for `resource_type` (as given; checked here): every plan of the
    /// type, allowed or not, with the reason.
    pub async fn picker(&self, access: &Access, resource_type: Option<&str>) -> AppResult<Picker> {
        let text = resource_type
            .ok_or_else(|| AppError::invalid("/type", "is required, e.g. ?type=app"))?;
        let ty = ResourceType::parse(text).map_err(|e| AppError::invalid("/type", e))?;
        if !ty.has_plans() {
            return Err(AppError::invalid("/type", format!("{ty} has no plans")));
        }
        let policies = self.read_policies(access.boundary()).await?;
        let plans = picker_options(&policies, &self.catalog, ty)
            .into_iter()
            .map(|option| PickerPlan {
                name: option.plan.name.to_string(),
                cpu: option.plan.cpu,
                memory: option.plan.memory_display(),
                allowed: option.allowed,
                reason: option.reason(),
                audit_warning: option.audit_warning(),
            })
            .collect();
        Ok(Picker {
            resource_type: ty.as_str().to_owned(),
            enforced: ty.is_plan_checked(),
            plans,
        })
    }
}

/// Whether a merge patch can move a plan (it names `plan` or `components`); decides how a
/// store failure on it is answered.
pub fn moves_a_plan(patch: &serde_json::Value) -> bool {
    patch.get("plan").is_some() || patch.get("components").is_some()
}
