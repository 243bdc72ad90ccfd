//! The preview's verdict equals the API server's (issue: preview and audit, item 2). The
//! corpus's live objects are created for real in namespaces of boundaries with no policy yet;
//! the preview reads them back page by page (`ClusterClient::scan_boundary`, what previews and
//! audits use) and judges them with the Rust evaluator (`palisade_policy::scan`); then the
//! policies are applied and a server-side dry-run create of each object as it is stored (read
//! back, without what the server sets: uid, resourceVersion, status, a Job's generated
//! selector) asks the API server, under the same name: validating admission runs before the
//! name is checked, so a denial is a denial and `409 AlreadyExists` means admitted. Object by
//! object: denied by the preview ⇔ denied by the API server, with one of the preview's
//! messages; audit-mode findings ⇔ the API server's warnings, exactly.
//!
//! The stored object is what the preview judges, and it can differ from the manifest it was
//! created from: Kubernetes defaults a Job's empty labels from its pod template on every read,
//! and the template holds the labels the server generated at creation (`job-name`, ...). The
//! count of objects whose manifest would be judged differently is printed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Instant;

use palisade_policy::scan::Scan;
use palisade_policy::{Mode, Name, Policy};
use palisade_reconciler::answer::policy_warning;
use palisade_testkit::control_plane::temp_namespace;
use palisade_testkit::corpus::{policies_of, AdmissionCase, AdmissionHarness, Reports};
use palisade_vap::object_name;
use serde_json::Value;

use crate::corpus::{policy_set_key, policy_warnings};
use crate::support::{barrier, connect, name, on_both_versions, INSTALLATION};

on_both_versions!(preview_equals_the_api_server);

struct Set {
    boundary: Name,
    namespace: String,
    policies: Vec<Policy>,
    /// (object name, the corpus object)
    objects: Vec<(String, Value)>,
}

/// The case's object named `name` (kept apart from other cases' objects in the namespace).
fn named(case: &AdmissionCase, name: &str) -> Value {
    let mut object = case.object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        metadata.insert("name".into(), Value::String(name.to_owned()));
        metadata.remove("generateName");
        metadata.remove("namespace");
    }
    object
}

/// A stored object as it can be sent again: without what the server sets.
fn as_stored(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        for field in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "managedFields",
            "generation",
        ] {
            metadata.remove(field);
        }
    }
    if let Some(fields) = object.as_object_mut() {
        fields.remove("status");
    }
    if object["kind"] == "Job" && object["spec"]["manualSelector"] != Value::Bool(true) {
        // Generated again on create; a Job may not bring its own without manualSelector.
        if let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) {
            spec.remove("selector");
        }
        if let Some(labels) = object
            .pointer_mut("/spec/template/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            labels.remove("controller-uid");
            labels.remove("batch.kubernetes.io/controller-uid");
        }
    }
    object
}

/// What one evaluator says of one object: the denials' messages (enforce mode), and the audit
/// findings as `policy: message`.
#[derive(Debug, Default, PartialEq, Eq)]
struct Said {
    denials: BTreeSet<String>,
    warnings: BTreeSet<String>,
}

async fn preview_equals_the_api_server(version: &str) {
    let started = Instant::now();
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let harness = AdmissionHarness::new(&format!("preview on {version}"), Reports::FirstDenial)
        .only({
            let version = version.to_owned();
            move |case| {
                case.live_on(&version) && case.object["metadata"]["deletionTimestamp"].is_null()
            }
        });
    let mut sets: BTreeMap<String, Set> = BTreeMap::new();
    for case in harness.cases() {
        let key = policy_set_key(&case);
        if !sets.contains_key(&key) {
            let boundary = name(&format!("preview-{}", sets.len()));
            let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
            let policies = policies_of(&case.name, &case.policies).unwrap();
            sets.insert(
                key.clone(),
                Set {
                    boundary,
                    namespace,
                    policies,
                    objects: Vec::new(),
                },
            );
        }
        let set = sets.get_mut(&key).unwrap();
        let object_name = format!("o{}", set.objects.len());
        let object = named(&case, &object_name);
        // No policy of the boundary exists yet: every object is stored.
        let created = cluster.create(&set.namespace, &object).await.unwrap();
        assert!(
            created.admitted(),
            "case {} could not be created: {created:?}",
            case.name
        );
        set.objects.push((object_name, object));
    }
    let created = started.elapsed();

    // The preview: every set's boundary read back in small pages, judged in Rust.
    let mut previewed: BTreeMap<(String, String), Said> = BTreeMap::new();
    let mut stored: BTreeMap<(String, String), Value> = BTreeMap::new();
    let mut listed = 0;
    for set in sets.values() {
        let mut scan = Scan::new(set.policies.iter().collect());
        let scanned = cluster
            .scan_boundary(&set.boundary, 7, &mut |page| {
                for object in page {
                    scan.observe(object);
                    let key = (
                        set.namespace.clone(),
                        object["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    );
                    stored.insert(key, object.clone());
                }
            })
            .await
            .unwrap();
        assert_eq!(scanned.namespaces, std::slice::from_ref(&set.namespace));
        listed += scanned.listed;
        for name in set.objects.iter().map(|(n, _)| n) {
            previewed.insert((set.namespace.clone(), name.clone()), Said::default());
        }
        for (policy, found) in set.policies.iter().zip(scan.finish()) {
            for violation in found.violations {
                let said = previewed
                    .get_mut(&(violation.object.namespace.clone(), violation.object.name))
                    .expect("only the set's objects are found");
                match policy.mode() {
                    Mode::Enforce => said.denials.insert(violation.message),
                    Mode::Audit => {
                        said.warnings
                            .insert(format!("{}: {}", policy.name(), violation.message))
                    }
                };
            }
        }
    }
    let evaluated = started.elapsed();

    for set in sets.values() {
        for policy in &set.policies {
            cluster
                .apply_policy(INSTALLATION, &set.boundary, policy)
                .await
                .unwrap();
        }
    }
    barrier(&cluster, plane).await;
    let active = started.elapsed();

    // The API server, object by object.
    let (mut compared, mut denied, mut warned, mut quiet, mut manifest_differs) = (0, 0, 0, 0, 0);
    let mut differences = Vec::new();
    for set in sets.values() {
        for (name, manifest) in &set.objects {
            let key = (set.namespace.clone(), name.clone());
            // Kinds the rules do not check are not read; the API server must admit them.
            let object = stored.get(&key).map_or_else(|| manifest.clone(), as_stored);
            let answer = cluster
                .dry_run_create(&set.namespace, &object)
                .await
                .unwrap();
            let preview = &previewed[&key];
            let as_manifest = cluster
                .dry_run_create(&set.namespace, manifest)
                .await
                .unwrap();
            if as_manifest.denial_message() != answer.denial_message() {
                manifest_differs += 1;
            }
            let mut server = Said::default();
            if !answer.admitted() && answer.code != 409 {
                let message = answer.denial_message().unwrap_or_default().to_owned();
                server.denials.insert(message);
            }
            for warning in policy_warnings(&answer) {
                let found = set.policies.iter().find_map(|policy| {
                    let vap = object_name(&set.boundary, policy.name());
                    let message = warning.strip_prefix(&policy_warning(&vap, &vap, ""))?;
                    Some(format!("{}: {message}", policy.name()))
                });
                server.warnings.insert(found.unwrap_or(warning));
            }
            compared += 1;
            denied += usize::from(!preview.denials.is_empty());
            warned += usize::from(!preview.warnings.is_empty());
            quiet += usize::from(preview == &Said::default());
            // The API server names one denying policy (which one is not specified): it must be
            // one the preview found.
            let agree = server.warnings == preview.warnings
                && server.denials.is_empty() == preview.denials.is_empty()
                && server.denials.is_subset(&preview.denials);
            if !agree {
                differences.push(format!(
                    "{}/{name} ({}): preview {preview:?}, API server {server:?} ({} {:?}), sent {object}",
                    set.namespace, object["kind"], answer.code, answer.message
                ));
            }
        }
    }
    assert!(
        differences.is_empty(),
        "{} of {compared} objects differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
    eprintln!(
        "preview on Kubernetes {}: {compared} objects in {} boundaries compared with the API \
         server's dry-run creates: {denied} denied, {warned} with audit findings, {} admitted \
         quietly; all equal ({manifest_differs} of the manifests they were created from would \
         be judged differently). {listed} objects listed; created in {:.1} s, previewed in {:.2} s, \
         policies active after {:.1} s, {:.1} s in all",
        plane.version(),
        sets.len(),
        quiet,
        created.as_secs_f64(),
        (evaluated - created).as_secs_f64(),
        (active - evaluated).as_secs_f64(),
        started.elapsed().as_secs_f64(),
    );
}
