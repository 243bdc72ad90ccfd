//! Policies of a boundary: save (the document's `spec`), get, list, delete, history, and
//! apply of whole YAML documents (all or nothing). Saving validates the document (400 naming
//! the field) and answers the save warnings of SPEC 1, built in the core.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use palisade_api_types::document::{spec_of, ValidPolicy};
use palisade_api_types::view::{
    ApplyResult, ApplyResults, ClusterStatus, InstallStatus, PolicyList, PolicyStatus, PolicyView,
    RollbackRequest,
};
use palisade_api_types::{PolicyDocument, PolicySpec};
use palisade_policy::policy::{blocked_type_warnings, save_warnings};
use palisade_policy::{Catalog, ExceptionWarning, Name, Policy, SaveWarning};
/// What a save did: `created`, `configured` or `unchanged`.
pub use palisade_store::WriteAction;
use palisade_store::{PolicyHistoryEntry, PolicyRecord, PolicyWrite, RolloutDecision, StoreError};

use crate::caller::{Access, Caller};
use crate::error::{AppError, AppResult};
use crate::App;

/// A saved policy and what the save did.
#[derive(Clone, Debug)]
pub struct Saved {
    /// The policy as the API answers it (its `warnings` are the texts of `warnings`).
    pub view: PolicyView,
    pub action: WriteAction,
    /// The save warnings, typed: each edge says them in its own words.
    pub warnings: Vec<SaveWarning>,
}

/// How a save may overwrite.
#[derive(Clone, Debug, Default)]
pub struct SaveCondition {
    /// The etag the caller read (`If-Match`); a stale one is `PreconditionFailed`.
    pub if_match: Option<String>,
    /// Create only (`If-None-Match: *`): `AlreadyExists` when the policy exists.
    pub create_only: bool,
    /// A policy's earlier version this save restores (a rollback), named in its history.
    pub restores: Option<i64>,
    /// In force everywhere at once, whatever the spec's `rollout` (a rollback not staged).
    pub at_once: bool,
    /// The spec stored already is saved as a new version all the same: a rollback to it while
    /// another version is in force somewhere (its rollout aborted, paused or running).
    pub rewrite_identical: bool,
}

/// The policy as the API shows it, without its status.
pub fn view(record: PolicyRecord, warnings: Option<Vec<String>>) -> PolicyView {
    PolicyView {
        status: PolicyStatus::default(),
        spec: serde_json::from_str(&record.spec_json).unwrap_or(serde_json::Value::Null),
        metadata: serde_json::from_str(&record.metadata_json)
            .unwrap_or_else(|_| serde_json::json!({})),
        boundary: record.boundary,
        name: record.name,
        etag: record.etag,
        version: record.version,
        created_at: record.created_at,
        updated_at: record.updated_at,
        updated_by: record.updated_by,
        rollout: None,
        warnings,
    }
}

pub(crate) fn policy_not_found(boundary: &str, name: &str) -> AppError {
    crate::documents::not_found::<Policies>(boundary, name)
}

/// Policies as versioned boundary documents.
#[derive(Clone, Copy, Debug)]
pub struct Policies;

crate::documents::document_kind!(
    Policies: PolicyRecord, PolicyHistoryEntry, PolicyView, PolicyList;
    "policy", "policies", "history of ", admins_write: true, create_only: true;
    store: get_policy, delete_policy, policy_history;
    action(e) = e.event.clone().or_else(|| e.restored_version.map(|v| format!("rollback to version {v}"))),
    version = e.version;
    app: policies, policy, save_policy
);

/// `spec` (an earlier version's) with the `rollout` of `current` (the policy's spec now); `None`
/// when the policy has none now.
fn staged_spec(spec: &str, current: &str) -> Option<String> {
    let current: serde_json::Value = serde_json::from_str(current).ok()?;
    let rollout = current.get("rollout")?.clone();
    let mut spec: serde_json::Value = serde_json::from_str(spec).ok()?;
    spec.as_object_mut()?.insert("rollout".to_owned(), rollout);
    Some(spec.to_string())
}

fn texts(warnings: &[SaveWarning]) -> Vec<String> {
    warnings.iter().map(ToString::to_string).collect()
}

fn metadata_json(
    labels: &BTreeMap<String, String>,
    annotations: &BTreeMap<String, String>,
) -> String {
    serde_json::json!({"labels": labels, "annotations": annotations}).to_string()
}

/// A policy's spec as stored; one that cannot be written is an error, never `""`.
fn canonical_spec(policy: &Policy) -> AppResult<String> {
    serde_json::to_string(&spec_of(policy))
        .map_err(|e| AppError::Internal(format!("policy spec cannot be encoded: {e}")))
}

impl App {
    /// The per-cluster statuses of `records` (all of one boundary): for each attached cluster
    /// in a policy's scope, what the reconciler recorded for the policy's current version,
    /// else `pending`.
    pub async fn statuses(
        &self,
        boundary: &str,
        records: &[PolicyRecord],
    ) -> AppResult<HashMap<String, PolicyStatus>> {
        let mut out: HashMap<String, PolicyStatus> = HashMap::new();
        if records.is_empty() {
            return Ok(out);
        }
        let clusters = self.attached_records(boundary).await?;
        let rows = self
            .store
            .policy_statuses(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        // The boundary's namespaces, read once when a rollout runs (what it reached).
        let mut namespaces: Option<Vec<palisade_store::NamespaceRecord>> = None;
        let mut recorded: HashMap<(&str, &str), &palisade_store::PolicyStatusRecord> =
            HashMap::new();
        for row in &rows {
            recorded.insert((row.policy.as_str(), row.cluster.as_str()), row);
        }
        for record in records {
            let decoded = self.policy_cache().decode(record, &self.catalog).ok();
            let mut status = PolicyStatus::default();
            for cluster in &clusters {
                let in_scope = match &decoded {
                    Some(policy) => {
                        Name::parse(&cluster.name).is_ok_and(|c| policy.installs_in(&c))
                    }
                    // Undecodable: the reconciler reports it per cluster.
                    None => true,
                };
                if !in_scope {
                    continue;
                }
                let entry = match recorded.get(&(record.name.as_str(), cluster.name.as_str())) {
                    Some(row) if row.policy_etag == record.etag => ClusterStatus {
                        cluster: cluster.name.clone(),
                        status: crate::reconcile::read_status(&row.status),
                        updated_at: Some(row.updated_at.clone()),
                        in_force: None,
                    },
                    _ => ClusterStatus {
                        cluster: cluster.name.clone(),
                        status: InstallStatus::Pending,
                        updated_at: None,
                        in_force: None,
                    },
                };
                let entry = ClusterStatus {
                    in_force: match (&decoded, crate::rollout::StoredRollout::of(record)) {
                        (Some(policy), Some(stored)) if stored.progress.is_open() => {
                            if namespaces.is_none() {
                                let read = self.store.list_namespaces(boundary).await;
                                namespaces = Some(read.unwrap_or_default());
                            }
                            let namespaces = namespaces.as_deref().unwrap_or_default();
                            crate::rollout::in_force(
                                &stored,
                                policy,
                                boundary,
                                &cluster.name,
                                namespaces,
                            )
                        }
                        _ => None,
                    },
                    ..entry
                };
                status.clusters.push(entry);
            }
            out.insert(record.name.clone(), status);
        }
        Ok(out)
    }

    async fn with_status(
        &self,
        record: PolicyRecord,
        warnings: Option<Vec<String>>,
    ) -> AppResult<PolicyView> {
        let mut statuses = self
            .statuses(&record.boundary, std::slice::from_ref(&record))
            .await?;
        let status = statuses.remove(&record.name).unwrap_or_default();
        let rollout = self.rollout_of(&record);
        let mut view = view(record, warnings);
        view.status = status;
        view.rollout = rollout;
        Ok(view)
    }

    /// The boundary's policies with their statuses, in name order.
    pub async fn policies(&self, access: &Access) -> AppResult<Vec<PolicyView>> {
        let boundary = access.boundary();
        let records = self
            .store
            .list_policies(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        let mut statuses = self.statuses(boundary, &records).await?;
        Ok(records
            .into_iter()
            .map(|r| {
                let status = statuses.remove(&r.name).unwrap_or_default();
                let rollout = self.rollout_of(&r);
                let mut view = view(r, None);
                view.status = status;
                view.rollout = rollout;
                view
            })
            .collect())
    }

    /// One policy with its status.
    async fn policy(&self, access: &Access, name: &str) -> AppResult<PolicyView> {
        let record = self.stored_policy(access, name).await?;
        self.with_status(record, None).await
    }

    /// The stored record of policy `name` of the caller's boundary; 404 naming it.
    pub(crate) async fn stored_policy(
        &self,
        access: &Access,
        name: &str,
    ) -> AppResult<PolicyRecord> {
        self.stored::<Policies>(access, name).await
    }

    /// The boundary's other stored policies that can be decoded (for save warnings). A
    /// policy that cannot be decoded is left out of the warnings, not a reason to refuse.
    async fn other_policies(&self, boundary: &str, except: &str) -> AppResult<Vec<Policy>> {
        let records = self
            .store
            .list_policies(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        Ok(records
            .iter()
            .filter(|r| r.name != except)
            .filter_map(|r| self.policy_cache().decode(r, &self.catalog).ok())
            .collect())
    }

    /// Reads and validates a policy spec (a request body): 400 naming the field.
    pub(crate) fn validate_spec(
        &self,
        policy_name: Name,
        spec_json: &[u8],
    ) -> AppResult<(Policy, Vec<SaveWarning>)> {
        // One JSON value, no key twice: what is validated is what is saved.
        let value = palisade_api_types::json::parse_value(spec_json)?;
        let spec: PolicySpec = palisade_api_types::json::from_value(value)?;
        spec.validate(policy_name, &self.catalog)
            .map_err(|e| AppError::InvalidRequest(e.to_string()))
    }

    /// Validates and saves the spec of policy `name` (boundary-admin or admin): 400 naming the
    /// field, 412 on a stale etag or an existing policy with `create_only`. Answers the saved
    /// policy with its save warnings.
    pub async fn save_policy(
        &self,
        access: &Access,
        name: &str,
        spec_json: &[u8],
        condition: SaveCondition,
    ) -> AppResult<Saved> {
        access.caller().require_boundary_admin()?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let boundary = access.boundary();
        let policy_name = crate::path_name("policy", name)?;
        let (policy, own_warnings) = self.validate_spec(policy_name, spec_json)?;
        let mut after = self.other_policies(boundary, name).await?;
        let others = after.len();
        after.push(policy.clone());
        let warnings = save_warnings(own_warnings, blocked_type_warnings(&after, &self.catalog));
        let metadata = match self.store.get_policy(boundary, name).await {
            Ok(existing) => existing.metadata_json,
            Err(StoreError::NotFound) => {
                if others >= MAX_POLICIES_PER_BOUNDARY {
                    return Err(AppError::invalid(
                        "/path/policy",
                        too_many_policies(boundary, others + 1),
                    ));
                }
                metadata_json(&BTreeMap::new(), &BTreeMap::new())
            }
            Err(other) => return Err(AppError::from_store(other, "policy")),
        };
        let create_only = condition.create_only;
        let write = PolicyWrite {
            boundary: boundary.to_owned(),
            name: name.to_owned(),
            spec_json: canonical_spec(&policy)?,
            metadata_json: metadata,
            if_match: condition.if_match,
            create_only,
            restores: condition.restores,
            rollout: (!condition.at_once).then(|| self.rollout_decision(&policy)),
            rewrite_identical: condition.rewrite_identical,
        };
        let actor = access.caller().actor();
        let (record, action) = self
            .store
            .put_policy(write, &actor)
            .await
            .map_err(|e| match e {
                StoreError::PreconditionFailed if create_only => AppError::AlreadyExists(format!(
                    "policy '{name}' already exists in boundary '{boundary}' (If-None-Match: * creates only)"
                )),
                other => AppError::from_store(other, "policy"),
            })?;
        tracing::info!(%boundary, policy = %name, action = action.as_str(), %actor, "policy saved");
        Ok(Saved {
            view: self.with_status(record, Some(texts(&warnings))).await?,
            action,
            warnings,
        })
    }

    /// What a save of `policy` does to its rollout, decided in the save's transaction from the
    /// policy as stored then (`crate::rollout::decide`).
    fn rollout_decision(&self, policy: &Policy) -> RolloutDecision {
        let (catalog, new) = (self.catalog.clone(), policy.clone());
        RolloutDecision(std::sync::Arc::new(move |before, version| {
            let name = new.name().to_string();
            let decode = |spec: &str| crate::plans::decode_spec(&name, spec, &catalog).ok();
            let version = u64::try_from(version).unwrap_or_default();
            let now = crate::rollout::stage_clock();
            crate::rollout::decide(before, &decode, &new, version, now).map(|r| r.encode())
        }))
    }

    /// Makes the spec version `request.version` of policy `name` saved the current one, as a
    /// new version, at once (SPEC 8; boundary-admin or admin). The spec is validated and saved
    /// as a save of it would be (warnings, `if_match`); the policy's spec being that version's
    /// already is `unchanged` and makes no version. 404 when the policy, or that version in its
    /// history, is not there.
    pub async fn rollback_policy(
        &self,
        access: &Access,
        name: &str,
        request: &RollbackRequest,
        if_match: Option<String>,
    ) -> AppResult<Saved> {
        access.caller().require_boundary_admin()?;
        if request.version < 1 {
            return Err(AppError::invalid(
                "/version",
                format!(
                    "must be a version of the policy (1 or more), got {}",
                    request.version
                ),
            ));
        }
        let staged = request.staged == Some(true);
        let current = self.stored_policy(access, name).await?;
        let boundary = access.boundary();
        let spec = self
            .store
            .policy_version_spec(boundary, name, request.version)
            .await
            .map_err(|e| AppError::from_store(e, "policy"))?;
        let Some(spec) = spec else {
            let version = request.version;
            return Err(AppError::NotFound(if version > current.version {
                format!(
                    "policy '{name}' of boundary '{boundary}' has no version {version}: its latest is version {}",
                    current.version
                )
            } else {
                format!(
                    "version {version} of policy '{name}' of boundary '{boundary}' is no longer in its history"
                )
            }));
        };
        // Staged: by the stages of the policy as it is now (the version restored may have had
        // other stages, or none).
        let spec = if staged {
            staged_spec(&spec, &current.spec_json).ok_or_else(|| {
                AppError::invalid(
                    "/staged",
                    format!(
                        "policy '{name}' has no spec.rollout: its stages are what a staged rollback goes through; omit staged to roll back at once"
                    ),
                )
            })?
        } else {
            spec
        };
        let condition = SaveCondition {
            if_match,
            create_only: false,
            restores: Some(request.version),
            at_once: !staged,
            // After an abort the aborted spec is the current document, with the version before
            // it in force: rolling back to it must make it the one in force, not "unchanged".
            rewrite_identical: crate::rollout::StoredRollout::of(&current)
                .is_some_and(|s| s.progress.phase != palisade_policy::rollout::Phase::Done),
        };
        let saved = self
            .save_policy(access, name, spec.as_bytes(), condition)
            .await?;
        tracing::info!(%boundary, policy = %name, to = request.version,
            version = saved.view.version, "policy rolled back");
        Ok(saved)
    }

    /// Applies BoundaryPolicy documents (all or nothing; `dry_run` writes nothing). Parsing
    /// and validation are CPU work: they run off the async workers (`off_workers`), and stop
    /// between documents when this future is dropped (the client went away). Answer order
    /// (SPEC 2.4): a role that may not apply (403) before anything about the body, then a
    /// boundary the caller cannot see (404) before the body's contents (400).
    pub async fn apply(
        &self,
        caller: &Caller,
        body: Vec<u8>,
        dry_run: bool,
    ) -> AppResult<ApplyResults> {
        caller.require_boundary_admin()?;
        let catalog = self.catalog.clone();
        let max_days = self.max_exception_days;
        let parsed = self
            .off_workers(apply_memory(&body), move |stop| {
                parse_apply(&body, &catalog, max_days, stop)
            })
            .await??;
        for boundary in &parsed.boundaries {
            self.visible_boundary(caller, boundary).await?;
        }
        let (valid, exceptions) = parsed.documents?;
        let (exceptions, ended) = self.ended_unchanged(exceptions).await?;
        if !dry_run {
            // One write per document, in its boundary.
            let mut per_boundary: BTreeMap<String, u32> = BTreeMap::new();
            for (_, _, checked) in &valid {
                *per_boundary
                    .entry(checked.boundary.to_string())
                    .or_default() += 1;
            }
            for (_, boundary, _, _, _) in &exceptions {
                *per_boundary.entry(boundary.to_string()).or_default() += 1;
            }
            let counts: Vec<(&str, u32)> =
                per_boundary.iter().map(|(b, n)| (b.as_str(), *n)).collect();
            self.admit_writes(caller, &counts)?;
        }
        let writes: Vec<PolicyWrite> = valid
            .iter()
            .map(|(_, document, checked)| {
                Ok(PolicyWrite {
                    boundary: checked.boundary.to_string(),
                    name: checked.policy.name().to_string(),
                    spec_json: canonical_spec(&checked.policy)?,
                    metadata_json: metadata_json(
                        &document.metadata.labels,
                        &document.metadata.annotations,
                    ),
                    if_match: None,
                    create_only: false,
                    restores: None,
                    rollout: Some(self.rollout_decision(&checked.policy)),
                    rewrite_identical: false,
                })
            })
            .collect::<AppResult<_>>()?;

        // Each boundary's stored policies are read once, however many documents name it; the
        // request's policies replace their stored versions and count too.
        let mut by_boundary: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        for (position, write) in writes.iter().enumerate() {
            by_boundary
                .entry(write.boundary.as_str())
                .or_default()
                .push(position);
        }
        let mut warnings: Vec<Vec<String>> = vec![Vec::new(); valid.len()];
        let mut dry_run_actions = vec![WriteAction::Created; valid.len()];
        for (boundary, positions) in &by_boundary {
            let records = self
                .store
                .list_policies(boundary)
                .await
                .map_err(|e| AppError::from_store(e, "boundary"))?;
            let stored: BTreeMap<&str, &PolicyRecord> =
                records.iter().map(|r| (r.name.as_str(), r)).collect();
            let named: BTreeSet<&str> =
                positions.iter().map(|&i| writes[i].name.as_str()).collect();
            let kept: Vec<&PolicyRecord> = records
                .iter()
                .filter(|r| !named.contains(r.name.as_str()))
                .collect();
            let total = kept.len() + named.len();
            if total > MAX_POLICIES_PER_BOUNDARY {
                let first_new = positions
                    .iter()
                    .find(|&&i| !stored.contains_key(writes[i].name.as_str()))
                    .map_or(0, |&i| valid[i].0);
                return Err(AppError::invalid(
                    &format!("/{first_new}/metadata/name"),
                    too_many_policies(boundary, total),
                ));
            }
            let mut after: Vec<Policy> = kept
                .iter()
                .filter_map(|r| self.policy_cache().decode(r, &self.catalog).ok())
                .collect();
            after.extend(positions.iter().map(|&i| valid[i].2.policy.clone()));
            let blocked = blocked_type_warnings(&after, &self.catalog);
            for &i in positions {
                warnings[i] = texts(&save_warnings(valid[i].2.warnings.clone(), blocked.clone()));
                if let Some(record) = stored.get(writes[i].name.as_str()) {
                    dry_run_actions[i] = if record.spec_json == writes[i].spec_json
                        && record.metadata_json == writes[i].metadata_json
                    {
                        WriteAction::Unchanged
                    } else {
                        WriteAction::Configured
                    };
                }
            }
        }
        let exception_writes: Vec<palisade_store::ExceptionWrite> = exceptions
            .iter()
            .map(
                |(_, boundary, exception, spec, _)| palisade_store::ExceptionWrite {
                    boundary: boundary.to_string(),
                    name: exception.name.to_string(),
                    policy: exception.policy.to_string(),
                    spec_json: spec.clone(),
                    expires_at: exception.expires_at.clone(),
                    approve: true,
                    if_match: None,
                    create_only: false,
                    max_per_boundary: palisade_policy::exception::MAX_PER_BOUNDARY,
                    max_requests_per_boundary:
                        palisade_policy::exception::MAX_REQUESTS_PER_BOUNDARY,
                },
            )
            .collect();
        let (actions, exception_actions): (Vec<WriteAction>, Vec<WriteAction>) = if dry_run {
            let mut would = Vec::with_capacity(exception_writes.len());
            for write in &exception_writes {
                would.push(
                    match self.store.get_exception(&write.boundary, &write.name).await {
                        Ok(stored)
                            if stored.spec_json == write.spec_json
                                && stored.state == crate::exceptions::APPROVED =>
                        {
                            WriteAction::Unchanged
                        }
                        Ok(_) => WriteAction::Configured,
                        Err(StoreError::NotFound) => WriteAction::Created,
                        Err(other) => return Err(AppError::from_store(other, "exception")),
                    },
                );
            }
            (dry_run_actions, would)
        } else {
            let (saved, excepted) = self
                .store
                .apply_documents(writes, exception_writes, &caller.actor())
                .await
                .map_err(|e| AppError::from_store(e, "boundary"))?;
            (
                saved.into_iter().map(|(_, action)| action).collect(),
                excepted.into_iter().map(|(_, action)| action).collect(),
            )
        };
        let mut results: Vec<(usize, ApplyResult)> = valid
            .iter()
            .zip(actions)
            .zip(warnings)
            .map(|(((index, _, checked), action), warnings)| {
                (
                    *index,
                    ApplyResult {
                        kind: palisade_api_types::document::KIND.to_owned(),
                        boundary: checked.boundary.to_string(),
                        name: checked.policy.name().to_string(),
                        action: action.as_str().to_owned(),
                        warnings,
                    },
                )
            })
            .collect();
        results.extend(exceptions.iter().zip(exception_actions).map(
            |((index, boundary, exception, _, _), action)| {
                (
                    *index,
                    ApplyResult {
                        kind: palisade_api_types::exception::KIND.to_owned(),
                        boundary: boundary.to_string(),
                        name: exception.name.to_string(),
                        action: action.as_str().to_owned(),
                        warnings: exception
                            .save_warnings()
                            .iter()
                            .map(ToString::to_string)
                            .collect(),
                    },
                )
            },
        ));
        // Ended documents stored unchanged: nothing written, said so.
        results.extend(ended.into_iter().map(|(index, boundary, name, warning)| {
            (
                index,
                ApplyResult {
                    kind: palisade_api_types::exception::KIND.to_owned(),
                    boundary,
                    name,
                    action: WriteAction::Unchanged.as_str().to_owned(),
                    warnings: vec![warning.to_string()],
                },
            )
        }));
        results.sort_by_key(|(index, _)| *index);
        Ok(ApplyResults {
            results: results.into_iter().map(|(_, r)| r).collect(),
        })
    }
}

/// What reading and validating an apply of `body` may hold: reading its text
/// (`palisade_api_types::yaml::peak_bound`) and what its documents are read as, kept until
/// they are written (at most [`APPLY_KEPT_PER_BYTE`] per byte of it).
pub fn apply_memory(body: &[u8]) -> usize {
    palisade_api_types::yaml::peak_bound(body)
        .saturating_add(body.len().saturating_mul(APPLY_KEPT_PER_BYTE))
}

/// What an apply keeps of its documents, per byte of its body, at most.
const APPLY_KEPT_PER_BYTE: usize = 16;

/// At most this many documents in one `POST /v1/apply` (413 beyond).
pub const MAX_APPLY_DOCUMENTS: usize = 1000;

/// At most this many policies in one boundary (400 on the save that would exceed it).
pub const MAX_POLICIES_PER_BOUNDARY: usize = 500;

fn too_many_policies(boundary: &str, count: usize) -> String {
    format!(
        "boundary '{boundary}' would hold {count} policies; at most \
         {MAX_POLICIES_PER_BOUNDARY} policies are allowed in one boundary"
    )
}

/// A validated document of an apply: its index in the stream, the document, the policy.
type ValidDocument = (usize, PolicyDocument, ValidPolicy);

/// What the CPU-bound part of an apply found: the boundaries the documents name (for the
/// visibility check, which comes before the body's own errors) and the validated documents
/// or the first error.
struct ParsedApply {
    boundaries: BTreeSet<String>,
    documents: AppResult<(Vec<ValidDocument>, Vec<ValidException>)>,
}

/// A validated exception document of an apply: its index, boundary and exception, the spec
/// as it will be saved, and for a document whose `expiresAt` has passed, its refusal (400)
/// unless it is stored unchanged.
type ValidException = (
    usize,
    palisade_policy::Name,
    palisade_policy::Exception,
    String,
    Option<String>,
);

/// An ended exception document stored unchanged: its index, boundary, name and warning.
type EndedUnchanged = (usize, String, String, ExceptionWarning);

impl App {
    /// Splits off the exception documents whose `expiresAt` has passed (SPEC 7 v3.2): one
    /// stored with the same spec is left out of the writes and reported `unchanged` with a
    /// warning that it has expired, so that an expired file never blocks a repository's
    /// other changes; as new or changed it is refused (the 400 naming `expiresAt`).
    async fn ended_unchanged(
        &self,
        exceptions: Vec<ValidException>,
    ) -> AppResult<(Vec<ValidException>, Vec<EndedUnchanged>)> {
        let mut current = Vec::with_capacity(exceptions.len());
        let mut ended = Vec::new();
        for document in exceptions {
            let Some(refusal) = &document.4 else {
                current.push(document);
                continue;
            };
            let (index, boundary, exception, spec, _) = &document;
            match self
                .store
                .get_exception(boundary.as_str(), exception.name.as_str())
                .await
            {
                Ok(stored) if &stored.spec_json == spec => ended.push((
                    *index,
                    boundary.to_string(),
                    exception.name.to_string(),
                    ExceptionWarning::Expired {
                        name: exception.name.to_string(),
                        expires_at: exception.expires_at.replace(".000Z", "Z"),
                    },
                )),
                Ok(_) | Err(StoreError::NotFound) => {
                    return Err(AppError::InvalidRequest(refusal.clone()))
                }
                Err(other) => return Err(AppError::from_store(other, "exception")),
            }
        }
        Ok((current, ended))
    }
}

/// Parses and validates an apply body, in time linear in its size. Stops with an error when
/// `stop` is set (the client has gone). A body nested too deeply, with a document of too many
/// nodes or with a tag palisade does not read is refused before it is parsed; one of more
/// than [`MAX_APPLY_DOCUMENTS`] documents is a 413 before any of them is validated.
///
/// The body is read once, a document at a time: each is read as JSON, then as the document
/// its `kind` names, and the boundary it names is noted (for the 404 that comes before the
/// body's own errors). Beyond [`MAX_APPLY_DOCUMENTS`] documents are only counted, so what a
/// parse holds stays within [`palisade_api_types::yaml::peak_bound`].
fn parse_apply(
    bytes: &[u8],
    catalog: &Catalog,
    max_exception_days: u32,
    stop: &std::sync::atomic::AtomicBool,
) -> AppResult<ParsedApply> {
    use palisade_api_types::yaml;
    let text = std::str::from_utf8(bytes)
        .map_err(|_| AppError::InvalidRequest("the body is not UTF-8 text".into()))?;
    yaml::check(text)
        .map_err(|refusal| AppError::InvalidRequest(format!("the body: {refusal}")))?;
    let mut documents = Vec::new();
    // Exceptions (SPEC 7) travel beside policies; each document is read as its kind says.
    let mut exceptions = Vec::new();
    let mut named = BTreeSet::new();
    let mut count = 0_usize;
    for (index, document) in yaml::each_json_document(text) {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(AppError::Internal("the client went away".into()));
        }
        count += 1;
        if count > MAX_APPLY_DOCUMENTS {
            continue;
        }
        let json = match document {
            Ok(json) => json,
            Err(error) => {
                documents.push((index, Err(error)));
                continue;
            }
        };
        if let Some(boundary) = json
            .get("metadata")
            .and_then(|metadata| metadata.get("boundary"))
            .and_then(serde_json::Value::as_str)
            .filter(|b| Name::parse(b).is_ok())
        {
            named.insert(boundary.to_owned());
        }
        if json.get("kind").and_then(serde_json::Value::as_str)
            == Some(palisade_api_types::exception::KIND)
        {
            exceptions.push((index, yaml::from_json(&json)));
        } else {
            documents.push((index, yaml::from_json::<PolicyDocument>(&json)));
        }
    }
    if count > MAX_APPLY_DOCUMENTS {
        return Err(AppError::LimitExceeded(format!(
            "the body holds {count} documents; at most {MAX_APPLY_DOCUMENTS} are accepted in one \
             apply: split it into several requests"
        )));
    }
    let validated = validate_documents(documents, exceptions.is_empty(), catalog, stop)
        .and_then(|valid| Ok((valid, validate_exceptions(exceptions, max_exception_days)?)));
    match validated {
        Ok((valid, exceptions)) => Ok(ParsedApply {
            boundaries: valid
                .iter()
                .map(|(_, _, checked)| checked.boundary.to_string())
                .chain(
                    exceptions
                        .iter()
                        .map(|(_, boundary, _, _, _)| boundary.to_string()),
                )
                .collect(),
            documents: Ok((valid, exceptions)),
        }),
        // An invalid body: the boundaries its documents name, read leniently (a document
        // may be invalid otherwise).
        Err(error) => Ok(ParsedApply {
            boundaries: named,
            documents: Err(error),
        }),
    }
}

/// The error of a document that cannot be read, at its index in the stream.
fn unreadable(index: usize, e: palisade_api_types::yaml::YamlError) -> AppError {
    let pointer = e.pointer.clone().unwrap_or_default();
    let position = match (e.line, e.column) {
        (Some(l), Some(c)) => format!(" (line {l} column {c})"),
        _ => String::new(),
    };
    AppError::InvalidRequest(format!("/{index}{pointer}: {}{position}", e.message))
}

fn validate_exceptions(
    documents: Vec<(
        usize,
        Result<palisade_api_types::ExceptionDocument, palisade_api_types::yaml::YamlError>,
    )>,
    max_days: u32,
) -> AppResult<Vec<ValidException>> {
    let now = chrono::Utc::now();
    let mut valid = Vec::with_capacity(documents.len());
    let mut seen = BTreeSet::new();
    for (index, document) in documents {
        let document = document.map_err(|e| unreadable(index, e))?;
        let refusal =
            |e: palisade_api_types::DocumentError| format!("/{index}{}: {}", e.pointer, e.message);
        let (boundary, exception, ended) = match document.validate(now, max_days) {
            Ok((boundary, exception)) => (boundary, exception, None),
            // Refused only for its time, which has passed: decided against the store.
            Err(error) => match document.validate_ended() {
                Ok((boundary, exception))
                    if exception.expires_at <= palisade_api_types::exception::stored_time(now) =>
                {
                    (boundary, exception, Some(refusal(error)))
                }
                _ => return Err(AppError::InvalidRequest(refusal(error))),
            },
        };
        if !seen.insert((boundary.to_string(), exception.name.to_string())) {
            return Err(AppError::invalid(
                &format!("/{index}/metadata/name"),
                format!(
                    "exception '{boundary}/{}' is defined twice in this request",
                    exception.name
                ),
            ));
        }
        let spec = crate::exceptions::canonical(&document.spec, &exception)?;
        valid.push((index, boundary, exception, spec, ended));
    }
    Ok(valid)
}

fn validate_documents(
    documents: Vec<(
        usize,
        Result<PolicyDocument, palisade_api_types::yaml::YamlError>,
    )>,
    exceptions_none: bool,
    catalog: &Catalog,
    stop: &std::sync::atomic::AtomicBool,
) -> AppResult<Vec<ValidDocument>> {
    if documents.is_empty() && exceptions_none {
        return Err(AppError::InvalidRequest(
            "the body holds no BoundaryPolicy document".into(),
        ));
    }
    // The pointer is prefixed with the document's index in the stream (`/1/spec/rules/0/...`).
    let mut valid = Vec::with_capacity(documents.len());
    let mut seen = BTreeSet::new();
    for (index, document) in documents {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(AppError::Internal("the client went away".into()));
        }
        let document = document.map_err(|e| unreadable(index, e))?;
        let checked = document.validate(catalog).map_err(|e| {
            AppError::InvalidRequest(format!("/{index}{}: {}", e.pointer, e.message))
        })?;
        let key = (
            checked.boundary.to_string(),
            checked.policy.name().to_string(),
        );
        if !seen.insert(key.clone()) {
            return Err(AppError::invalid(
                &format!("/{index}/metadata/name"),
                format!(
                    "policy '{}/{}' is defined twice in this request",
                    key.0, key.1
                ),
            ));
        }
        valid.push((index, document, checked));
    }
    Ok(valid)
}

/// The most days of history `serve --history-days` may keep (a hundred years): its value is
/// refused beyond it when the flag is read.
pub const MAX_HISTORY_DAYS: u32 = 36_500;

/// The time before which retention deletes history, `days` before `now` (RFC 3339, as the
/// store writes times). `days` is taken at most [`MAX_HISTORY_DAYS`], so the subtraction
/// cannot leave the calendar; `None` only if it could anyway (nothing is deleted then).
pub fn retention_cutoff(now: chrono::DateTime<chrono::Utc>, days: u32) -> Option<String> {
    let days = chrono::TimeDelta::try_days(i64::from(days.min(MAX_HISTORY_DAYS)))?;
    let before = now.checked_sub_signed(days)?;
    Some(before.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

impl App {
    /// History retention (`serve --history-days`), forever: every 10 minutes, deletes policy
    /// history, exception history and change rows older than `days` (the newest entry of each
    /// policy and exception stays), 500 of each at a time, each batch a short transaction of
    /// its own (writes wait for one batch at most).
    pub async fn retain_history(self, days: u32) {
        const BATCH: u32 = 500;
        loop {
            let Some(before) = retention_cutoff(chrono::Utc::now(), days) else {
                tracing::warn!(
                    days,
                    "history retention: no time is that many days ago; nothing deleted"
                );
                tokio::time::sleep(std::time::Duration::from_secs(600)).await;
                continue;
            };
            let mut pruned = 0;
            loop {
                match self.store.prune_history(&before, BATCH).await {
                    Ok(0) => break,
                    Ok(rows) => pruned += rows,
                    Err(error) => {
                        tracing::warn!(%error, "history retention: pruning failed; retrying later");
                        break;
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            if pruned > 0 {
                tracing::info!(rows = pruned, before, "history retention: old rows deleted");
            }
            tokio::time::sleep(std::time::Duration::from_secs(600)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    const TWO: &str = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: a, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n---\napiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: b, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n";

    /// A huge `--history-days` can neither overflow nor stop the retention task.
    #[test]
    fn the_retention_cutoff_never_overflows() {
        let now = chrono::DateTime::parse_from_rfc3339("2027-01-31T00:00:00Z")
            .map(|t| t.with_timezone(&chrono::Utc))
            .unwrap_or_default();
        assert_eq!(
            retention_cutoff(now, 30).as_deref(),
            Some("2027-01-01T00:00:00.000Z")
        );
        for days in [
            MAX_HISTORY_DAYS,
            MAX_HISTORY_DAYS + 1,
            100_000_000,
            u32::MAX,
        ] {
            assert_eq!(
                retention_cutoff(now, days).as_deref(),
                Some("1927-02-25T00:00:00.000Z"),
                "{days}"
            );
        }
    }

    #[test]
    fn validation_stops_when_the_client_has_gone() {
        let catalog = Catalog::builtin();
        let documents = || palisade_api_types::yaml::documents::<PolicyDocument>(TWO);
        let running = validate_documents(documents(), true, &catalog, &AtomicBool::new(false));
        assert_eq!(running.map(|v| v.len()).ok(), Some(2));
        let stopped = validate_documents(documents(), true, &catalog, &AtomicBool::new(true));
        assert!(matches!(stopped, Err(AppError::Internal(_))));
    }

    #[test]
    fn the_boundaries_named_are_found_even_in_invalid_documents() {
        let body = "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: a, boundary: other}\nspec: {rules: []}\n";
        let parsed = parse_apply(
            body.as_bytes(),
            &Catalog::builtin(),
            90,
            &AtomicBool::new(false),
        );
        let parsed = parsed.ok().map(|p| (p.boundaries, p.documents.is_err()));
        assert_eq!(parsed, Some((BTreeSet::from(["other".to_owned()]), true)));
    }
}
