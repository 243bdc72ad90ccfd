//! Exceptions of a boundary (SPEC 7): save (the document's `spec`), approve, get, list,
//! delete, history. An admin or boundary-admin of the boundary writes an exception approved
//! by themselves; a developer writes a request, which applies nothing until someone else with
//! those roles approves it.

use palisade_api_types::view::{ExceptionClusterStatus, ExceptionList, ExceptionView};
use palisade_api_types::ExceptionSpec;
use palisade_policy::exception::{MAX_PER_BOUNDARY, MAX_REQUESTS_PER_BOUNDARY};
use palisade_policy::{Exception, ExceptionWarning, Name};
use palisade_store::{
    ExceptionHistoryEntry, ExceptionRecord, ExceptionWrite, StoreError, WriteAction,
};

use crate::caller::{Access, Role};
use crate::error::{AppError, AppResult};
use crate::policies::SaveCondition;
use crate::App;

/// The default of `serve --max-exception-days`.
pub const MAX_EXCEPTION_DAYS: u32 = 90;

/// The stored state of an approved exception (the other: `requested`).
pub const APPROVED: &str = "approved";
const REQUESTED: &str = "requested";

/// A saved exception and what the save did.
#[derive(Clone, Debug)]
pub struct SavedException {
    /// The exception as the API answers it (its `warnings` are the texts of `warnings`).
    pub view: ExceptionView,
    pub action: WriteAction,
    /// The save warnings, typed: each edge says them in its own words.
    pub warnings: Vec<ExceptionWarning>,
}

/// Decodes a stored exception (as validated when saved; its time is not judged again). A
/// stored exception palisade cannot read makes a plan decision `PolicyUnavailable`.
pub fn decode_stored(record: &ExceptionRecord) -> Result<Exception, AppError> {
    let unreadable = |why: String| {
        AppError::PolicyUnavailable(format!(
            "stored exception {}/{} cannot be decoded: {why}",
            record.boundary, record.name
        ))
    };
    let name = Name::parse(&record.name).map_err(|e| unreadable(e.to_string()))?;
    let spec = ExceptionSpec::from_json(record.spec_json.as_bytes())
        .map_err(|e| unreadable(e.to_string()))?;
    spec.decode_stored(name)
        .map_err(|e| unreadable(e.to_string()))
}

/// The approved exceptions to admission rules among `records` in force now (one that cannot
/// be decoded is left out and logged: its objects stay judged by the policy alone).
pub fn in_force(records: &[ExceptionRecord]) -> Vec<Exception> {
    let now = palisade_store::now();
    records
        .iter()
        .filter(|r| r.state == APPROVED && now < r.expires_at)
        .filter_map(|r| match decode_stored(r) {
            Ok(exception) => Some(exception),
            Err(error) => {
                tracing::warn!(boundary = %r.boundary, exception = %r.name, %error, "stored exception cannot be decoded; not applied");
                None
            }
        })
        .filter(|x| x.object_match.is_some())
        .collect()
}

/// `requested`, `active` or `expired` at `now`.
pub fn status_at(record: &ExceptionRecord, now: &str) -> &'static str {
    if now >= record.expires_at.as_str() {
        "expired"
    } else if record.state == APPROVED {
        "active"
    } else {
        REQUESTED
    }
}

/// The exception as the API shows it, at `now`.
pub fn view(record: ExceptionRecord, now: &str, warnings: Option<Vec<String>>) -> ExceptionView {
    ExceptionView {
        status: status_at(&record, now).to_owned(),
        spec: serde_json::from_str(&record.spec_json).unwrap_or(serde_json::Value::Null),
        expires_at: record.expires_at.replace(".000Z", "Z"),
        boundary: record.boundary,
        name: record.name,
        requested_by: record.requested_by,
        approved_by: record.approved_by,
        approved_at: record.approved_at,
        etag: record.etag,
        created_at: record.created_at,
        updated_at: record.updated_at,
        updated_by: record.updated_by,
        warnings,
        clusters: Vec::new(),
    }
}

/// The boundary's clusters and where its exceptions are installed, read once per answer.
struct Placement {
    clusters: Vec<palisade_store::ClusterRecord>,
    installs: Vec<palisade_store::ExceptionInstall>,
}

impl App {
    async fn placement(&self, boundary: &str) -> AppResult<Placement> {
        let clusters = self.attached_records(boundary).await?;
        let installs = self
            .store
            .exception_installs(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "exception"))?;
        Ok(Placement { clusters, installs })
    }
}

/// `view` with its per-cluster statuses (SPEC 7): where an active exception to admission
/// rules is enforced (confirmed by a probe), installed, pending or failing, and where an ended
/// one is still installed and why (the top-level status then says so).
fn with_cluster_statuses(mut view: ExceptionView, placement: &Placement) -> ExceptionView {
    let Some(spec) = serde_json::from_value::<ExceptionSpec>(view.spec.clone()).ok() else {
        return view;
    };
    let Some(object_match) = spec.object_match else {
        return view;
    };
    let in_scope = |cluster: &str| {
        object_match
            .clusters
            .as_ref()
            .is_none_or(|list| list.is_empty() || list.iter().any(|c| c == cluster))
    };
    let install_in = |cluster: &str| {
        placement
            .installs
            .iter()
            .find(|i| i.exception == view.name && i.cluster == cluster)
    };
    let mut still = Vec::new();
    let mut statuses = Vec::new();
    for cluster in placement.clusters.iter().filter(|c| in_scope(&c.name)) {
        let status = match view.status.as_str() {
            // What its probe found there (`enforced`, `pending`, `not enforced: ...`,
            // `error: ...`), or `installed` where nothing it matches could be probed.
            "active" => {
                install_in(&cluster.name).map_or_else(|| "pending".to_owned(), |i| i.status.clone())
            }
            // Ended, and the cluster's last pass failed: it could not be removed there.
            "expired" if install_in(&cluster.name).is_some() => match &cluster.last_error {
                Some(why) => {
                    still.push(format!("still installed in {}: {why}", cluster.name));
                    format!("still installed: {why}")
                }
                // The pass that removes it is under way.
                None => "removing".to_owned(),
            },
            _ => continue,
        };
        statuses.push(ExceptionClusterStatus {
            cluster: cluster.name.clone(),
            status,
        });
    }
    view.clusters = statuses;
    if !still.is_empty() {
        view.status = format!("expired; {}", still.join("; "));
    }
    view
}

fn from_store<'a>(boundary: &'a str, name: &'a str) -> impl Fn(StoreError) -> AppError + 'a {
    crate::documents::from_store::<Exceptions>(boundary, name)
}

/// Exceptions as versioned boundary documents: every role of the boundary writes them (a
/// developer's write is a request), and their history names what was done.
#[derive(Clone, Copy, Debug)]
pub struct Exceptions;

crate::documents::document_kind!(
    Exceptions: ExceptionRecord, ExceptionHistoryEntry, ExceptionView, ExceptionList;
    "exception", "exceptions", "history of exception ", admins_write: false,
    create_only: false; store: get_exception, delete_exception, exception_history;
    action(e) = Some(e.action), version = None; app: exceptions, get_exception, save_exception
);

/// The spec as saved: validated, with `expiresAt` in the stored form and the reason trimmed.
pub(crate) fn canonical(spec: &ExceptionSpec, exception: &Exception) -> AppResult<String> {
    let mut spec = spec.clone();
    spec.expires_at = exception.expires_at.replace(".000Z", "Z");
    spec.reason = exception.reason.clone();
    serde_json::to_string(&spec).map_err(|e| AppError::Internal(e.to_string()))
}

impl App {
    /// Validates and saves the spec of exception `name`: approved by the writer when an admin
    /// or boundary-admin writes it, a request when a developer does. 400 naming the field,
    /// 409 past the boundary's limits (approved exceptions, and apart from them pending
    /// requests) or, with `create_only`, when the exception exists; 412 on a stale etag.
    pub async fn save_exception(
        &self,
        access: &Access,
        name: &str,
        spec_json: &[u8],
        condition: SaveCondition,
    ) -> AppResult<SavedException> {
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let boundary = access.boundary();
        let exception_name = crate::path_name("exception", name)?;
        ExceptionSpec::check_size(spec_json.len())
            .map_err(|e| AppError::InvalidRequest(e.to_string()))?;
        let value = palisade_api_types::json::parse_value(spec_json)?;
        let spec: ExceptionSpec = palisade_api_types::json::from_value(value)?;
        let exception = spec
            .validate(exception_name, chrono::Utc::now(), self.max_exception_days)
            .map_err(|e| AppError::InvalidRequest(e.to_string()))?;
        let approve = !matches!(access.caller().role, Role::Developer(_));
        let write = ExceptionWrite {
            boundary: boundary.to_owned(),
            name: name.to_owned(),
            policy: exception.policy.to_string(),
            spec_json: canonical(&spec, &exception)?,
            expires_at: exception.expires_at.clone(),
            approve,
            if_match: condition.if_match,
            create_only: condition.create_only,
            max_per_boundary: MAX_PER_BOUNDARY,
            max_requests_per_boundary: MAX_REQUESTS_PER_BOUNDARY,
        };
        let actor = access.caller().actor();
        let (record, action) = self
            .store
            .put_exception(write, &actor)
            .await
            .map_err(from_store(boundary, name))?;
        tracing::info!(%boundary, exception = %name, action = action.as_str(), state = %record.state, %actor, "exception saved");
        let warnings = self.exception_warnings(boundary, &exception).await;
        let texts = warnings.iter().map(ToString::to_string).collect();
        Ok(SavedException {
            view: view(record, &palisade_store::now(), Some(texts)),
            action,
            warnings,
        })
    }

    /// What a save should tell its writer: a policy the boundary does not have (yet), a
    /// request that waits for approval.
    async fn exception_warnings(
        &self,
        boundary: &str,
        exception: &Exception,
    ) -> Vec<ExceptionWarning> {
        let mut warnings = exception.save_warnings();
        if let Err(StoreError::NotFound) = self
            .store
            .get_policy(boundary, exception.policy.as_str())
            .await
        {
            warnings.push(ExceptionWarning::NoSuchPolicy {
                boundary: boundary.to_owned(),
                policy: exception.policy.to_string(),
            });
        }
        warnings
    }

    /// Approves a request (admin or boundary-admin of the boundary, never its requester) as
    /// the approver read it (SPEC 7 v3.2): `if_match` is required and must name the stored
    /// etag (400 naming `If-Match` without it or with `*`, 412 when the exception changed
    /// since it was read).
    pub async fn approve_exception(
        &self,
        access: &Access,
        name: &str,
        if_match: Option<String>,
    ) -> AppResult<ExceptionView> {
        access.caller().require_boundary_admin()?;
        self.admit_write(access.caller(), Some(access.boundary()))?;
        let if_match = match if_match.as_deref().map(str::trim) {
            None | Some("") => {
                return Err(AppError::invalid(
                    "/headers/If-Match",
                    "required: approve the etag you read (GET the exception and send its etag)",
                ))
            }
            Some(value) if value.split(',').any(|v| v.trim() == "*") => {
                return Err(AppError::invalid(
                    "/headers/If-Match",
                    "must be the etag you read, not '*': an approval approves what was read",
                ))
            }
            Some(value) => value.to_owned(),
        };
        let boundary = access.boundary();
        let record = self.stored::<Exceptions>(access, name).await?;
        if !palisade_store::if_match_matches(&if_match, &record.etag) {
            return Err(AppError::PreconditionFailed);
        }
        let actor = access.caller().actor();
        let now = palisade_store::now();
        if record.state == APPROVED {
            return Ok(view(record, &now, None));
        }
        if record.requested_by == actor {
            return Err(AppError::Forbidden(format!(
                "exception '{name}' was requested with this token; another admin or \
                 boundary-admin of '{boundary}' must approve it"
            )));
        }
        if status_at(&record, &now) == "expired" {
            return Err(AppError::Conflict(format!(
                "exception '{name}' ended at {}; save it again with a later expiresAt",
                record.expires_at.replace(".000Z", "Z")
            )));
        }
        let write = ExceptionWrite {
            boundary: boundary.to_owned(),
            name: name.to_owned(),
            policy: record.policy.clone(),
            spec_json: record.spec_json.clone(),
            expires_at: record.expires_at.clone(),
            approve: true,
            // The store checks it again in the write's transaction: a change in between is a
            // 412 too.
            if_match: Some(if_match),
            create_only: false,
            max_per_boundary: MAX_PER_BOUNDARY,
            max_requests_per_boundary: MAX_REQUESTS_PER_BOUNDARY,
        };
        let (record, _) = self
            .store
            .put_exception(write, &actor)
            .await
            .map_err(from_store(boundary, name))?;
        tracing::info!(%boundary, exception = %name, %actor, requested_by = %record.requested_by, "exception approved");
        Ok(view(record, &palisade_store::now(), None))
    }

    /// One exception with its status.
    async fn get_exception(&self, access: &Access, name: &str) -> AppResult<ExceptionView> {
        let boundary = access.boundary();
        let record = self.stored::<Exceptions>(access, name).await?;
        let placement = self.placement(boundary).await?;
        Ok(with_cluster_statuses(
            view(record, &palisade_store::now(), None),
            &placement,
        ))
    }

    /// The boundary's exceptions, by name.
    pub async fn exceptions(&self, access: &Access) -> AppResult<Vec<ExceptionView>> {
        let boundary = access.boundary();
        let records = self
            .store
            .list_exceptions(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "boundary"))?;
        let now = palisade_store::now();
        // The boundary's clusters and the installs: read once for the whole list.
        let placement = self.placement(boundary).await?;
        Ok(records
            .into_iter()
            .map(|record| with_cluster_statuses(view(record, &now, None), &placement))
            .collect())
    }
}
