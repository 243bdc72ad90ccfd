//! Platform workloads (SPEC 5), through palisade's API on a control plane where workloads
//! really run (kube-controller-manager, kube-scheduler and kwok's fake nodes; 1.37): the
//! Deployments and Jobs palisade renders are judged by the admission rules like anything a
//! user deploys, and each resource's `status` says what the cluster decided.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::Api;
use palisade_testkit::control_plane::{ControlPlane, Options};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tokio::sync::OnceCell;

use crate::serve::{namespace_path, Stack};
use crate::support::no_latest;

const STATUS_TIMEOUT: Duration = Duration::from_secs(120);

/// One control plane with workloads for every test of this file (each test has its own
/// palisade, installation, boundary and namespace).
async fn plane() -> &'static ControlPlane {
    static PLANE: OnceCell<ControlPlane> = OnceCell::const_new();
    PLANE
        .get_or_init(|| async {
            let options = Options {
                workloads: true,
                ..Options::default()
            };
            tokio::task::spawn_blocking(move || ControlPlane::start_with("1.37", &options))
                .await
                .unwrap()
        })
        .await
}

/// A stack with a boundary, the plane attached as cluster `k1`, one namespace, and the
/// given policies (waited for until enforced).
struct Fixture {
    stack: Stack,
    boundary: String,
    namespace: String,
    client: kube::Client,
}

impl Fixture {
    async fn new(policies: &[(&str, Value)]) -> Fixture {
        let plane = plane().await;
        let stack = Stack::start(None).await;
        let boundary = stack
            .new_boundary("shop", "k1", plane.kubeconfig_yaml())
            .await;
        let namespace = stack.new_namespace(&boundary, "k1", "apps").await;
        let fixture = Fixture {
            stack,
            boundary,
            namespace,
            client: plane.client().await,
        };
        for (name, spec) in policies {
            fixture.policy(name, spec.clone()).await;
        }
        fixture
    }

    async fn policy(&self, name: &str, spec: Value) {
        self.stack.put_policy(&self.boundary, name, spec).await;
        self.stack.wait_enforced(&self.boundary, name, "k1").await;
    }

    fn resources(&self) -> String {
        format!("/v1/boundaries/{}/resources", self.boundary)
    }

    async fn create(&self, body: Value) -> Value {
        let (status, answer) = self.stack.call("POST", &self.resources(), Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{answer}");
        answer
    }

    async fn patch(&self, path: &str, body: Value) -> Value {
        self.stack
            .ok("PATCH", &format!("{}/{path}", self.resources()), Some(body))
            .await
    }

    /// Waits until the resource's status satisfies `done`; answers it and how long it took.
    async fn wait(&self, path: &str, done: impl Fn(&str) -> bool) -> (String, Duration) {
        let started = Instant::now();
        let mut last = Value::Null;
        while started.elapsed() < STATUS_TIMEOUT {
            let (_, body) = self
                .stack
                .call("GET", &format!("{}/{path}", self.resources()), None)
                .await;
            if let Some(status) = body["status"].as_str().filter(|s| done(s)) {
                return (status.to_owned(), started.elapsed());
            }
            last = body;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("{path}: status never as expected; last answer {last}");
    }

    /// `GET .../resources/{path}/workload`: what the cluster holds for it, read live.
    async fn workload(&self, path: &str) -> Value {
        self.stack
            .ok(
                "GET",
                &format!("{}/{path}/workload", self.resources()),
                None,
            )
            .await
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    async fn pods_of(&self, resource: &str) -> Vec<Pod> {
        self.pods()
            .list(&ListParams::default().labels(&format!("palisade.dev/resource={resource}")))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_image_is_rejected_and_a_fixed_one_runs() {
    let f = Fixture::new(&[("no-latest", no_latest())]).await;
    let posted = Instant::now();
    let answer = f
        .create(json!({"type": "app", "name": "web", "plan": "small",
                       "image": "ghcr.io/acme/web:latest", "labels": {"team": "web"}}))
        .await;
    // Placed in the boundary's only cluster and namespace.
    assert_eq!(answer["cluster"], "k1");
    assert_eq!(answer["namespace"], f.namespace.as_str());
    let (status, _) = f.wait("app/web", |s| s != "deploying").await;
    let rejected_after = posted.elapsed();
    assert_eq!(
        status,
        "rejected: Policy 'no-latest' (DisallowLatestTag) denied image ghcr.io/acme/web:latest: it is tagged latest or carries no tag."
    );
    assert!(f.deployments().get_opt("app-web").await.unwrap().is_none());

    // Fixed: it rolls out and runs.
    let fixed = Instant::now();
    f.patch("app/web", json!({"image": "ghcr.io/acme/web:1.4"}))
        .await;
    let (status, _) = f.wait("app/web", |s| s == "running").await;
    let running_after = fixed.elapsed();
    assert_eq!(status, "running");
    let deployment = f.deployments().get("app-web").await.unwrap();
    let labels = deployment.metadata.labels.clone().unwrap();
    assert_eq!(labels["team"], "web");
    assert_eq!(labels["palisade.dev/boundary"], f.boundary.as_str());
    assert_eq!(labels["palisade.dev/resource"], "web");
    let replica_sets: Api<ReplicaSet> = Api::namespaced(f.client.clone(), &f.namespace);
    let owned = replica_sets
        .list(&ListParams::default().labels("palisade.dev/resource=web"))
        .await
        .unwrap();
    assert_eq!(owned.items.len(), 1);
    let pods = f.pods_of("web").await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    assert_eq!(
        pod.status.as_ref().unwrap().phase.as_deref(),
        Some("Running")
    );
    assert_eq!(pod.metadata.labels.as_ref().unwrap()["team"], "web");
    let container = &pod.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("ghcr.io/acme/web:1.4"));
    let limits = container
        .resources
        .as_ref()
        .unwrap()
        .limits
        .clone()
        .unwrap();
    // The built-in catalog's app plan small: 0.5 vCPU, 1 GiB.
    assert_eq!(limits["cpu"].0, "500m");
    // As the API server writes quantities back (1024Mi is 1Gi).
    assert_eq!(limits["memory"].0, "1Gi");
    // What `describe resource` and the resource page read: the replicas, the pod, the events.
    let detail = f.workload("app/web").await;
    assert_eq!(detail["cluster"], "k1");
    assert_eq!(detail["namespace"], f.namespace.as_str());
    assert_eq!(
        detail["deployment"],
        json!({"name": "app-web", "desired": 1, "ready": 1, "available": 1, "updated": 1})
    );
    assert_eq!(detail["pods"].as_array().unwrap().len(), 1, "{detail}");
    assert_eq!(
        detail["pods"][0]["name"],
        pod.metadata.name.clone().unwrap().as_str()
    );
    assert_eq!(detail["pods"][0]["phase"], "Running");
    assert!(detail["pods"][0]["node"].is_string(), "{detail}");
    assert!(
        detail["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["reason"] == "ScalingReplicaSet" && e["object"] == "Deployment/app-web"),
        "{detail}"
    );
    // A plan move the API refuses changes nothing in the cluster.
    f.stack
        .put_policy(
            &f.boundary,
            "sizes",
            json!({"rules": [{"allowedComputePlans": {"plans": ["small"]}}]}),
        )
        .await;
    let (status, body) = f
        .stack
        .call(
            "PATCH",
            &format!("{}/app/web", f.resources()),
            Some(json!({"plan": "large"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = f.deployments().get("app-web").await.unwrap();
    assert_eq!(after.metadata.generation, deployment.metadata.generation);
    assert_eq!(f.wait("app/web", |s| s == "running").await.0, "running");
    eprintln!(
        "app web: POST to rejected {} ms; fixed to running {} ms",
        rejected_after.as_millis(),
        running_after.as_millis()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_under_a_newer_policy_keeps_the_old_pods_and_denies_new_ones() {
    let f = Fixture::new(&[]).await;
    f.create(json!({"type": "app", "name": "api", "plan": "small",
                    "image": "ghcr.io/acme/api:1.0", "replicas": 2}))
        .await;
    f.wait("app/api", |s| s == "running").await;
    let before = f.deployments().get("app-api").await.unwrap();

    f.policy(
        "registries",
        json!({"rules": [{"allowedRegistries": {"registries": ["registry.acme.internal"]}}]}),
    )
    .await;
    f.patch("app/api", json!({"replicas": 3})).await;
    let message = "Policy 'registries' (AllowedRegistries) denied image ghcr.io/acme/api:1.0: it is not under registry.acme.internal.";
    let (status, _) = f.wait("app/api", |s| s.starts_with("degraded")).await;
    assert_eq!(
        status,
        format!("degraded: 2/3 replicas; pods rejected: {message}")
    );
    // The Deployment was scaled, not re-applied: its template is the one it had.
    let after = f.deployments().get("app-api").await.unwrap();
    assert_eq!(after.spec.as_ref().unwrap().replicas, Some(3));
    assert_eq!(
        after.spec.as_ref().unwrap().template,
        before.spec.as_ref().unwrap().template
    );
    assert_eq!(f.pods_of("api").await.len(), 2);
    // The denial, as the resource's page and `describe resource` show it: the ReplicaSet's
    // FailedCreate event with the API server's message, and 2 of 3 replicas.
    let detail = f.workload("app/api").await;
    assert_eq!(detail["deployment"]["desired"], 3, "{detail}");
    assert_eq!(detail["deployment"]["ready"], 2, "{detail}");
    let denial = detail["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["reason"] == "FailedCreate")
        .unwrap_or_else(|| panic!("no FailedCreate event: {detail}"));
    assert_eq!(denial["type"], "Warning");
    assert!(denial["object"]
        .as_str()
        .unwrap()
        .starts_with("ReplicaSet/app-api-"));
    assert!(
        denial["message"].as_str().unwrap().contains(message),
        "{denial}"
    );

    // A pod that goes is not replaced.
    let victim = f.pods_of("api").await[0].metadata.name.clone().unwrap();
    f.pods()
        .delete(&victim, &DeleteParams::default().grace_period(0))
        .await
        .unwrap();
    let (status, seen_after) = f.wait("app/api", |s| s.starts_with("degraded: 1/3")).await;
    eprintln!(
        "app api: a pod deleted to its status saying 1/3: {} ms (polled every 50 ms)",
        seen_after.as_millis()
    );
    assert_eq!(
        status,
        format!("degraded: 1/3 replicas; pods rejected: {message}")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_build_of_uploaded_function_code_is_denied_and_was_warned_about() {
    let f = Fixture::new(&[("no-latest", no_latest())]).await;
    // Upload the code.
    let http = reqwest::Client::new();
    let code = b"def handler(event):\n    return 'ok'\n".to_vec();
    let response = http
        .post(format!(
            "{}/v1/boundaries/{}/uploads",
            f.stack.url, f.boundary
        ))
        .bearer_auth(&f.stack.token)
        .header("content-type", "application/octet-stream")
        .body(code.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let upload: Value = response.json().await.unwrap();
    let id = upload["id"].as_str().unwrap().to_owned();
    assert_eq!(upload["size"], code.len());

    // The create answers with the warning.
    let response = http
        .post(format!("{}{}", f.stack.url, f.resources()))
        .bearer_auth(&f.stack.token)
        .json(&json!({"type": "function", "name": "hook", "plan": "small", "upload": id}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let warnings: Vec<String> = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    assert!(
        warnings.iter().any(|w| w.contains(
            "Policy 'no-latest' (DisallowLatestTag) denies builds of uploaded code: the function builder is referenced by the tag latest"
        )),
        "{warnings:?}"
    );
    let (status, _) = f.wait("function/hook", |s| s != "deploying").await;
    assert_eq!(
        status,
        "build rejected: Policy 'no-latest' (DisallowLatestTag) denied image ghcr.io/palisade-dev/function-builder:latest: it is tagged latest or carries no tag."
    );
    let jobs: Api<Job> = Api::namespaced(f.client.clone(), &f.namespace);
    assert!(jobs
        .list(&ListParams::default().labels("palisade.dev/resource=hook"))
        .await
        .unwrap()
        .items
        .is_empty());

    // The upload opens only with a fetch token of that upload.
    let content = format!(
        "{}/v1/boundaries/{}/uploads/{id}/content",
        f.stack.url, f.boundary
    );
    let fetch = palisade_app::workloads::fetch_token(&f.stack.key, &f.boundary, &id).unwrap();
    let other =
        palisade_app::workloads::fetch_token(&f.stack.key, &f.boundary, "u-00000000000000000000")
            .unwrap();
    for (what, token) in [
        ("no token", None),
        ("the admin's API token", Some(f.stack.token.clone())),
        ("another upload's fetch token", Some(other)),
        ("a damaged fetch token", Some(format!("{fetch}x"))),
    ] {
        let mut request = http.get(&content);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status(), StatusCode::UNAUTHORIZED, "{what}");
    }
    let answer = http.get(&content).bearer_auth(&fetch).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::OK);
    assert_eq!(answer.bytes().await.unwrap().to_vec(), code);
    // The fetch token is no API token.
    let answer = http
        .get(format!("{}{}", f.stack.url, f.resources()))
        .bearer_auth(&fetch)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_git_build_runs_as_a_job_then_the_app_deploys_its_image() {
    let f = Fixture::new(&[]).await;
    f.create(json!({"type": "app", "name": "site", "plan": "small",
                    "source": "https://git.acme.internal/shop/site.git"}))
        .await;
    let (status, _) = f.wait("app/site", |s| s == "running").await;
    assert_eq!(status, "running");
    let jobs: Api<Job> = Api::namespaced(f.client.clone(), &f.namespace);
    let built = jobs
        .list(&ListParams::default().labels("palisade.dev/resource=site"))
        .await
        .unwrap()
        .items;
    assert_eq!(built.len(), 1);
    let job = &built[0];
    let builder = &job
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0];
    assert_eq!(
        builder.image.as_deref(),
        Some("ghcr.io/palisade-dev/app-builder:1.0.0")
    );
    let pods = f.pods_of("site").await;
    let running: Vec<&Pod> = pods
        .iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .unwrap()
                .get("palisade.dev/build")
                .is_none()
        })
        .collect();
    assert_eq!(running.len(), 1);
    let image = running[0].spec.as_ref().unwrap().containers[0]
        .image
        .clone()
        .unwrap();
    assert!(
        image.starts_with(&format!(
            "registry.palisade.internal/builds/{}/app-site:",
            f.boundary
        )),
        "{image}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_instance_runs_one_pod_with_a_container_per_component() {
    let f = Fixture::new(&[]).await;
    f.create(
        json!({"type": "container_instance", "name": "batch", "components": [
            {"name": "worker", "plan": "small", "image": "ghcr.io/acme/worker:2"},
            {"name": "proxy", "plan": "medium", "image": "ghcr.io/acme/proxy:1"},
        ]}),
    )
    .await;
    f.wait("container_instance/batch", |s| s == "running").await;
    let resources = |pod: &Pod| -> BTreeMap<String, (String, String)> {
        pod.spec
            .as_ref()
            .unwrap()
            .containers
            .iter()
            .map(|c| {
                let limits = c.resources.as_ref().unwrap().limits.clone().unwrap();
                let requests = c.resources.as_ref().unwrap().requests.clone().unwrap();
                assert_eq!(limits, requests, "requests equal limits");
                (
                    c.name.clone(),
                    (limits["cpu"].0.clone(), limits["memory"].0.clone()),
                )
            })
            .collect()
    };
    let pods = f.pods_of("batch").await;
    assert_eq!(pods.len(), 1);
    let catalog = palisade_policy::Catalog::builtin();
    let plan = |name: &str| {
        let plan = catalog
            .plan(
                palisade_policy::ResourceType::ContainerInstance,
                &palisade_policy::PlanName::parse(name).unwrap(),
            )
            .unwrap();
        // As the API server writes quantities back (1024Mi is 1Gi).
        let memory = if plan.memory_mib.is_multiple_of(1024) {
            format!("{}Gi", plan.memory_mib / 1024)
        } else {
            format!("{}Mi", plan.memory_mib)
        };
        (
            palisade_workload::deployment::cpu_quantity(plan.cpu),
            memory,
        )
    };
    assert_eq!(
        resources(&pods[0]),
        BTreeMap::from([
            ("worker".to_owned(), plan("small")),
            ("proxy".to_owned(), plan("medium")),
        ])
    );

    // A component added by PATCH appears after the rollout.
    f.patch(
        "container_instance/batch",
        json!({"components": [
            {"name": "worker", "plan": "small", "image": "ghcr.io/acme/worker:2"},
            {"name": "proxy", "plan": "medium", "image": "ghcr.io/acme/proxy:1"},
            {"name": "metrics", "plan": "small", "image": "ghcr.io/acme/metrics:1"},
        ]}),
    )
    .await;
    let started = Instant::now();
    loop {
        let pods = f.pods_of("batch").await;
        let ready = pods.len() == 1 && resources(&pods[0]).len() == 3;
        if ready
            && f.wait("container_instance/batch", |s| s == "running")
                .await
                .0
                == "running"
        {
            assert!(resources(&pods[0]).contains_key("metrics"));
            break;
        }
        assert!(
            started.elapsed() < STATUS_TIMEOUT,
            "the rollout never finished: {pods:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_resource_removes_its_objects_and_nothing_else() {
    let f = Fixture::new(&[]).await;
    for name in ["one", "two"] {
        f.create(json!({"type": "app", "name": name, "plan": "small",
                        "image": "ghcr.io/acme/web:1.0"}))
            .await;
    }
    // Someone else's Deployment in the same namespace.
    let theirs: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "app-one-copy", "labels": {"palisade.dev/resource": "one"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"x": "y"}},
                 "template": {"metadata": {"labels": {"x": "y"}},
                              "spec": {"containers": [{"name": "c", "image": "ghcr.io/acme/web:1.0"}]}}},
    }))
    .unwrap();
    f.deployments()
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    f.wait("app/one", |s| s == "running").await;
    f.wait("app/two", |s| s == "running").await;

    let (status, _) = f
        .stack
        .call("DELETE", &format!("{}/app/one", f.resources()), None)
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let started = Instant::now();
    while f.deployments().get_opt("app-one").await.unwrap().is_some() {
        assert!(
            started.elapsed() < STATUS_TIMEOUT,
            "app-one was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(f.deployments().get_opt("app-two").await.unwrap().is_some());
    assert!(f
        .deployments()
        .get_opt("app-one-copy")
        .await
        .unwrap()
        .is_some());
}

/// What the API answers about placement before anything reaches a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn placement_is_checked_and_defaults_to_the_only_namespace() {
    let f = Fixture::new(&[]).await;
    let refusals = [
        (
            ("namespace", "kube-system"),
            format!(
                "/namespace: namespace 'kube-system' in cluster 'k1' does not belong to boundary '{}'; its namespaces there are {}",
                f.boundary, f.namespace
            ),
        ),
        (
            ("cluster", "k2"),
            format!(
                "/cluster: cluster 'k2' is not attached to boundary '{}'; its clusters are k1",
                f.boundary
            ),
        ),
    ];
    for ((field, placed), message) in refusals {
        let mut app = json!({"type": "app", "name": "x", "plan": "small",
                             "image": "ghcr.io/acme/web:1"});
        app[field] = json!(placed);
        let (status, body) = f.stack.call("POST", &f.resources(), Some(app)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert_eq!(body["error"]["message"], message);
    }
    // A database has no workload and no placement.
    let db = f
        .create(json!({"type": "postgresql", "name": "db", "plan": "small"}))
        .await;
    assert!(
        db.get("cluster").is_none() && db.get("status").is_none(),
        "{db}"
    );
}

/// Releasing a namespace where workloads run is refused with the workloads named (as deleting
/// or detaching their cluster is): the release would take their Deployments away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn releasing_a_namespace_with_workloads_is_refused_and_they_keep_running() {
    let f = Fixture::new(&[]).await;
    for name in ["one", "two"] {
        f.create(json!({"type": "app", "name": name, "plan": "small",
                        "image": "ghcr.io/acme/web:1.0"}))
            .await;
    }
    f.wait("app/one", |s| s == "running").await;
    f.wait("app/two", |s| s == "running").await;
    let path = namespace_path(&f.boundary, "k1", &f.namespace);
    let (status, body) = f.stack.call("DELETE", &path, None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(
        body["error"]["message"],
        format!(
            "namespace '{ns}' in cluster 'k1' runs 2 workload(s): {b}/app/one, {b}/app/two; delete them or move them to another namespace first",
            ns = f.namespace,
            b = f.boundary
        )
    );
    // Still the boundary's, still running, after a pass.
    let (status, _) = f.stack.call("GET", &path, None).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_secs(2)).await;
    for name in ["app-one", "app-two"] {
        assert!(
            f.deployments().get_opt(name).await.unwrap().is_some(),
            "{name}"
        );
    }
    f.wait("app/one", |s| s == "running").await;
    // Without workloads the release goes through.
    for name in ["one", "two"] {
        let (status, _) = f
            .stack
            .call("DELETE", &format!("{}/app/{name}", f.resources()), None)
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
    }
    let (status, body) = f.stack.call("DELETE", &path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
}
