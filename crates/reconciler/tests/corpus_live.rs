//! The admission corpus against real API servers (1.30 and 1.37): every `live` case's
//! policies installed with `ClusterClient::apply_policy`, its object sent as a server-side
//! dry-run create into a namespace of the policies' boundary, and the API server's answer
//! compared with the expected verdict and exact message. The same object in an unlabelled
//! namespace is admitted. The API server, not a CEL library, is the oracle.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DynamicObject, GroupVersionKind, PostParams};
use kube::discovery::Discovery;
use kube::{Api, Client};
use palisade_policy::{Mode, Name, Policy, Rule, Scope};
use palisade_reconciler::{Admission, ClusterClient};
use palisade_testkit::control_plane::ControlPlane;
use palisade_testkit::corpus::{admission_cases, policies_of, AdmissionCase};
use serde_json::json;

const INSTALLATION: &str = "corpus-test";

async fn namespace(client: &Client, name: &str, boundary: Option<&str>) {
    let mut labels = BTreeMap::new();
    if let Some(b) = boundary {
        labels.insert("palisade.dev/boundary".to_owned(), b.to_owned());
    }
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels}
    }))
    .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// A dry-run create; `Ok(())` when admitted, `Err((code, message))` when refused.
async fn dry_run_create(
    client: &Client,
    discovery: &Discovery,
    namespace: &str,
    object: &serde_json::Value,
) -> Result<(), (u16, String)> {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = discovery
        .resolve_gvk(&gvk)
        .unwrap_or_else(|| panic!("the API server does not serve {api_version} {kind}"));
    let mut object = object.clone();
    let api = if capabilities.scope == kube::discovery::Scope::Cluster {
        Api::<DynamicObject>::all_with(client.clone(), &resource)
    } else {
        object["metadata"]["namespace"] = json!(namespace);
        Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
    };
    let object: DynamicObject = serde_json::from_value(object).unwrap();
    let params = PostParams {
        dry_run: true,
        field_manager: None,
    };
    match api.create(&params, &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err((status.code, status.message)),
        Err(other) => Err((0, other.to_string())),
    }
}

/// Waits until the API server's admission has every policy applied so far: a probe policy
/// applied last, in a boundary of its own, must deny. The API server loads policies from one
/// watch, in order, so once the last one acts, the earlier ones do too.
async fn wait_for_policies(cluster: &ClusterClient, discovery: &Discovery) -> Duration {
    let started = Instant::now();
    let probe = Name::parse("probe").unwrap();
    let policy = Policy::new(
        Name::parse("probe-last").unwrap(),
        Mode::Enforce,
        Scope::AllClusters,
        vec![Rule::DisallowLatestTag],
    )
    .unwrap();
    cluster
        .apply_policy(INSTALLATION, &probe, &policy)
        .await
        .unwrap();
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
        "spec": {"containers": [{"name": "c", "image": "nginx"}]}});
    loop {
        if let Err((_, message)) = dry_run_create(cluster.client(), discovery, "probe", &pod).await
        {
            if message.contains("Policy 'probe-last' (DisallowLatestTag)") {
                return started.elapsed();
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the policies did not take effect within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn replay(version: &str) {
    let started = Instant::now();
    let control_plane = tokio::task::spawn_blocking({
        let version = version.to_owned();
        move || ControlPlane::start(&version, "")
    })
    .await
    .unwrap()
    .unwrap_or_else(|e| panic!("the {version} control plane did not start: {e}"));
    let start_time = started.elapsed();
    let cluster = ClusterClient::from_kubeconfig(&control_plane.kubeconfig_yaml().unwrap())
        .await
        .unwrap();
    let probe = cluster.probe().await.unwrap();
    assert!(
        probe
            .kubernetes_version
            .starts_with(&format!("v{version}.")),
        "{probe:?}"
    );
    assert_eq!(probe.admission, Admission::Enforced);
    let client = cluster.client().clone();
    let discovery = Discovery::new(client.clone()).run().await.unwrap();

    // One boundary (and namespace) per distinct policy set, all installed up front.
    let cases: Vec<AdmissionCase> = admission_cases()
        .unwrap()
        .into_iter()
        .filter(|c| c.live)
        .collect();
    let mut groups: BTreeMap<String, (String, Vec<&AdmissionCase>)> = BTreeMap::new();
    for case in &cases {
        let key = serde_json::to_string(&case.policies).unwrap();
        let next = format!("g{}", groups.len());
        groups
            .entry(key)
            .or_insert_with(|| (next, Vec::new()))
            .1
            .push(case);
    }
    namespace(&client, "probe", Some("probe")).await;
    namespace(&client, "unlabelled", None).await;
    for (boundary, members) in groups.values() {
        namespace(&client, boundary, Some(boundary)).await;
        let policies = policies_of(&members[0].name, &members[0].policies).unwrap();
        for policy in &policies {
            cluster
                .apply_policy(INSTALLATION, &Name::parse(boundary).unwrap(), policy)
                .await
                .unwrap();
        }
    }
    let propagation = wait_for_policies(&cluster, &discovery).await;

    let mut failures = Vec::new();
    let (mut denied, mut admitted) = (0, 0);
    for (boundary, members) in groups.values() {
        for case in members {
            let answer = dry_run_create(&client, &discovery, boundary, &case.object).await;
            let expected: Vec<&str> = case
                .expect
                .denials
                .iter()
                .map(|d| d.message.as_str())
                .collect();
            match (&answer, case.expect.admitted) {
                (Ok(()), true) => admitted += 1,
                (Err((code, message)), false)
                    if *code == 422
                        && expected
                            .iter()
                            .any(|m| message.ends_with(&format!("denied request: {m}"))) =>
                {
                    denied += 1
                }
                _ => failures.push(format!(
                    "{} ({}): expected {} {:?}, the API server answered {:?}",
                    case.name,
                    case.file,
                    if case.expect.admitted {
                        "admitted"
                    } else {
                        "denied with one of"
                    },
                    expected,
                    answer
                )),
            }
            if let Err(refused) =
                dry_run_create(&client, &discovery, "unlabelled", &case.object).await
            {
                failures.push(format!(
                    "{}: refused in an unlabelled namespace: {refused:?}",
                    case.name
                ));
            }
        }
    }
    eprintln!(
        "Kubernetes {}: control plane up in {:.1} s, {} policy sets installed and active after {:.1} s, \
         {} live cases ({} denied with the exact message, {} admitted), each also admitted in an unlabelled namespace; {:.1} s in all",
        probe.kubernetes_version,
        start_time.as_secs_f64(),
        groups.len(),
        propagation.as_secs_f64(),
        cases.len(),
        denied,
        admitted,
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_on_kubernetes_1_30() {
    replay("1.30").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_on_kubernetes_1_37() {
    replay("1.37").await;
}

/// Applying the same policy twice changes nothing in the cluster (server-side apply with one
/// field manager), and deleting removes the binding and the policy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applying_twice_changes_nothing_and_delete_removes_both() {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let control_plane = tokio::task::spawn_blocking(|| ControlPlane::start("1.37", ""))
        .await
        .unwrap()
        .unwrap();
    let cluster = ClusterClient::from_kubeconfig(&control_plane.kubeconfig_yaml().unwrap())
        .await
        .unwrap();
    let boundary = Name::parse("shop").unwrap();
    let policy = Policy::new(
        Name::parse("no-latest").unwrap(),
        Mode::Enforce,
        Scope::AllClusters,
        vec![Rule::DisallowLatestTag],
    )
    .unwrap();
    let name = "no-latest.shop.palisade.dev";
    let policies = Api::<ValidatingAdmissionPolicy>::all(cluster.client().clone());
    let bindings = Api::<ValidatingAdmissionPolicyBinding>::all(cluster.client().clone());
    cluster
        .apply_policy(INSTALLATION, &boundary, &policy)
        .await
        .unwrap();
    let before = (
        policies.get(name).await.unwrap().metadata.resource_version,
        bindings.get(name).await.unwrap().metadata.resource_version,
    );
    cluster
        .apply_policy(INSTALLATION, &boundary, &policy)
        .await
        .unwrap();
    let after = (
        policies.get(name).await.unwrap().metadata.resource_version,
        bindings.get(name).await.unwrap().metadata.resource_version,
    );
    assert_eq!(before, after, "a second apply must not change the objects");
    let labels = policies.get(name).await.unwrap().metadata.labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/managed-by"], "palisade");
    assert_eq!(labels["palisade.dev/installation"], INSTALLATION);
    cluster
        .delete_policy(&boundary, policy.name())
        .await
        .unwrap();
    assert!(policies.get_opt(name).await.unwrap().is_none());
    assert!(bindings.get_opt(name).await.unwrap().is_none());
    // Deleting what is gone is fine.
    cluster
        .delete_policy(&boundary, policy.name())
        .await
        .unwrap();
}
