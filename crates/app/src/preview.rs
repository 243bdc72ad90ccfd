//! What a policy version would do before it is saved (preview), and what the audit found after
//! (report). Both judge the objects already stored in the boundary's namespaces with the Rust
//! evaluator (`palisade_policy::scan`), the one `palisade check` uses; the objects are read
//! page by page through the clusters port, so memory holds one page and the findings. A
//! preview's grandfathered resources are counted from the sets of plans the boundary's
//! resources name (`Store::plan_groups`, an index), and a page reads only those it shows.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use palisade_api_types::view::{
    ClusterPreview, ClusterReport, Denial, ExceptedFinding, Finding, FindingOwner, FindingWorkload,
    GrandfatheredResource, PolicyReport, Preview, PreviewSummary,
};
use palisade_policy::compute_plan::decide;
use palisade_policy::scan::{Scan, Violation};
use palisade_policy::{Mode, Name, PlanName, Policy, ResourceType};
use palisade_store::{ClusterRecord, PlanGroup, StoreError};

use crate::caller::Access;
use crate::error::{AppError, AppResult};
use crate::paging::{ContinueTokens, PageRequest};
use crate::policies::policy_not_found;
use crate::resources::{group_plans, plans_of};
use crate::App;

/// Objects per list call.
pub const PAGE_SIZE: u32 = 500;
/// How long reading one cluster may take before the preview reports it unreadable.
pub const CLUSTER_READ_TIMEOUT: Duration = Duration::from_secs(20);

/// Marks each finding of `preview` (one cluster's) with the stage of `rollout` that first
/// reaches its namespace (SPEC 8: which stage would meet it).
fn staged(
    preview: &mut ClusterPreview,
    rollout: &palisade_policy::rollout::Rollout,
    boundary: &Name,
    policy: &Name,
) {
    let Ok(cluster) = Name::parse(&preview.cluster) else {
        return;
    };
    let namespaces: Vec<Name> = preview
        .namespaces
        .iter()
        .filter_map(|n| Name::parse(n).ok())
        .collect();
    let stage_of = |finding: &mut Finding| {
        if let Ok(namespace) = Name::parse(&finding.namespace) {
            let first =
                rollout.first_stage_reaching(boundary, policy, &cluster, &namespaces, &namespace);
            finding.stage = u64::try_from(first + 1).ok();
        }
    };
    for denial in &mut preview.denied {
        stage_of(&mut denial.finding);
    }
    for finding in &mut preview.warned {
        stage_of(finding);
    }
}

/// A violation as the API shows it.
pub fn finding(violation: &Violation) -> Finding {
    Finding {
        kind: violation.object.kind.clone(),
        namespace: violation.object.namespace.clone(),
        name: violation.object.name.clone(),
        owners: violation
            .owners
            .iter()
            .map(|o| FindingOwner {
                kind: o.kind.clone(),
                name: o.name.clone(),
            })
            .collect(),
        workload: FindingWorkload {
            kind: violation.workload.kind.clone(),
            name: violation.workload.name.clone(),
            replicas: violation.workload.replicas,
        },
        rule: violation.rule.as_str().to_owned(),
        message: violation.message.clone(),
        stage: None,
    }
}

fn key(finding: &Finding) -> (&str, &str, &str) {
    (&finding.namespace, &finding.kind, &finding.name)
}

/// The top-level workload an object belongs to, in its namespace.
fn workload_key(finding: &Finding) -> (&str, &str, &str) {
    (
        &finding.namespace,
        &finding.workload.kind,
        &finding.workload.name,
    )
}

/// Distinct workloads among `findings` and the sum of their replicas.
fn at_risk<'f>(findings: impl Iterator<Item = &'f Finding>) -> (u64, u64) {
    let mut seen = BTreeSet::new();
    let mut replicas = 0;
    for finding in findings {
        if seen.insert(workload_key(finding)) {
            replicas += finding.workload.replicas;
        }
    }
    (seen.len() as u64, replicas)
}

/// Workloads and replicas at risk in one cluster: all of them, and those newly at risk.
#[derive(Clone, Copy, Debug, Default)]
struct Risk {
    workloads: u64,
    replicas: u64,
    new_workloads: u64,
    new_replicas: u64,
}

/// A finding of a preview, where it belongs: a cluster's list (by the cluster's index), or
/// the grandfathered resources.
enum Item {
    Denied(usize, Denial),
    Warned(usize, Finding),
    Loosened(usize, Finding),
    Resource(GrandfatheredResource),
}

/// The key that orders a finding of cluster `name`'s list number `which` in the answer.
fn finding_key(name: &str, which: u8, f: &Finding) -> String {
    format!(
        "0\0{name}\0{which}\0{}\0{}\0{}",
        f.namespace, f.kind, f.name
    )
}

/// One page of a whole preview: its findings in one list, keyed so that text order is the
/// order of the answer (clusters by name, then the lists, then objects by namespace, kind and
/// name; the grandfathered resources last, by type and name), paged like every list.
fn page_of(
    mut preview: Preview,
    page: &PageRequest,
    tokens: &ContinueTokens,
    list: &str,
) -> AppResult<Preview> {
    let mut items: Vec<(String, Item)> = Vec::new();
    for (index, cluster) in preview.clusters.iter_mut().enumerate() {
        let name = cluster.cluster.clone();
        items.extend(
            std::mem::take(&mut cluster.denied)
                .into_iter()
                .map(|d| (finding_key(&name, 0, &d.finding), Item::Denied(index, d))),
        );
        items.extend(
            std::mem::take(&mut cluster.warned)
                .into_iter()
                .map(|f| (finding_key(&name, 1, &f), Item::Warned(index, f))),
        );
        items.extend(
            std::mem::take(&mut cluster.loosened)
                .into_iter()
                .map(|f| (finding_key(&name, 2, &f), Item::Loosened(index, f))),
        );
    }
    items.extend(
        std::mem::take(&mut preview.grandfathered)
            .into_iter()
            .map(|r| {
                let key = format!("1\0{}\0{}", r.resource_type, r.name);
                (key, Item::Resource(r))
            }),
    );
    items.sort_by(|a, b| a.0.cmp(&b.0));
    let paged = page.page(tokens, list, items, |(key, _)| key.clone())?;
    for (_, item) in paged.items {
        match item {
            Item::Denied(index, denial) => {
                if let Some(cluster) = preview.clusters.get_mut(index) {
                    cluster.denied.push(denial);
                }
            }
            Item::Warned(index, finding) => {
                if let Some(cluster) = preview.clusters.get_mut(index) {
                    cluster.warned.push(finding);
                }
            }
            Item::Loosened(index, finding) => {
                if let Some(cluster) = preview.clusters.get_mut(index) {
                    cluster.loosened.push(finding);
                }
            }
            Item::Resource(resource) => preview.grandfathered.push(resource),
        }
    }
    preview.continue_token = paged.continue_token;
    Ok(preview)
}

/// The grandfathered resource (type and name) a page's key names; `None` when the key is a
/// cluster's finding's.
fn resource_after(key: &str) -> Option<AppResult<(&str, &str)>> {
    let rest = key.strip_prefix("1\0")?;
    Some(
        rest.split_once('\0')
            .ok_or_else(|| AppError::invalid("/continue", "is not a continue token of this list")),
    )
}

/// How many of a cluster's findings come after the key `after` in the answer (all of them
/// without one).
fn findings_after(preview: &ClusterPreview, after: Option<&str>) -> usize {
    let name = &preview.cluster;
    let keys = (preview
        .denied
        .iter()
        .map(|d| finding_key(name, 0, &d.finding)))
    .chain(preview.warned.iter().map(|f| finding_key(name, 1, f)))
    .chain(preview.loosened.iter().map(|f| finding_key(name, 2, f)));
    match after {
        None => keys.count(),
        Some(after) => keys.filter(|key| key.as_str() > after).count(),
    }
}

fn in_scope(policy: Option<&Policy>, cluster: &Name) -> bool {
    policy.is_some_and(|p| p.installs_in(cluster))
}

/// The most excepted objects a cluster's preview lists (they are not paged).
const MAX_EXCEPTED_SHOWN: usize = 100;

impl App {
    /// The first page of [`App::preview_policy_page`] (the lists' default limit).
    pub async fn preview_policy(
        &self,
        access: &Access,
        name: &str,
        spec_json: &[u8],
    ) -> AppResult<Preview> {
        self.preview_policy_page(access, name, spec_json, &PageRequest::default())
            .await
    }

    /// Previews `spec_json` (or, when it is empty, the saved version) of policy `name`
    /// against what the boundary runs (boundary-admin or admin): what it would deny or warn
    /// about in every cluster of its scope, what it would allow that the saved version
    /// denies, and the platform resources whose plan it would disallow. Nothing is written.
    /// The summary is whole; the findings are paged like a list (see [`Preview`]): each page
    /// reads the clusters anew and is cut after the previous page's last finding, and reads
    /// the grandfathered resources it shows (at most one more), not the boundary's others.
    pub async fn preview_policy_page(
        &self,
        access: &Access,
        name: &str,
        spec_json: &[u8],
        page: &PageRequest,
    ) -> AppResult<Preview> {
        access.caller().require_boundary_admin()?;
        let boundary = access.boundary();
        let policy_name = crate::path_name("policy", name)?;
        // A bad page is refused before any cluster is read.
        let tokens = self.continue_tokens();
        let list = format!("preview of {boundary}/{name}");
        page.limit()?;
        page.after(&tokens, &list)?;
        let saved_record = match self.store.get_policy(boundary, name).await {
            Ok(record) => Some(record),
            Err(StoreError::NotFound) => None,
            Err(other) => return Err(AppError::from_store(other, "policy")),
        };
        let saved = match &saved_record {
            Some(record) => Some(self.policy_cache().decode(record, &self.catalog)?),
            None => None,
        };
        let new = if spec_json.iter().all(u8::is_ascii_whitespace) {
            saved
                .clone()
                .ok_or_else(|| policy_not_found(boundary, name))?
        } else {
            self.validate_spec(policy_name, spec_json)?.0
        };
        let boundary_name = crate::path_name("boundary", boundary)?;
        let clusters = self.attached_records(boundary).await?;
        // The boundary's exceptions in force now: what they let past is not a denial.
        let exceptions: std::sync::Arc<Vec<palisade_policy::Exception>> =
            std::sync::Arc::new(crate::exceptions::in_force(
                &self
                    .store
                    .list_exceptions(boundary_name.as_str())
                    .await
                    .map_err(|e| AppError::from_store(e, "boundary"))?,
            ));
        let mut tasks = tokio::task::JoinSet::new();
        let mut cluster_names = Vec::new();
        for record in clusters {
            let Ok(cluster) = Name::parse(&record.name) else {
                continue;
            };
            let new_here = in_scope(Some(&new), &cluster);
            let saved_here = in_scope(saved.as_ref(), &cluster);
            if !new_here && !saved_here {
                continue;
            }
            cluster_names.push(record.name.clone());
            let app = self.clone();
            let boundary = boundary_name.clone();
            let new = new_here.then(|| new.clone());
            let saved = saved.clone().filter(|_| saved_here);
            let exceptions = exceptions.clone();
            tasks.spawn(async move {
                app.preview_cluster(
                    &record,
                    &boundary,
                    new.as_ref(),
                    saved.as_ref(),
                    &exceptions,
                )
                .await
            });
        }
        let mut previews = Vec::new();
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(preview) => previews.push(preview),
                Err(error) => return Err(AppError::Internal(format!("preview task: {error}"))),
            }
        }
        previews.sort_by(|(a, _), (b, _)| a.cluster.cmp(&b.cluster));
        if let Some(rollout) = new.rollout() {
            for (preview, _) in &mut previews {
                staged(preview, rollout, &boundary_name, new.name());
            }
        }
        // The grandfathered resources come after every cluster's findings: this page reads
        // only those it can show (and one more, to know whether more follow).
        let after = page.after(&tokens, &list)?;
        let (after_resource, want) = match after.as_deref().map(resource_after) {
            Some(Some(resource)) => (Some(resource?), page.limit()? + 1),
            _ => {
                let findings = previews
                    .iter()
                    .map(|(preview, _)| findings_after(preview, after.as_deref()))
                    .sum::<usize>();
                (None, (page.limit()? + 1).saturating_sub(findings))
            }
        };
        let (resources_grandfathered, grandfathered) = self
            .grandfathered_by(boundary, &new, after_resource, want)
            .await?;
        let mut summary = PreviewSummary {
            resources_grandfathered,
            ..PreviewSummary::default()
        };
        for (preview, risk) in &previews {
            summary.objects += preview.denied.len() as u64;
            summary.new_objects += preview.denied.iter().filter(|d| d.new).count() as u64;
            summary.warned += preview.warned.len() as u64;
            summary.loosened += preview.loosened.len() as u64;
            if preview.error.is_some() {
                summary.clusters_unreadable += 1;
            }
            // Each cluster's workloads are its own (a Deployment of one name in two
            // clusters is two workloads).
            summary.workloads += risk.workloads;
            summary.replicas_at_risk += risk.replicas;
            summary.new_workloads += risk.new_workloads;
            summary.new_replicas_at_risk += risk.new_replicas;
        }
        let whole = Preview {
            boundary: boundary.to_owned(),
            policy: name.to_owned(),
            mode: new.mode().as_str().to_owned(),
            saved: saved_record.is_some(),
            summary,
            clusters: previews.into_iter().map(|(preview, _)| preview).collect(),
            grandfathered,
            continue_token: None,
        };
        page_of(whole, page, &tokens, &list)
    }

    /// One cluster's part of a preview, with its workloads and replicas at risk (all of them
    /// by the core's count, and those the saved version does not already put at risk); a
    /// cluster that cannot be read says why.
    async fn preview_cluster(
        &self,
        record: &ClusterRecord,
        boundary: &Name,
        new: Option<&Policy>,
        saved: Option<&Policy>,
        exceptions: &[palisade_policy::Exception],
    ) -> (ClusterPreview, Risk) {
        let mut preview = ClusterPreview {
            cluster: record.name.clone(),
            ..ClusterPreview::default()
        };
        let kubeconfig = match self.kubeconfig_of(record) {
            Ok(kubeconfig) => kubeconfig,
            Err(error) => {
                preview.error = Some(error.to_string());
                return (preview, Risk::default());
            }
        };
        let judged: Vec<&Policy> = new.into_iter().chain(saved).collect();
        let here: Vec<&palisade_policy::Exception> = exceptions
            .iter()
            .filter(|x| x.in_cluster(&record.name))
            .collect();
        let mut scan = Scan::new(judged).with_exceptions(here);
        let mut evaluating = Duration::ZERO;
        let mut visit = |page: &[serde_json::Value]| {
            let started = Instant::now();
            for object in page {
                scan.observe(object);
            }
            evaluating += started.elapsed();
        };
        let read = tokio::time::timeout(
            CLUSTER_READ_TIMEOUT,
            self.clusters
                .scan(&kubeconfig, boundary, PAGE_SIZE, &mut visit),
        )
        .await;
        let info = match read {
            Ok(Ok(info)) => info,
            Ok(Err(error)) => {
                preview.error = Some(error.to_string());
                return (preview, Risk::default());
            }
            Err(_) => {
                preview.error = Some(format!(
                    "reading the cluster took longer than {} s",
                    CLUSTER_READ_TIMEOUT.as_secs()
                ));
                return (preview, Risk::default());
            }
        };
        let started = Instant::now();
        let mut findings = scan.finish().into_iter();
        let new_findings = new.map(|_| findings.next().unwrap_or_default());
        let saved_findings = saved.map(|_| findings.next().unwrap_or_default());
        preview.namespaces = info.namespaces;
        preview.checked = new_findings
            .as_ref()
            .or(saved_findings.as_ref())
            .map_or(0, |f| f.checked_total());
        let mut risk = Risk::default();
        // What the saved version denies (enforce mode) in this cluster.
        let saved_denied: Vec<Finding> = match (saved, &saved_findings) {
            (Some(policy), Some(found)) if policy.mode() == Mode::Enforce => {
                found.violations.iter().map(finding).collect()
            }
            _ => Vec::new(),
        };
        if let (Some(policy), Some(found)) = (new, &new_findings) {
            preview.excepted = found
                .excepted
                .iter()
                .take(MAX_EXCEPTED_SHOWN)
                .map(|x| ExceptedFinding {
                    kind: x.object.kind.clone(),
                    namespace: x.object.namespace.clone(),
                    name: x.object.name.clone(),
                    exception: x.exception.to_string(),
                })
                .collect();
            let list: Vec<Finding> = found.violations.iter().map(finding).collect();
            match policy.mode() {
                Mode::Enforce => {
                    // A workload the saved version already denies is not newly at risk,
                    // whichever of its objects either version names.
                    let already: BTreeSet<(&str, &str, &str)> =
                        saved_denied.iter().map(workload_key).collect();
                    preview.denied = list
                        .into_iter()
                        .map(|f| Denial {
                            new: !already.contains(&workload_key(&f)),
                            finding: f,
                        })
                        .collect();
                    (risk.workloads, risk.replicas) = found.workloads_at_risk();
                    (risk.new_workloads, risk.new_replicas) =
                        at_risk(preview.denied.iter().filter(|d| d.new).map(|d| &d.finding));
                }
                Mode::Audit => preview.warned = list,
            }
        }
        let still: BTreeSet<(&str, &str, &str)> =
            preview.denied.iter().map(|d| key(&d.finding)).collect();
        preview.loosened = saved_denied
            .into_iter()
            .filter(|f| !still.contains(&key(f)))
            .collect();
        evaluating += started.elapsed();
        preview.list_ms = info.list_time.as_millis() as u64;
        preview.evaluate_ms = evaluating.as_millis() as u64;
        (preview, risk)
    }

    /// How many of the boundary's resources have a plan that `policy` alone disallows
    /// (enforce mode only), and the first `want` of them after the resource `after` (type and
    /// name), in (type, name) order. Which resources those are is decided by the sets of
    /// plans they name, counted by the store without reading them ([`PlanGroup`]); only the
    /// resources returned are read, each judged as a whole.
    async fn grandfathered_by(
        &self,
        boundary: &str,
        policy: &Policy,
        after: Option<(&str, &str)>,
        want: usize,
    ) -> AppResult<(u64, Vec<GrandfatheredResource>)> {
        if policy.mode() != Mode::Enforce || policy.plan_entries().is_none() {
            return Ok((0, Vec::new()));
        }
        let only = std::slice::from_ref(policy);
        let disallowed = |ty: ResourceType, plan: &PlanName| {
            decide(only, &self.catalog, ty, plan).is_ok_and(|decision| !decision.allowed)
        };
        let groups = self
            .store
            .plan_groups(boundary)
            .await
            .map_err(|e| AppError::from_store(e, "resource"))?;
        let grandfathered: Vec<&PlanGroup> = groups
            .iter()
            .filter(|group| {
                ResourceType::parse(&group.resource_type)
                    .is_ok_and(|ty| group_plans(group).iter().any(|plan| disallowed(ty, plan)))
            })
            .collect();
        let count = grandfathered.iter().map(|group| group.resources).sum();
        let after = after.map(|(ty, name)| format!("{ty}/{name}"));
        let records = self
            .resources_in_groups(boundary, &grandfathered, after.as_deref(), Some(want))
            .await
            .map_err(|e| AppError::from_store(e, "resource"))?;
        let mut out = Vec::new();
        for record in records {
            let Ok(ty) = ResourceType::parse(&record.resource_type) else {
                continue;
            };
            let mut plans = Vec::new();
            let mut message = None;
            for plan in plans_of(&record) {
                if let Ok(decision) = decide(only, &self.catalog, ty, &plan) {
                    if !decision.allowed {
                        message = message.or_else(|| decision.message());
                        plans.push(plan.to_string());
                    }
                }
            }
            if let Some(message) = message {
                out.push(GrandfatheredResource {
                    resource_type: record.resource_type,
                    name: record.name,
                    plans,
                    message,
                });
            }
        }
        Ok((count, out))
    }

    /// What the last audit of policy `name` found in each cluster of its scope (any caller
    /// who sees the boundary).
    pub async fn policy_report(&self, access: &Access, name: &str) -> AppResult<PolicyReport> {
        let boundary = access.boundary();
        let record = self.stored_policy(access, name).await?;
        let policy = self.policy_cache().decode(&record, &self.catalog)?;
        let clusters = self.attached_records(boundary).await?;
        let audits = self
            .store
            .audit_reports(boundary, name)
            .await
            .map_err(|e| AppError::from_store(e, "policy"))?;
        let mut reports = Vec::new();
        for cluster in clusters {
            let Ok(cluster_name) = Name::parse(&cluster.name) else {
                continue;
            };
            if !in_scope(Some(&policy), &cluster_name) {
                continue;
            }
            let mut report = ClusterReport {
                cluster: cluster.name.clone(),
                taken_at: None,
                current: false,
                error: None,
                checked: 0,
                violations: 0,
                findings: Vec::new(),
            };
            if let Some(audit) = audits.iter().find(|a| a.cluster == cluster.name) {
                report.taken_at = Some(audit.taken_at.clone());
                report.current = audit.policy_etag == record.etag;
                report.error = audit.error.clone();
                report.checked = audit.checked.max(0) as u64;
                report.violations = audit.violations.max(0) as u64;
                report.findings = serde_json::from_str(&audit.findings_json).map_err(|e| {
                    AppError::Internal(format!("stored audit report cannot be decoded: {e}"))
                })?;
            }
            reports.push(report);
        }
        Ok(PolicyReport {
            boundary: boundary.to_owned(),
            policy: name.to_owned(),
            mode: policy.mode().as_str().to_owned(),
            clusters: reports,
        })
    }
}
