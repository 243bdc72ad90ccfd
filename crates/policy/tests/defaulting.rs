//! The API server defaults an object before admission sees it (SPEC 4.2): the evaluator reads
//! the labels the cluster's ValidatingAdmissionPolicies read, not the manifest as written.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use palisade_policy::admission::{evaluate, AdmissionObject, AdmissionRequest};
use palisade_policy::{LabelKey, LabelRequirement, Mode, Name, Policy, Rule, Scope};
use serde_json::{json, Value};

fn requires(keys: &[&str]) -> Policy {
    let requirements = keys
        .iter()
        .map(|k| LabelRequirement::new(LabelKey::parse(k).unwrap(), None))
        .collect();
    Policy::new(
        Name::parse("owner-label").unwrap(),
        Mode::Enforce,
        Scope::AllClusters,
        vec![Rule::required_labels(requirements).unwrap()],
    )
    .unwrap()
}

fn job(own: Option<Value>, template: Option<Value>) -> Value {
    let mut metadata = json!({"name": "migrate"});
    if let Some(own) = own {
        metadata["labels"] = own;
    }
    let mut template_metadata = json!({});
    if let Some(template) = template {
        template_metadata["labels"] = template;
    }
    json!({
        "apiVersion": "batch/v1", "kind": "Job", "metadata": metadata,
        "spec": {"template": {"metadata": template_metadata, "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "app", "image": "ghcr.io/acme/migrate:1.0"}]
        }}}
    })
}

fn admitted(policy: &Policy, object: &Value) -> bool {
    let object = AdmissionObject::from_json(object).unwrap();
    evaluate(
        std::slice::from_ref(policy),
        &object,
        &AdmissionRequest::default(),
    )
    .admitted()
}

#[test]
fn a_job_without_labels_of_its_own_takes_its_pod_templates() {
    let team = requires(&["team"]);
    assert!(admitted(&team, &job(None, Some(json!({"team": "web"})))));
    assert!(admitted(
        &team,
        &job(Some(Value::Null), Some(json!({"team": "web"})))
    ));
    assert!(admitted(
        &team,
        &job(Some(json!({})), Some(json!({"team": "web"})))
    ));
    let object = AdmissionObject::from_json(&job(None, Some(json!({"team": "web"})))).unwrap();
    assert_eq!(object.label("team"), Some("web"));
}

#[test]
fn a_job_with_labels_of_its_own_keeps_them() {
    let team = requires(&["team"]);
    assert!(!admitted(
        &team,
        &job(
            Some(json!({"app": "migrate"})),
            Some(json!({"team": "web"}))
        )
    ));
    let object = AdmissionObject::from_json(&job(
        Some(json!({"app": "migrate"})),
        Some(json!({"team": "web"})),
    ))
    .unwrap();
    assert_eq!(object.label("team"), None);
    assert_eq!(object.label("app"), Some("migrate"));
}

#[test]
fn a_job_without_any_labels_has_none() {
    assert!(!admitted(&requires(&["team"]), &job(None, None)));
}

#[test]
fn only_batch_jobs_are_defaulted() {
    let team = requires(&["team"]);
    let template = json!({"metadata": {"labels": {"team": "web"}}, "spec": {
        "containers": [{"name": "app", "image": "ghcr.io/acme/web:1.4"}]}});
    for (api_version, kind) in [
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("apps/v1", "DaemonSet"),
    ] {
        let object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"team": "web"}}, "template": template}});
        assert!(!admitted(&team, &object), "{kind}");
    }
    let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {
            "metadata": {"labels": {"team": "web"}},
            "spec": {"template": template}}}});
    assert!(!admitted(&team, &cron));
    let crd = json!({"apiVersion": "example.com/v1", "kind": "Job", "metadata": {"name": "j"},
        "spec": {"template": template}});
    let object = AdmissionObject::from_json(&crd).unwrap();
    assert_eq!(object.label("team"), None);
}

#[test]
fn bad_template_labels_of_a_defaulted_job_are_named() {
    let error = AdmissionObject::from_json(&job(None, Some(json!({"version": 1})))).unwrap_err();
    assert_eq!(
        error.to_string(),
        "/spec/template/metadata/labels/version: label values must be strings (quote them in YAML)"
    );
}

#[test]
fn a_defaulted_job_gains_the_generated_selector_labels() {
    let object = AdmissionObject::from_json(&job(None, Some(json!({"team": "web"})))).unwrap();
    assert_eq!(object.label("job-name"), Some("migrate"));
    assert_eq!(
        object.label("batch.kubernetes.io/job-name"),
        Some("migrate")
    );
    assert_eq!(
        object.label("controller-uid"),
        Some(palisade_policy::defaulting::GENERATED_UID)
    );
    assert!(object.label("batch.kubernetes.io/controller-uid").is_some());
    // An explicit empty template map is shared too.
    let object = AdmissionObject::from_json(&job(None, Some(json!({})))).unwrap();
    assert_eq!(object.label("job-name"), Some("migrate"));
    // Not with labels of its own, without template labels, or with a manual selector.
    let object = AdmissionObject::from_json(&job(
        Some(json!({"team": "web"})),
        Some(json!({"team": "web"})),
    ))
    .unwrap();
    assert_eq!(object.label("job-name"), None);
    let object = AdmissionObject::from_json(&job(None, None)).unwrap();
    assert_eq!(object.label("job-name"), None);
    let mut manual = job(None, Some(json!({"team": "web"})));
    manual["spec"]["manualSelector"] = json!(true);
    let object = AdmissionObject::from_json(&manual).unwrap();
    assert_eq!(object.label("job-name"), None);
    assert_eq!(object.label("team"), Some("web"));
    // generateName: the name is not known before the create.
    let mut generated = job(None, Some(json!({"team": "web"})));
    generated["metadata"] = json!({"generateName": "migrate-"});
    let object = AdmissionObject::from_json(&generated).unwrap();
    assert_eq!(
        object.label("job-name"),
        Some(palisade_policy::defaulting::GENERATED_NAME)
    );
}

#[test]
fn the_defaulted_object_is_what_cel_reads() {
    let defaulted = palisade_policy::defaulting::apply(&job(None, Some(json!({"team": "web"}))));
    assert_eq!(defaulted["metadata"]["labels"]["team"], "web");
    assert_eq!(defaulted["metadata"]["labels"]["job-name"], "migrate");
    let own = job(Some(json!({"app": "x"})), Some(json!({"team": "web"})));
    assert_eq!(palisade_policy::defaulting::apply(&own), own);
}
