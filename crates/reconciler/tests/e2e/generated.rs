//! A fixed-seed sample of generated Pods (the property test's generators: images with ports,
//! digests, several `:` and `/`, upper case, odd characters; label maps around the required
//! labels) replayed as server-side dry-run creates on real API servers, one policy per
//! boundary: the API server's verdict and message must be the Rust evaluator's. Objects the
//! API server refuses before admission (invalid images or label values) are counted, not
//! compared.

use palisade_policy::admission::{first_violation, AdmissionObject};
use palisade_testkit::control_plane::temp_namespace;
use palisade_testkit::generated::{policies, sample};
use palisade_vap::object_name;

use crate::support::{barrier, connect, on_both_versions, unique_boundary, INSTALLATION};

/// The sample's seed (the date the property test's generators were fixed), how many Pods are
/// drawn, and how many of them the API server must accept as valid objects and judge.
const SEED: u64 = 20_261_202;
const DRAWN: usize = 1_200;
const PODS: usize = 150;

on_both_versions!(generated_sample_matches_the_rust_evaluator);

async fn generated_sample_matches_the_rust_evaluator(version: &str) {
    let (plane, cluster) = connect(version).await;
    let client = plane.client().await;
    let mut installed = Vec::new();
    for policy in policies() {
        let boundary = unique_boundary("gen");
        let namespace = temp_namespace(&client, Some(boundary.as_str())).await;
        cluster
            .apply_policy(INSTALLATION, &boundary, &policy)
            .await
            .unwrap();
        installed.push((policy, boundary, namespace));
    }
    barrier(&cluster, plane).await;

    let pods = sample(SEED, DRAWN);
    assert_eq!(pods.len(), DRAWN);
    let (mut judged, mut compared, mut denied, mut invalid) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for pod in &pods {
        if judged == PODS {
            break;
        }
        let object = AdmissionObject::from_json(pod).unwrap();
        let before = invalid;
        for (policy, boundary, namespace) in &installed {
            let expected = first_violation(policy, &object).map(|d| d.message);
            let answer = cluster.dry_run_create(namespace, pod).await.unwrap();
            let vap = object_name(boundary, policy.name());
            let actual = if answer.admitted() {
                None
            } else if answer.denying_policy() == Some(vap.as_str()) {
                answer.denial_message().map(str::to_owned)
            } else {
                // Refused before admission (e.g. an image with a line feed): not comparable.
                invalid += 1;
                break;
            };
            compared += 1;
            if actual.is_some() {
                denied += 1;
            }
            if actual != expected {
                failures.push(format!(
                    "{} on {pod}: Rust {expected:?}, API server {actual:?}",
                    policy.name()
                ));
            }
        }
        if invalid == before {
            judged += 1;
        }
    }
    eprintln!(
        "generated sample on Kubernetes {} (seed {SEED}): {judged} valid pods x {} policies, \
         {compared} verdicts compared ({denied} denials with the exact message); {invalid} drawn \
         pods refused by validation before admission",
        plane.version(),
        installed.len()
    );
    assert_eq!(judged, PODS, "too few valid pods among {DRAWN} drawn");
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
