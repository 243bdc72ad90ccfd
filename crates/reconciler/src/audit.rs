//! The continuous audit (both modes): what each applied policy's rules find among the objects
//! already stored in the boundary's namespaces of a cluster. It runs after a pass that changed
//! the boundary's policies in the cluster (or its namespaces), and otherwise every
//! [`crate::Settings::audit_interval`]; one listing of the boundary serves all its policies.
//! Results go to the store (the API's `.../report` and the portal) and, where the cluster
//! serves `openreports.io/v1alpha1`, into one `Report` per namespace and policy.
//!
//! An audit writes (its results, the cluster's reports) only while this replica holds the
//! cluster's lease: it confirms the lease before each write, and its read of the cluster ends
//! as soon as the lease is known lost (SPEC 4.3 v3.2).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use palisade_app::ports::Records;
use palisade_app::preview::{finding, PAGE_SIZE};
use palisade_app::reconcile::AuditRecord;
use palisade_policy::scan::{Findings, Scan};
use palisade_policy::{Name, Policy};

use crate::fence::Fence;
use crate::reports::{render_report, NamespaceAudit};
use crate::ClusterClient;

/// One boundary's audit in one cluster.
#[derive(Debug)]
pub(crate) struct AuditJob {
    pub cluster: String,
    pub client: ClusterClient,
    pub boundary: Name,
    /// The in-scope policies with admission rules and the etag of each.
    pub policies: Vec<(String, Policy)>,
    /// The boundary's exceptions in force in the cluster: what they let past is `skip`.
    pub exceptions: Vec<palisade_policy::Exception>,
    /// The cluster's lease, confirmed before each write.
    pub fence: Fence,
}

#[derive(Debug)]
struct Mark {
    /// What the last (or running) audit read.
    fingerprint: String,
    at: Instant,
    running: bool,
    /// A newer state asked for while one ran: it runs when that one ends.
    queued: Option<(String, AuditJob)>,
}

/// Which (cluster, boundary) audits are due; at most one runs per pair, and a change seen
/// while one runs is audited right after it.
#[derive(Debug, Default)]
pub(crate) struct Audits {
    marks: Mutex<HashMap<(String, String), Mark>>,
}

/// What the audited state is: the policies' versions and the boundary's namespaces.
pub(crate) fn fingerprint(policies: &[(String, Policy)], namespaces: &[&str]) -> String {
    let mut parts: Vec<String> = policies
        .iter()
        .map(|(etag, p)| format!("{}={etag}", p.name()))
        .collect();
    parts.extend(namespaces.iter().map(|n| format!("ns:{n}")));
    parts.join(",")
}

impl Audits {
    /// The job to start now, when it is due: its state changed since the last audit, or
    /// `interval` passed. While one runs, a changed state is queued behind it instead.
    pub(crate) fn offer(
        &self,
        job: AuditJob,
        fingerprint: String,
        interval: Duration,
    ) -> Option<AuditJob> {
        let mut marks = self.marks.lock().ok()?;
        let key = (job.cluster.clone(), job.boundary.to_string());
        match marks.get_mut(&key) {
            Some(mark) if mark.running => {
                if mark.fingerprint != fingerprint {
                    mark.queued = Some((fingerprint, job));
                }
                None
            }
            Some(mark) if mark.fingerprint == fingerprint && mark.at.elapsed() < interval => None,
            _ => {
                marks.insert(
                    key,
                    Mark {
                        fingerprint,
                        at: Instant::now(),
                        running: true,
                        queued: None,
                    },
                );
                Some(job)
            }
        }
    }

    /// Forgets the audits of `cluster` (given up): one that runs writes nothing more, and a
    /// replica that takes the cluster again audits it at its first pass.
    pub(crate) fn forget(&self, cluster: &str) {
        if let Ok(mut marks) = self.marks.lock() {
            marks.retain(|(c, _), _| c != cluster);
        }
    }

    /// Records the end of an audit (a failed one is due again at the next pass); answers the
    /// job queued behind it, now running.
    fn finish(&self, cluster: &str, boundary: &str, succeeded: bool) -> Option<AuditJob> {
        let mut marks = self.marks.lock().ok()?;
        let mark = marks.get_mut(&(cluster.to_owned(), boundary.to_owned()))?;
        mark.at = Instant::now();
        if !succeeded {
            mark.fingerprint.clear();
        }
        match mark.queued.take() {
            Some((fingerprint, job)) => {
                mark.fingerprint = fingerprint;
                Some(job)
            }
            None => {
                mark.running = false;
                None
            }
        }
    }
}

fn unix_seconds() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

/// Runs an audit, then each one queued behind it.
pub(crate) async fn run(
    audits: &Audits,
    port: &dyn Records,
    installation: &str,
    job: AuditJob,
    timeout: Duration,
) {
    let mut next = Some(job);
    while let Some(job) = next {
        let (cluster, boundary) = (job.cluster.clone(), job.boundary.to_string());
        let succeeded = run_one(port, installation, job, timeout).await;
        next = audits.finish(&cluster, &boundary, succeeded);
    }
}

/// Runs one audit: reads the boundary's objects once, judges them with every policy, records
/// the results, then writes the cluster's reports when it serves them. A boundary without
/// policies in the cluster is not read: its results and reports are removed.
async fn run_one(port: &dyn Records, installation: &str, job: AuditJob, timeout: Duration) -> bool {
    // The cluster is another replica's now (or cannot be told): no audit of this one.
    if job.fence.confirm("an audit").await.is_err() {
        return false;
    }
    if job.policies.is_empty() {
        let mut succeeded = true;
        if let Err(error) = port
            .record_audit_reports(&job.cluster, job.boundary.as_str(), Vec::new())
            .await
        {
            tracing::warn!(cluster = %job.cluster, boundary = %job.boundary, %error, "audit not recorded");
            succeeded = false;
        }
        if let Err(error) = write_reports(&job, installation, &[], &[], 0).await {
            tracing::warn!(cluster = %job.cluster, boundary = %job.boundary, %error, "audit reports not removed");
            succeeded = false;
        }
        return succeeded;
    }
    let taken_at = palisade_app::reconcile::now();
    let seconds = unix_seconds();
    let policies: Vec<&Policy> = job.policies.iter().map(|(_, p)| p).collect();
    let exceptions: Vec<&palisade_policy::Exception> = job.exceptions.iter().collect();
    let mut scan = Scan::new(policies).with_exceptions(exceptions);
    let mut visit = |page: &[serde_json::Value]| {
        for object in page {
            scan.observe(object);
        }
    };
    let read = job.fence.while_held(tokio::time::timeout(
        timeout,
        job.client
            .scan_boundary(&job.boundary, PAGE_SIZE, &mut visit),
    ));
    let Some(read) = read.await else {
        tracing::info!(cluster = %job.cluster, boundary = %job.boundary, "audit abandoned: the cluster's lease was lost");
        return false;
    };
    let (namespaces, outcome) = match read {
        Ok(Ok(scanned)) => (scanned.namespaces, Ok(scan.finish())),
        Ok(Err(error)) => (Vec::new(), Err(error.to_string())),
        Err(_) => (
            Vec::new(),
            Err(format!(
                "reading the cluster took longer than {} s",
                timeout.as_secs()
            )),
        ),
    };
    let records: Vec<AuditRecord> = job
        .policies
        .iter()
        .enumerate()
        .map(|(index, (etag, policy))| {
            let found = outcome.as_ref().ok().and_then(|all| all.get(index));
            let findings: Vec<_> = found
                .map(|f| f.violations.iter().map(finding).collect())
                .unwrap_or_default();
            AuditRecord {
                boundary: job.boundary.to_string(),
                policy: policy.name().to_string(),
                cluster: job.cluster.clone(),
                policy_etag: etag.clone(),
                taken_at: taken_at.clone(),
                error: outcome.as_ref().err().cloned(),
                checked: found.map_or(0, |f| f.checked_total() as i64),
                violations: findings.len() as i64,
                findings_json: serde_json::to_string(&findings).unwrap_or_else(|_| "[]".into()),
            }
        })
        .collect();
    let mut succeeded = outcome.is_ok();
    if job.fence.confirm("an audit's results").await.is_err() {
        return false;
    }
    if let Err(error) = port
        .record_audit_reports(&job.cluster, job.boundary.as_str(), records)
        .await
    {
        tracing::warn!(cluster = %job.cluster, boundary = %job.boundary, %error, "audit not recorded");
        succeeded = false;
    }
    if let Ok(all) = &outcome {
        if job.fence.confirm("an audit's reports").await.is_err() {
            return false;
        }
        if let Err(error) = write_reports(&job, installation, &namespaces, all, seconds).await {
            tracing::warn!(cluster = %job.cluster, boundary = %job.boundary, %error, "audit reports not written");
            succeeded = false;
        }
    }
    tracing::debug!(cluster = %job.cluster, boundary = %job.boundary, succeeded, "audit done");
    succeeded
}

/// Writes the reports of every policy in every namespace, removing the boundary's others.
async fn write_reports(
    job: &AuditJob,
    installation: &str,
    namespaces: &[String],
    all: &[Findings],
    seconds: i64,
) -> crate::Result<()> {
    if !job.client.serves_reports().await? {
        return Ok(());
    }

    let mut reports = Vec::new();
    for ((_, policy), found) in job.policies.iter().zip(all) {
        for namespace in namespaces {
            let audit = NamespaceAudit {
                namespace,
                checked: found.checked.get(namespace).copied().unwrap_or(0),
                violations: found
                    .violations
                    .iter()
                    .filter(|v| &v.object.namespace == namespace)
                    .collect(),
                excepted: found
                    .excepted
                    .iter()
                    .filter(|x| &x.object.namespace == namespace)
                    .collect(),
            };
            reports.push(render_report(
                installation,
                &job.boundary,
                policy,
                &audit,
                seconds,
            ));
        }
    }
    job.client
        .sync_reports(installation, &job.boundary, &reports)
        .await?;
    Ok(())
}
