//! The audit's results in the cluster, as OpenReports `Report`s (`openreports.io/v1alpha1`,
//! the format policy-reporter and Kyverno's and Kubewarden's users read): one per namespace and
//! policy, named like the policy's objects, labelled like them, written with server-side apply
//! and deleted (by label, with the uid as a precondition) when the policy, the namespace or
//! the boundary goes. Written only when the cluster serves the API.

use std::collections::BTreeSet;

use kube::api::{
    ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions,
};
use kube::Api;
use palisade_policy::scan::Violation;
use palisade_policy::{Mode, Name, Policy};
use palisade_vap::object_name;
use palisade_vap::render::{labels, FIELD_MANAGER, INSTALLATION_LABEL, MANAGED_BY_LABEL};
use serde_json::{json, Value};

use crate::cluster::boundary_selector;
use crate::{ClusterClient, Result};

/// The group-version the reports are written in.
pub const REPORTS_API: &str = "openreports.io/v1alpha1";
/// At most this many results per report (an object must stay well under etcd's 1.5 MiB); the
/// summary still counts every object. The report says so in `configuration.limits`.
pub const MAX_RESULTS: usize = 1000;
/// `source` of every report and result.
pub const SOURCE: &str = "palisade";

fn report_resource() -> ApiResource {
    ApiResource {
        group: "openreports.io".into(),
        version: "v1alpha1".into(),
        api_version: REPORTS_API.into(),
        kind: "Report".into(),
        plural: "reports".into(),
    }
}

/// One policy's audit of one namespace.
#[derive(Debug)]
pub struct NamespaceAudit<'a> {
    pub namespace: &'a str,
    /// Checked objects in the namespace.
    pub checked: u64,
    /// The policy's violations in the namespace.
    pub violations: Vec<&'a Violation>,
    /// The objects an exception let past the policy (SPEC 7): `skip`, naming the exception.
    pub excepted: Vec<&'a palisade_policy::scan::Excepted>,
}

/// The `Report` of `policy` for one namespace. Results are the violations (`fail` in enforce
/// mode, `warn` in audit mode); compliant objects are counted in `summary.pass`.
pub fn render_report(
    installation: &str,
    boundary: &Name,
    policy: &Policy,
    audit: &NamespaceAudit<'_>,
    taken_at_seconds: i64,
) -> Value {
    let outcome = match policy.mode() {
        Mode::Enforce => "fail",
        Mode::Audit => "warn",
    };
    let results: Vec<Value> = audit
        .violations
        .iter()
        .take(MAX_RESULTS)
        .map(|v| {
            let workload = format!("{}/{}", v.workload.kind, v.workload.name);
            json!({
                "source": SOURCE,
                "policy": policy.name().as_str(),
                "rule": v.rule.as_str(),
                "result": outcome,
                "message": v.message,
                "timestamp": {"seconds": taken_at_seconds, "nanos": 0},
                "resources": [{
                    "apiVersion": v.api_version,
                    "kind": v.object.kind,
                    "namespace": v.object.namespace,
                    "name": v.object.name,
                    "uid": v.uid,
                }],
                "properties": {
                    "boundary": boundary.as_str(),
                    "workload": workload,
                    "replicas": v.workload.replicas.to_string(),
                },
            })
        })
        .collect();
    let skipped = audit
        .excepted
        .iter()
        .take(MAX_RESULTS.saturating_sub(results.len()))
        .map(|x| {
            json!({
                "source": SOURCE,
                "policy": policy.name().as_str(),
                "result": "skip",
                "message": format!("let past by exception '{}'", x.exception),
                "timestamp": {"seconds": taken_at_seconds, "nanos": 0},
                "resources": [{
                    "apiVersion": x.api_version,
                    "kind": x.object.kind,
                    "namespace": x.object.namespace,
                    "name": x.object.name,
                    "uid": x.uid,
                }],
                "properties": {
                    "boundary": boundary.as_str(),
                    "exception": x.exception.as_str(),
                },
            })
        })
        .collect::<Vec<Value>>();
    let results: Vec<Value> = results.into_iter().chain(skipped).collect();
    let violations = audit.violations.len() as u64;
    let skips = audit.excepted.len() as u64;
    let status_filter: Vec<&str> = if skips > 0 {
        vec![outcome, "skip"]
    } else {
        vec![outcome]
    };
    let (fail, warn) = match policy.mode() {
        Mode::Enforce => (violations, 0),
        Mode::Audit => (0, violations),
    };
    json!({
        "apiVersion": REPORTS_API,
        "kind": "Report",
        "metadata": {
            "name": object_name(boundary, policy.name()),
            "namespace": audit.namespace,
            "labels": labels(installation, boundary, policy.name()),
        },
        "source": SOURCE,
        "configuration": {"limits": {"maxResults": MAX_RESULTS, "statusFilter": status_filter}},
        "summary": {
            "pass": audit.checked.saturating_sub(violations + skips),
            "fail": fail,
            "warn": warn,
            "error": 0,
            "skip": skips,
        },
        "results": results,
    })
}

impl ClusterClient {
    /// Whether the cluster serves `openreports.io/v1alpha1` reports.
    pub async fn serves_reports(&self) -> Result<bool> {
        match self.client().list_api_group_resources(REPORTS_API).await {
            Ok(list) => Ok(list.resources.iter().any(|r| r.name == "reports")),
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
            Err(error) => Err(error.into()),
        }
    }

    /// Makes `reports` (rendered by [`render_report`] for this installation and boundary) the
    /// boundary's reports: applies each, deletes the boundary's other reports of this
    /// installation. Returns how many were deleted.
    pub async fn sync_reports(
        &self,
        installation: &str,
        boundary: &Name,
        reports: &[Value],
    ) -> Result<usize> {
        let resource = report_resource();
        let params = PatchParams::apply(FIELD_MANAGER).force();
        let mut keep = BTreeSet::new();
        for report in reports {
            let namespace = report["metadata"]["namespace"].as_str().unwrap_or_default();
            let name = report["metadata"]["name"].as_str().unwrap_or_default();
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client().clone(), namespace, &resource);
            api.patch(name, &params, &Patch::Apply(report)).await?;
            keep.insert((namespace.to_owned(), name.to_owned()));
        }
        self.delete_reports(&boundary_selector(installation, boundary), &keep)
            .await
    }

    /// Deletes every report of this installation (all boundaries); returns how many.
    pub async fn remove_reports(&self, installation: &str) -> Result<usize> {
        if !self.serves_reports().await? {
            return Ok(0);
        }
        let selector = format!("{MANAGED_BY_LABEL}=palisade,{INSTALLATION_LABEL}={installation}");
        self.delete_reports(&selector, &BTreeSet::new()).await
    }

    /// Deletes the reports `selector` selects, except `keep` (namespace, name).
    async fn delete_reports(
        &self,
        selector: &str,
        keep: &BTreeSet<(String, String)>,
    ) -> Result<usize> {
        let resource = report_resource();
        let all: Api<DynamicObject> = Api::all_with(self.client().clone(), &resource);
        let mut deleted = 0;
        for stale in all
            .list(&ListParams::default().labels(selector))
            .await?
            .items
        {
            let namespace = stale.metadata.namespace.clone().unwrap_or_default();
            let name = stale.metadata.name.clone().unwrap_or_default();
            if keep.contains(&(namespace.clone(), name.clone())) {
                continue;
            }
            let api: Api<DynamicObject> =
                Api::namespaced_with(self.client().clone(), &namespace, &resource);
            let delete = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: stale.metadata.uid.clone(),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &delete).await {
                Ok(_) => deleted += 1,
                // Gone already, or replaced since it was listed: not ours to delete now.
                Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(deleted)
    }
}

#[cfg(test)]
mod tests {
    use palisade_policy::scan::{Excepted, ObjectRef};

    use super::*;

    /// What an exception lets past is a `skip` result naming it, counted in `summary.skip`
    /// and not in `pass` (SPEC 7).
    #[test]
    fn excepted_objects_are_skip_results_naming_the_exception() {
        let boundary = Name::parse("shop").unwrap();
        let policy = palisade_policy::Policy::new(
            Name::parse("no-latest").unwrap(),
            Mode::Enforce,
            palisade_policy::Scope::default(),
            vec![palisade_policy::Rule::DisallowLatestTag],
        )
        .unwrap();
        let excepted = Excepted {
            object: ObjectRef {
                kind: "Pod".into(),
                namespace: "web".into(),
                name: "legacy".into(),
            },
            api_version: "v1".into(),
            uid: "u1".into(),
            exception: Name::parse("legacy-nginx").unwrap(),
        };
        let audit = NamespaceAudit {
            namespace: "web",
            checked: 3,
            violations: Vec::new(),
            excepted: vec![&excepted],
        };
        let report = render_report("i", &boundary, &policy, &audit, 7);
        assert_eq!(
            report["summary"],
            json!({"pass": 2, "fail": 0, "warn": 0, "error": 0, "skip": 1})
        );
        assert_eq!(report["results"][0]["result"], "skip");
        assert_eq!(
            report["results"][0]["message"],
            "let past by exception 'legacy-nginx'"
        );
        assert_eq!(
            report["results"][0]["properties"]["exception"],
            "legacy-nginx"
        );
        assert_eq!(
            report["configuration"]["limits"]["statusFilter"],
            json!(["fail", "skip"])
        );
    }
}
