//! The compute-plan check as the store runs it inside a write's transaction: decode every
//! stored policy of the boundary (one that cannot be decoded makes the answer
//! `PolicyUnavailable`, never "allow"), then decide each plan that changes, in request order
//! (SPEC 2.2-2.4). Also the decoded-policy cache and the `Warning` texts of plan paths.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use palisade_api_types::error::compute_plan_not_allowed;
use palisade_api_types::PolicySpec;
use palisade_policy::compute_plan::{decide, CompiledPlans, PlanCheck, PlanDecision};
use palisade_policy::exception::except_plan;
use palisade_policy::{Catalog, Exception, Name, Policy, ResourceType, Warning};
use palisade_store::{Check, ExceptionRecord, PoliciesVersion, PolicyRecord, Veto};

use crate::error::AppError;

/// Decoded policies by (boundary, name, exact stored spec text). Decoding is a pure function
/// of the name and the text, so a hit is always right, and a row changed behind palisade's
/// back (even to text that cannot be decoded) misses and is decoded afresh. Bounded: cleared
/// when it grows past [`POLICY_CACHE_LIMIT`] entries. One per [`crate::App`].
#[derive(Debug, Default)]
pub struct PolicyCache {
    entries: Mutex<HashMap<(String, String, String), Policy>>,
    /// Per boundary, its policies' compute-plan decisions made once (issue 14, item 5), with
    /// the (name, exact spec text) of the policies they were made from: a create compares
    /// those texts and looks its plan up, instead of decoding and deciding.
    compiled: Mutex<HashMap<String, CompiledEntry>>,
    /// The decisions of a boundary without policies (every plan allowed).
    empty: OnceLock<Arc<CompiledPlans>>,
}

#[derive(Debug)]
struct CompiledEntry {
    made_from: Vec<(String, String)>,
    /// The (name, spec, state) of the exceptions `exceptions` were decoded from.
    exceptions_from: Vec<(String, String, String)>,
    exceptions: Arc<Vec<Exception>>,
    /// The boundary's policies' version when they were read, if known: a write that reads
    /// the same version reuses these decisions without reading the policies.
    version: Option<PoliciesVersion>,
    plans: Arc<CompiledPlans>,
}

/// How many decoded policies a [`PolicyCache`] keeps at most.
pub const POLICY_CACHE_LIMIT: usize = 4096;

impl PolicyCache {
    /// Decodes stored policies. Any failure is `PolicyUnavailable`: a policy palisade cannot
    /// read is never treated as absent.
    pub fn decode_all(
        &self,
        records: &[PolicyRecord],
        catalog: &Catalog,
    ) -> Result<Vec<Policy>, AppError> {
        records
            .iter()
            .map(|record| self.decode(record, catalog))
            .collect()
    }

    /// Decodes one stored policy (see [`PolicyCache::decode_all`]).
    pub fn decode(&self, record: &PolicyRecord, catalog: &Catalog) -> Result<Policy, AppError> {
        self.decode_or_why(record, catalog).map_err(|why| {
            AppError::PolicyUnavailable(format!(
                "stored policy {}/{} cannot be decoded: {why}",
                record.boundary, record.name
            ))
        })
    }

    /// Decodes one stored policy, or says why it cannot be (the same validation as the API's).
    pub fn decode_or_why(
        &self,
        record: &PolicyRecord,
        catalog: &Catalog,
    ) -> Result<Policy, String> {
        let key = (
            record.boundary.clone(),
            record.name.clone(),
            record.spec_json.clone(),
        );
        if let Some(policy) = self.entries.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(policy);
        }
        let policy = decode_uncached(record, catalog)?;
        if let Ok(mut entries) = self.entries.lock() {
            if entries.len() >= POLICY_CACHE_LIMIT {
                entries.clear();
            }
            entries.insert(key, policy.clone());
        }
        Ok(policy)
    }

    /// The compute-plan decisions of the boundary whose stored policies are `records` (all of
    /// one boundary), made once per version of its policies. A policy that cannot be decoded
    /// is `PolicyUnavailable`, as for [`PolicyCache::decode_all`].
    pub fn compiled(
        &self,
        records: &[PolicyRecord],
        catalog: &Catalog,
    ) -> Result<Arc<CompiledPlans>, AppError> {
        match records.first() {
            Some(first) => self.compiled_at(&first.boundary, None, records, catalog),
            None => Ok(self.empty(catalog)),
        }
    }

    /// The decisions made for `boundary` when its policies' version was `version`, if the
    /// last ones made for it were made then (`None` otherwise: read the policies and call
    /// [`PolicyCache::compiled_at`]).
    pub fn known(&self, boundary: &str, version: PoliciesVersion) -> Option<Arc<CompiledPlans>> {
        self.known_with_exceptions(boundary, version)
            .map(|(plans, _)| plans)
    }

    /// As [`PolicyCache::known`], with the boundary's approved exceptions at that version.
    pub fn known_with_exceptions(
        &self,
        boundary: &str,
        version: PoliciesVersion,
    ) -> Option<(Arc<CompiledPlans>, Arc<Vec<Exception>>)> {
        let map = self.compiled.lock().ok()?;
        map.get(boundary)
            .filter(|entry| entry.version == Some(version))
            .map(|entry| (entry.plans.clone(), entry.exceptions.clone()))
    }

    /// The version of `boundary`'s policies the last decisions made for it were made at, if
    /// known.
    pub fn latest(&self, boundary: &str) -> Option<PoliciesVersion> {
        let map = self.compiled.lock().ok()?;
        map.get(boundary).and_then(|entry| entry.version)
    }

    /// As [`PolicyCache::compiled`] for `boundary`, whose stored policies at `version` (if
    /// known) are `records`; remembered with that version for [`PolicyCache::known`].
    pub fn compiled_at(
        &self,
        boundary: &str,
        version: Option<PoliciesVersion>,
        records: &[PolicyRecord],
        catalog: &Catalog,
    ) -> Result<Arc<CompiledPlans>, AppError> {
        self.compiled_with_exceptions(boundary, version, records, None, catalog)
            .map(|(plans, _)| plans)
    }

    /// As [`PolicyCache::compiled_at`], with the boundary's stored exceptions (`None`: not
    /// read, kept as they were). An exception that cannot be decoded is `PolicyUnavailable`.
    pub fn compiled_with_exceptions(
        &self,
        boundary: &str,
        version: Option<PoliciesVersion>,
        records: &[PolicyRecord],
        exception_records: Option<&[ExceptionRecord]>,
        catalog: &Catalog,
    ) -> Result<(Arc<CompiledPlans>, Arc<Vec<Exception>>), AppError> {
        let exceptions_from: Option<Vec<(String, String, String)>> = exception_records.map(|e| {
            e.iter()
                .map(|r| (r.name.clone(), r.spec_json.clone(), r.state.clone()))
                .collect()
        });
        let same = |entry: &CompiledEntry| {
            entry.made_from.len() == records.len()
                && entry
                    .made_from
                    .iter()
                    .zip(records)
                    .all(|((name, spec), r)| *name == r.name && *spec == r.spec_json)
                && exceptions_from
                    .as_ref()
                    .is_none_or(|from| *from == entry.exceptions_from)
        };
        let hit = self.compiled.lock().ok().and_then(|mut map| {
            let entry = map.get_mut(boundary).filter(|e| same(e))?;
            if version.is_some() {
                entry.version = version;
            }
            Some((entry.plans.clone(), entry.exceptions.clone()))
        });
        if let Some(hit) = hit {
            return Ok(hit);
        }
        let plans = if records.is_empty() {
            self.empty(catalog)
        } else {
            let policies = self.decode_all(records, catalog)?;
            Arc::new(CompiledPlans::new(&policies, catalog))
        };
        let exceptions = Arc::new(
            exception_records
                .unwrap_or_default()
                .iter()
                .filter(|r| r.state == crate::exceptions::APPROVED)
                .map(crate::exceptions::decode_stored)
                .collect::<Result<Vec<_>, _>>()?,
        );
        if let Ok(mut map) = self.compiled.lock() {
            if map.len() >= POLICY_CACHE_LIMIT {
                map.clear();
            }
            let made_from = records
                .iter()
                .map(|r| (r.name.clone(), r.spec_json.clone()))
                .collect();
            map.insert(
                boundary.to_owned(),
                CompiledEntry {
                    made_from,
                    exceptions_from: exceptions_from.unwrap_or_default(),
                    exceptions: exceptions.clone(),
                    version,
                    plans: plans.clone(),
                },
            );
        }
        Ok((plans, exceptions))
    }

    fn empty(&self, catalog: &Catalog) -> Arc<CompiledPlans> {
        self.empty
            .get_or_init(|| Arc::new(CompiledPlans::new(&[], catalog)))
            .clone()
    }

    /// How many decoded policies are kept now.
    pub fn len(&self) -> usize {
        self.entries.lock().map_or(0, |e| e.len())
    }

    /// Whether nothing is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn decode_uncached(record: &PolicyRecord, catalog: &Catalog) -> Result<Policy, String> {
    decode_spec(&record.name, &record.spec_json, catalog)
}

/// Decodes a stored spec of policy `name` (a record's, or an earlier version's), or says why
/// it cannot be.
pub fn decode_spec(name: &str, spec_json: &str, catalog: &Catalog) -> Result<Policy, String> {
    let name = Name::parse(name).map_err(|e| e.to_string())?;
    let spec = PolicySpec::from_json(spec_json.as_bytes()).map_err(|e| e.to_string())?;
    let (policy, _warnings) = spec.validate(name, catalog).map_err(|e| e.to_string())?;
    Ok(policy)
}

/// The audit warnings and, on denial, the 422 for `checks` of a resource of type `ty`, from
/// decisions made beforehand. Functions are decided too (for their warning); callers enforce
/// only checked types.
pub fn check_compiled(
    compiled: &CompiledPlans,
    catalog: &Catalog,
    ty: ResourceType,
    checks: &[PlanCheck],
) -> Result<Vec<Warning>, AppError> {
    check_excepted(compiled, &[], "", "", catalog, ty, checks)
}

/// [`check_compiled`] for resource `name`, with the boundary's approved `exceptions` judged
/// at `now` (SPEC 7): a plan that only excepted policies deny is allowed, with a warning
/// naming each exception used.
pub fn check_excepted(
    compiled: &CompiledPlans,
    exceptions: &[Exception],
    name: &str,
    now: &str,
    catalog: &Catalog,
    ty: ResourceType,
    checks: &[PlanCheck],
) -> Result<Vec<Warning>, AppError> {
    let mut warnings = Vec::new();
    for check in checks {
        let decision: &PlanDecision = match compiled.decide(ty, &check.plan) {
            Some(decision) => decision,
            // Not in the catalog: `decide` says why (before any policy is looked at).
            None => {
                return Err(match decide(&[], catalog, ty, &check.plan) {
                    Err(e) => AppError::invalid("/plan", e),
                    Ok(_) => AppError::Internal(format!(
                        "plan '{}' of {ty} has no compiled decision",
                        check.plan
                    )),
                })
            }
        };
        warnings.extend(decision.audit_warnings.iter().cloned());
        if decision.allowed {
            continue;
        }
        let excepted = except_plan(decision, exceptions, name, now);
        for exception in &excepted.used {
            warnings.push(Warning::PlanAllowedByException {
                plan: check.plan.to_string(),
                exception: exception.name.to_string(),
                until: exception.expires_at.clone(),
            });
        }
        if !excepted.allowed() {
            let mut still = decision.clone();
            still.denied_by = excepted.still_denied_by;
            let component = check.component.as_ref().map(Name::as_str);
            return Err(AppError::PlanNotAllowed(
                Box::new(compute_plan_not_allowed(&still, component)),
                warnings.iter().map(ToString::to_string).collect(),
            ));
        }
    }
    Ok(warnings)
}

/// Where a [`plan_guard`] leaves the warnings of its last answer: the store only learns
/// whether the guard allowed the write, and the caller reads the warnings here.
pub type WarningSink = Arc<std::sync::Mutex<Vec<Warning>>>;

/// The guard the store runs (boxed, a `Guard`) for a create or plan move of resource `name`
/// of a checked type: looks the plans up in the decisions made at the boundary's policies'
/// version, making them first when that version has not been seen.
pub(crate) struct PlanGuard {
    pub(crate) cache: Arc<PolicyCache>,
    pub(crate) catalog: Arc<Catalog>,
    pub(crate) ty: ResourceType,
    pub(crate) name: String,
    pub(crate) checks: Vec<PlanCheck>,
    pub(crate) sink: WarningSink,
}

impl PlanGuard {
    /// The answer as the store takes it (allowed or vetoed), the warnings left in the sink.
    fn answer(&self, plans: &CompiledPlans, exceptions: &[Exception]) -> Result<(), Veto> {
        // The clock is read as the transaction decides: an exception ends at `expiresAt`.
        let now = palisade_store::now();
        check_excepted(
            plans,
            exceptions,
            &self.name,
            &now,
            &self.catalog,
            self.ty,
            &self.checks,
        )
        .map(|warnings| {
            if let Ok(mut sink) = self.sink.lock() {
                *sink = warnings;
            }
        })
        .map_err(boxed)
    }
}

impl Check for PlanGuard {
    fn known(&self, boundary: &str, version: PoliciesVersion) -> Option<Result<(), Veto>> {
        let (plans, exceptions) = self.cache.known_with_exceptions(boundary, version)?;
        Some(self.answer(&plans, &exceptions))
    }

    fn latest(&self, boundary: &str) -> Option<PoliciesVersion> {
        self.cache.latest(boundary)
    }

    fn check(
        self: Box<Self>,
        boundary: &str,
        version: PoliciesVersion,
        policies: &[PolicyRecord],
        exceptions: &[ExceptionRecord],
    ) -> Result<(), Veto> {
        let (plans, exceptions) = self
            .cache
            .compiled_with_exceptions(
                boundary,
                Some(version),
                policies,
                Some(exceptions),
                &self.catalog,
            )
            .map_err(boxed)?;
        self.answer(&plans, &exceptions)
    }
}

fn boxed(error: AppError) -> palisade_store::Veto {
    Box::new(error)
}

/// Counts a plan decision: `allowed`, `denied`, `unavailable`, or `not_enforced` (functions).
pub fn count_decision(resource_type: &str, outcome: &'static str) {
    metrics::counter!(
        "palisade_plan_decisions_total",
        "type" => resource_type.to_owned(),
        "outcome" => outcome
    )
    .increment(1);
}

/// The outcome label of a refused plan path.
pub fn outcome_of(error: &AppError) -> &'static str {
    match error {
        AppError::PlanNotAllowed(..) => "denied",
        AppError::PolicyUnavailable(_) => "unavailable",
        _ => "error",
    }
}
