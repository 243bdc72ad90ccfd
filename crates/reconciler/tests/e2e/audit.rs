//! Preview, then audit, through `palisade serve`'s whole path (issue: preview and audit): a
//! Deployment with a ReplicaSet and a Pod it owns runs `nginx:latest`; the preview of a policy
//! that forbids it names all three, the Pod's owner chain up to the Deployment, its 2 replicas
//! and the exact message; once applied, the audit reports the same objects through
//! `GET .../report` and as an OpenReports `Report` in the namespace (the cluster serves
//! `openreports.io/v1alpha1` here); a loosening preview lists what the saved version denies;
//! deleting the policy removes its Report.

use std::time::{Duration, Instant};

use kube::api::{ApiResource, DynamicObject};
use kube::Api;
use palisade_reconciler::InLayout;
use palisade_testkit::control_plane::{ControlPlane, Options};
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::serve::Stack;
use crate::support::{admin_of, eventually, no_latest, on_both_versions, wait_gone};

const TIMEOUT: Duration = Duration::from_secs(60);
const MESSAGE: &str =
    "Policy 'no-latest' (DisallowLatestTag) denied image nginx:latest: it is tagged latest or carries no tag.";

/// A CustomResourceDefinition of OpenReports' `Report` (openreports.io/v1alpha1), written
/// from its published API: a structural schema, so a field palisade misnames is pruned by the
/// API server and a wrong type or result value is refused.
fn reports_crd() -> Value {
    let string = json!({"type": "string"});
    let integer = json!({"type": "integer"});
    let result = json!({"type": "string", "enum": ["pass", "fail", "warn", "error", "skip"]});
    let reference = json!({"type": "object", "properties": {
        "apiVersion": string, "kind": string, "namespace": string, "name": string,
        "uid": string, "resourceVersion": string, "fieldPath": string}});
    let results = json!({"type": "array", "items": {
        "type": "object", "required": ["policy"], "properties": {
            "source": string, "policy": string, "rule": string,
            "category": string, "message": string, "result": result,
            "scored": {"type": "boolean"},
            "severity": {"type": "string",
                         "enum": ["critical", "high", "low", "medium", "info"]},
            "timestamp": {"type": "object", "required": ["nanos", "seconds"],
                "properties": {"seconds": integer, "nanos": integer}},
            "resources": {"type": "array", "items": reference},
            "properties": {"type": "object", "additionalProperties": string}}}});
    let configuration = json!({"type": "object", "required": ["limits"], "properties": {
        "limits": {"type": "object", "properties": {
            "maxResults": integer,
            "statusFilter": {"type": "array", "items": result}}}}});
    let summary = json!({"type": "object", "properties": {
        "pass": integer, "fail": integer, "warn": integer, "error": integer, "skip": integer}});
    let schema = json!({"type": "object", "properties": {
        "apiVersion": string, "kind": string, "metadata": {"type": "object"},
        "source": string, "scope": reference, "configuration": configuration,
        "summary": summary, "results": results}});
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "reports.openreports.io"},
        "spec": {
            "group": "openreports.io",
            "scope": "Namespaced",
            "names": {"kind": "Report", "listKind": "ReportList", "plural": "reports",
                      "singular": "report"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                          "schema": {"openAPIV3Schema": schema}}],
        },
    })
}

/// Makes the control plane serve `openreports.io/v1alpha1` reports.
pub async fn serve_reports(plane: &ControlPlane) -> InLayout {
    let cluster = admin_of(plane).await;
    let answer = cluster.create("", &reports_crd()).await.unwrap();
    assert!(answer.admitted() || answer.code == 409, "{answer:?}");
    eventually("the reports API served", TIMEOUT, || async {
        cluster.serves_reports().await.unwrap().then_some(())
    })
    .await;
    cluster
}

fn report_api(plane_client: kube::Client, namespace: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "openreports.io".into(),
        version: "v1alpha1".into(),
        api_version: "openreports.io/v1alpha1".into(),
        kind: "Report".into(),
        plural: "reports".into(),
    };
    Api::namespaced_with(plane_client, namespace, &resource)
}

on_both_versions!(preview_then_audit_then_reports);

async fn preview_then_audit_then_reports(version: &str) {
    // A control plane of its own: the reports API it serves is seen by no other test.
    let version_owned = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || {
        ControlPlane::start_with(&version_owned, &Options::default())
    })
    .await
    .unwrap();
    let plane = &plane;
    let cluster = serve_reports(plane).await;
    let stack = Stack::start(None).await;
    let boundary = stack
        .new_boundary("audit", "c1", plane.kubeconfig_yaml())
        .await;
    let namespace = stack.new_namespace(&boundary, "c1", "team").await;

    // A Deployment, the ReplicaSet it owns and that ReplicaSet's Pod, all on nginx:latest,
    // and one compliant Pod. (No controller runs here: the owners are set as they would be.)
    let template = json!({"metadata": {"labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]}});
    let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}});
    assert!(cluster
        .create(&namespace, &deployment)
        .await
        .unwrap()
        .admitted());
    let uid = |kind: &'static str, name: &'static str| {
        let client = plane.client();
        let namespace = namespace.clone();
        async move {
            let resource = match kind {
                "Deployment" => ApiResource::erase::<k8s_openapi::api::apps::v1::Deployment>(&()),
                _ => ApiResource::erase::<k8s_openapi::api::apps::v1::ReplicaSet>(&()),
            };
            let api: Api<DynamicObject> = Api::namespaced_with(client.await, &namespace, &resource);
            api.get(name).await.unwrap().metadata.uid.unwrap()
        }
    };
    let owner = |kind: &str, name: &str, uid: String| {
        json!([{"apiVersion": "apps/v1", "kind": kind, "name": name, "uid": uid,
                "controller": true}])
    };
    let replica_set = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-1", "labels": {"app": "web"},
                     "ownerReferences": owner("Deployment", "web", uid("Deployment", "web").await)},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}});
    assert!(cluster
        .create(&namespace, &replica_set)
        .await
        .unwrap()
        .admitted());
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-1-a", "labels": {"app": "web"},
                     "ownerReferences": owner("ReplicaSet", "web-1", uid("ReplicaSet", "web-1").await)},
        "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]}});
    assert!(cluster.create(&namespace, &pod).await.unwrap().admitted());
    let compliant = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ok"},
        "spec": {"containers": [{"name": "ok", "image": "ghcr.io/acme/ok:1.0"}]}});
    assert!(cluster
        .create(&namespace, &compliant)
        .await
        .unwrap()
        .admitted());

    // The preview, before the policy exists.
    let spec = no_latest();
    let preview_path = format!("/v1/boundaries/{boundary}/policies/no-latest/preview");
    let preview = stack.ok("POST", &preview_path, Some(spec.clone())).await;
    assert_eq!(preview["saved"], false, "{preview}");
    assert_eq!(
        preview["summary"],
        json!({"objects": 3, "workloads": 1, "replicas_at_risk": 2, "new_objects": 3,
               "new_workloads": 1, "new_replicas_at_risk": 2, "warned": 0,
               "loosened": 0, "resources_grandfathered": 0, "clusters_unreadable": 0}),
        "{preview}"
    );
    let c1 = &preview["clusters"][0];
    assert_eq!(c1["cluster"], "c1");
    assert_eq!(c1["namespaces"], json!([namespace]));
    assert_eq!(c1["checked"], 4);
    let denied = c1["denied"].as_array().unwrap();
    let kinds: Vec<&str> = denied.iter().map(|f| f["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["Deployment", "Pod", "ReplicaSet"], "{preview}");
    assert_eq!(
        denied[1],
        json!({"kind": "Pod", "namespace": namespace, "name": "web-1-a",
               "owners": [{"kind": "ReplicaSet", "name": "web-1"},
                          {"kind": "Deployment", "name": "web"}],
               "workload": {"kind": "Deployment", "name": "web", "replicas": 2},
               "rule": "DisallowLatestTag", "message": MESSAGE, "new": true})
    );
    // The audit's findings are the preview's denials without their `new`.
    let findings: Vec<Value> = denied
        .iter()
        .map(|d| {
            let mut f = d.clone();
            f.as_object_mut().unwrap().remove("new");
            f
        })
        .collect();

    // Applied: the audit finds the same objects.
    let saved_at = Instant::now();
    stack.put_policy(&boundary, "no-latest", spec).await;
    let status = stack.settled_status(&boundary, "no-latest", "c1").await;
    assert_eq!(status, "enforced");
    let report_path = format!("/v1/boundaries/{boundary}/policies/no-latest/report");
    let (report, _) = eventually("the audit's report", TIMEOUT, || async {
        let report = stack.ok("GET", &report_path, None).await;
        (report["clusters"][0]["current"] == true).then_some(report)
    })
    .await;
    let reported_after = saved_at.elapsed();
    let audited = &report["clusters"][0];
    assert_eq!(audited["checked"], 4, "{report}");
    assert_eq!(audited["violations"], 3, "{report}");
    assert_eq!(audited["error"], Value::Null, "{report}");
    assert_eq!(audited["findings"], json!(findings), "{report}");

    // ... and in the cluster, as an OpenReports Report of the namespace.
    let reports = report_api(plane.client().await, &namespace);
    let name = format!("no-latest.{boundary}.palisade.dev");
    let (written, _) = eventually("the Report object", TIMEOUT, || async {
        reports.get_opt(&name).await.unwrap()
    })
    .await;
    let written = serde_json::to_value(&written).unwrap();
    assert_eq!(
        written["summary"],
        json!({"pass": 1, "fail": 3, "warn": 0, "error": 0, "skip": 0}),
        "{written}"
    );
    assert_eq!(written["source"], "palisade");
    assert_eq!(
        written["metadata"]["labels"]["palisade.dev/policy"],
        "no-latest"
    );
    let results = written["results"].as_array().unwrap();
    assert_eq!(results.len(), 3);
    for result in results {
        assert_eq!(result["policy"], "no-latest");
        assert_eq!(result["rule"], "DisallowLatestTag");
        assert_eq!(result["result"], "fail");
        assert_eq!(result["message"], MESSAGE);
    }
    assert_eq!(results[1]["resources"][0]["name"], "web-1-a", "{written}");
    assert_eq!(results[1]["resources"][0]["kind"], "Pod");
    assert_eq!(results[1]["properties"]["workload"], "Deployment/web");
    assert_eq!(results[1]["properties"]["replicas"], "2");
    assert!(results[1]["timestamp"]["seconds"].as_i64().unwrap() > 0);
    assert_eq!(written["configuration"]["limits"]["maxResults"], 1000);

    // A loosening: in audit mode the same rule denies nothing.
    let loosening = stack
        .ok(
            "POST",
            &preview_path,
            Some(json!({"mode": "audit", "rules": [{"disallowLatestTag": {}}]})),
        )
        .await;
    assert_eq!(loosening["saved"], true);
    assert_eq!(loosening["summary"]["objects"], 0, "{loosening}");
    assert_eq!(loosening["summary"]["warned"], 3, "{loosening}");
    assert_eq!(loosening["summary"]["loosened"], 3, "{loosening}");
    // An empty body previews the saved version.
    let saved = stack.ok("POST", &preview_path, None).await;
    assert_eq!(saved["summary"]["objects"], 3, "{saved}");
    assert_eq!(saved["summary"]["new_objects"], 0, "{saved}");
    assert_eq!(saved["summary"]["loosened"], 0, "{saved}");

    // Deleting the policy removes its Report; its report is gone with it.
    stack.delete_policy(&boundary, "no-latest").await;
    wait_gone("the Report removed", TIMEOUT, &reports, &name).await;
    let (status, _) = stack.call("GET", &report_path, None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    eprintln!(
        "audit on Kubernetes {}: report current {:.2} s after the policy was saved",
        plane.version(),
        reported_after.as_secs_f64()
    );
}
