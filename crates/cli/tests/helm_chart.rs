//! The Helm chart (`deploy/helm/palisade`): `helm lint` and `helm template` with the default
//! values and with every option set (`testdata/helm/full-values.yaml`), bad values refused at
//! install time with the key named, and every rendered object accepted by real API servers
//! (1.30 and 1.37) in a server-side dry-run apply. helm is built from its Go module
//! (`testenv/build.sh helm`, cached like the control plane).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly"
)]

use std::path::PathBuf;
use std::process::{Command, Output};

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::Api;
use palisade_testkit::control_plane::{self, temp_namespace};
use serde_json::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> String {
    root().join("deploy/helm/palisade").display().to_string()
}

fn full_values() -> String {
    root()
        .join("testdata/helm/full-values.yaml")
        .display()
        .to_string()
}

fn helm(args: &[&str]) -> Output {
    Command::new(control_plane::helm())
        .args(args)
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("palisade-helm-cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("palisade-helm-config"),
        )
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// `helm template` of the chart with `args`; the rendered objects.
fn render(args: &[&str]) -> Vec<Value> {
    let chart = chart();
    let mut all = vec!["template", "rel", chart.as_str(), "--namespace", "platform"];
    all.extend_from_slice(args);
    let out = helm(&all);
    assert!(out.status.success(), "helm {all:?}: {}", text(&out.stderr));
    text(&out.stdout)
        .split("\n---")
        .filter_map(|doc| serde_yaml_ng::from_str::<Value>(doc).ok())
        .filter(|v| v.is_object())
        .collect()
}

fn kinds(objects: &[Value]) -> Vec<String> {
    let mut kinds: Vec<String> = objects
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect();
    kinds.sort();
    kinds
}

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} rendered"))
}

#[test]
fn the_chart_lints_and_renders_with_default_and_full_values() {
    let chart = chart();
    let values = full_values();
    for args in [
        vec!["lint", "--strict", chart.as_str()],
        vec!["lint", "--strict", chart.as_str(), "-f", values.as_str()],
    ] {
        let out = helm(&args);
        assert!(
            out.status.success(),
            "helm {args:?}:\n{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }

    let defaults = render(&[]);
    assert_eq!(
        kinds(&defaults),
        [
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount"
        ]
    );
    let deployment = find(&defaults, "Deployment");
    assert_eq!(deployment["metadata"]["name"], "rel-palisade");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let pod = &deployment["spec"]["template"]["spec"];
    let container = &pod["containers"][0];
    assert_eq!(container["image"], "palisade:0.1.0");
    assert_eq!(
        container["args"],
        serde_json::json!([
            "serve",
            "--listen=0.0.0.0:8080",
            "--data-dir=/var/lib/palisade"
        ])
    );
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(
        container["env"][0]["valueFrom"]["secretKeyRef"],
        serde_json::json!({"name": "palisade-database", "key": "url"})
    );
    assert_eq!(
        container["env"][1]["valueFrom"]["secretKeyRef"],
        serde_json::json!({"name": "palisade-encryption-key", "key": "key"})
    );
    assert_eq!(
        container["env"][2]["name"], "RUST_LOG",
        "no PALISADE_ADMIN_TOKEN unless adminToken names a Secret"
    );
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);

    let full = render(&["-f", &values]);
    assert_eq!(
        kinds(&full),
        [
            "ConfigMap",
            "Deployment",
            "Ingress",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount",
            "ServiceMonitor"
        ]
    );
    let deployment = find(&full, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 3);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        container["image"],
        "registry.example.com/platform/palisade@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
    );
    assert_eq!(
        container["args"],
        serde_json::json!([
            "serve",
            "--listen=0.0.0.0:8080",
            "--data-dir=/var/lib/palisade",
            "--catalog=/etc/palisade/catalog.yaml",
            "--no-reconciler"
        ])
    );
    assert_eq!(container["env"][2]["name"], "PALISADE_ADMIN_TOKEN");
    assert_eq!(
        container["env"][2]["valueFrom"]["secretKeyRef"],
        serde_json::json!({"name": "palisade-admin", "key": "admin-token"})
    );
    // The catalog the ConfigMap carries is one `palisade serve --catalog` reads.
    let catalog = find(&full, "ConfigMap")["data"]["catalog.yaml"]
        .as_str()
        .unwrap();
    let parsed = palisade_api_types::catalog_file::parse(catalog).unwrap();
    assert_eq!(
        format!("{:?}", parsed.plans(palisade_policy::ResourceType::App)),
        format!(
            "{:?}",
            palisade_api_types::catalog_file::parse(
                "app: [{name: small, cpu: 0.5, memory: 1 GiB}, {name: large, cpu: 2, memory: 4 GiB}]\nvalkey: [{name: small, cpu: 0.5, memory: 1 GiB}]"
            )
            .unwrap()
            .plans(palisade_policy::ResourceType::App)
        )
    );
}

#[test]
fn a_chosen_admission_layout_is_passed_to_serve() {
    for layout in ["shared", "per-boundary"] {
        let objects = render(&["--set", &format!("reconciler.admissionLayout={layout}")]);
        let args =
            &find(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(
            args,
            &serde_json::json!([
                "serve",
                "--listen=0.0.0.0:8080",
                "--data-dir=/var/lib/palisade",
                format!("--admission-layout={layout}")
            ])
        );
    }
}

#[test]
fn bad_values_fail_at_install_naming_the_key() {
    for (set, names) in [
        ("database.existingSecret=", "database.existingSecret"),
        (
            "encryptionKey.existingSecret=",
            "encryptionKey.existingSecret",
        ),
        ("replicaCount=0", "replicaCount"),
        ("service.type=Internal", "service.type"),
        ("service.port=70000", "service.port"),
        ("image.digest=latest", "image.digest"),
        ("replicas=2", "replicas"),
        (
            "reconciler.admissionLayout=flat",
            "reconciler.admissionLayout",
        ),
    ] {
        let out = helm(&[
            "template",
            "rel",
            &chart(),
            "--namespace",
            "platform",
            "--set",
            set,
        ]);
        assert!(!out.status.success(), "--set {set} was accepted");
        let stderr = text(&out.stderr);
        let pointer = format!("/{}", names.replace('.', "/"));
        assert!(
            stderr.contains(names) || stderr.contains(&pointer),
            "--set {set}: the error does not name {names}:\n{stderr}"
        );
    }
}

/// The README's install commands work on a fresh cluster: the namespace the Secrets go into is
/// created before any command uses it.
#[test]
fn the_readme_install_commands_create_the_namespace_first() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("## Install into a cluster (Helm chart)")
        .nth(1)
        .unwrap();
    let block = section
        .split("```sh\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap();
    // Whole commands: continuation lines joined.
    let commands: Vec<String> = block
        .replace("\\\n", " ")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    let created = commands
        .iter()
        .position(|c| c == "kubectl create namespace platform")
        .unwrap_or_else(|| panic!("no `kubectl create namespace platform` in:\n{block}"));
    let first_use = commands
        .iter()
        .position(|c| c.contains("-n platform"))
        .unwrap();
    assert!(
        created < first_use,
        "the namespace is used before it is created:\n{block}"
    );
}

/// Server-side dry-run applies every object the full values render (the ServiceMonitor
/// aside: its CRD is prometheus-operator's, not the API server's).
async fn accepted_by_the_api_server(version: &str) {
    let wanted = version.to_owned();
    let plane = tokio::task::spawn_blocking(move || control_plane::shared(&wanted))
        .await
        .unwrap();
    let client = plane.client().await;
    let namespace = temp_namespace(&client, None).await;
    let values = full_values();
    let objects = render(&["-f", &values]);
    let mut applied = 0;
    for object in objects.iter().filter(|o| o["kind"] != "ServiceMonitor") {
        let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (
                String::new(),
                object["apiVersion"].as_str().unwrap().to_owned(),
            ),
        };
        let gvk = GroupVersionKind::gvk(&group, &version, object["kind"].as_str().unwrap());
        let (resource, _) = kube::discovery::pinned_kind(&client, &gvk).await.unwrap();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
        let name = object["metadata"]["name"].as_str().unwrap();
        // Strict: a field the API server does not know is an error, not a warning.
        let params = PatchParams::apply("palisade-chart-test")
            .dry_run()
            .validation_strict();
        api.patch(name, &params, &Patch::Apply(object))
            .await
            .unwrap_or_else(|e| panic!("{} {name} refused: {e}", object["kind"]));
        applied += 1;
    }
    assert_eq!(applied, 6);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_objects_are_accepted_by_kubernetes_1_30() {
    accepted_by_the_api_server("1.30").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rendered_objects_are_accepted_by_kubernetes_1_37() {
    accepted_by_the_api_server("1.37").await;
}

/// `helm install` of the chart with its default values into a control plane that runs
/// workloads (kube-controller-manager, kube-scheduler, kwok's fake nodes): the Deployment's
/// pods are scheduled and become Running, and `helm status` says deployed. The pods do not run
/// palisade here (kwok runs no container): the image itself is proven apart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_install_runs_the_pods_on_kubernetes_1_37() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
    use kube::api::{ListParams, PostParams};

    let started = std::time::Instant::now();
    let options = control_plane::Options {
        workloads: true,
        ..control_plane::Options::default()
    };
    let plane = tokio::task::spawn_blocking(move || {
        control_plane::ControlPlane::start_with("1.37", &options)
    })
    .await
    .unwrap();
    let client = plane.client().await;
    let namespace = "platform";
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": namespace}})).unwrap(),
        )
        .await
        .unwrap();
    // The two Secrets the chart's defaults name, as the README's install section makes them.
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
    for (name, key, value) in [
        (
            "palisade-database",
            "url",
            "postgres://palisade:secret@postgres.platform:5432/palisade",
        ),
        (
            "palisade-encryption-key",
            "key",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        ),
    ] {
        let secret = serde_json::json!({"metadata": {"name": name}, "stringData": {key: value}});
        secrets
            .create(
                &PostParams::default(),
                &serde_json::from_value(secret).unwrap(),
            )
            .await
            .unwrap();
    }
    let kubeconfig = plane.kubeconfig_path().display().to_string();
    let chart = chart();
    let installed = helm(&[
        "install",
        "palisade",
        &chart,
        "--namespace",
        namespace,
        "--kubeconfig",
        &kubeconfig,
    ]);
    assert!(
        installed.status.success(),
        "helm install: {}{}",
        text(&installed.stdout),
        text(&installed.stderr)
    );
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace);
    let pods = Api::<Pod>::namespaced(client.clone(), namespace);
    let deadline = started + std::time::Duration::from_secs(180);
    let running = loop {
        let deployment = deployments.get("palisade").await.unwrap();
        let available = deployment
            .status
            .as_ref()
            .and_then(|s| s.available_replicas)
            .unwrap_or(0);
        let running: Vec<Pod> = pods
            .list(&ListParams::default().labels("app.kubernetes.io/instance=palisade"))
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|p| {
                p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
                    && p.spec
                        .as_ref()
                        .and_then(|s| s.node_name.as_deref())
                        .is_some()
            })
            .collect();
        if available == 2 && running.len() == 2 {
            break running;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "after 180 s: {available} available, {} Running",
            running.len()
        );
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    for pod in &running {
        let spec = pod.spec.as_ref().unwrap();
        let container = &spec.containers[0];
        assert_eq!(
            container.args.as_ref().unwrap()[0],
            "serve",
            "{container:?}"
        );
        assert_eq!(
            spec.security_context.as_ref().unwrap().run_as_user,
            Some(65532)
        );
    }
    let status = helm(&[
        "status",
        "palisade",
        "--namespace",
        namespace,
        "--kubeconfig",
        &kubeconfig,
    ]);
    assert!(
        text(&status.stdout).contains("STATUS: deployed"),
        "{}",
        text(&status.stdout)
    );
    eprintln!(
        "helm install: 2 pods Running on fake nodes {:.1} s after the control plane started to start",
        started.elapsed().as_secs_f64()
    );
}

/// `source <workdir>/env` (README, "Admission rules in a local Kubernetes control plane")
/// exports KUBECONFIG, so that a client run afterwards (helm here, kubectl alike) talks to
/// the test control plane without `--kubeconfig`.
#[test]
fn sourcing_the_testenv_env_file_points_clients_at_the_control_plane() {
    let plane = control_plane::shared("1.37");
    let kubeconfig = plane.kubeconfig_path().display().to_string();
    let env_file = plane.workdir().join("env");
    let written = std::fs::read_to_string(&env_file).unwrap();
    assert!(
        written
            .lines()
            .any(|l| l == format!("export KUBECONFIG={kubeconfig}")),
        "{}:\n{written}",
        env_file.display()
    );
    assert_eq!(plane.env().get("KUBECONFIG"), Some(&kubeconfig));
    // No KUBECONFIG from outside, and a home without ~/.kube/config: only the env file can
    // point helm at the control plane.
    let home = tempfile::tempdir().unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(r#"source "$1" && exec "$2" list --namespace default --output json"#)
        .arg("bash")
        .arg(&env_file)
        .arg(control_plane::helm())
        .env_remove("KUBECONFIG")
        .env("HOME", home.path())
        .env("HELM_CACHE_HOME", home.path().join("cache"))
        .env("HELM_CONFIG_HOME", home.path().join("config"))
        .env("HELM_DATA_HOME", home.path().join("data"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "helm list after sourcing the env file: {}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout).trim(), "[]");
}
