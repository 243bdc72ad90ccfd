//! The Helm chart (`deploy/helm/palisade`): `helm lint` and `helm template` with the default
//! values and with every option set (`testdata/helm/full-values.yaml`), bad values refused at
//! install time with the key named, and every rendered object accepted by real API servers
//! (1.30 and 1.37) in a server-side dry-run apply. helm is built from its Go module
//! (`testenv/build.sh helm`, cached like the control plane).

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::common::text;
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

/// `helm` with `args`, its cache and configuration kept in the temporary directory.
pub(crate) fn helm(args: &[&str]) -> Output {
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

fn named<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} rendered"))
}

/// The `palisade` container of the rendered Deployment.
fn palisade_container(objects: &[Value]) -> &Value {
    &find(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
}

/// The serve arguments the chart always passes, followed by `more`.
fn serve_args(more: &[&str]) -> Value {
    let mut args = vec![
        "serve",
        "--listen=0.0.0.0:8080",
        "--data-dir=/var/lib/palisade",
        "--log-format=json",
    ];
    args.extend_from_slice(more);
    serde_json::json!(args)
}

/// The error of `helm template` with `--set set`, which must be refused.
fn refused_set(set: &str) -> String {
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
    text(&out.stderr)
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
            "--data-dir=/var/lib/palisade",
            "--log-format=json"
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
        serve_args(&[
            "--catalog=/etc/palisade/catalog.yaml",
            "--workload-config=/etc/palisade/workload-config.yaml",
            "--public-url=https://palisade.platform.example.com",
            "--admission-layout=shared",
            "--audit-interval=90s",
            "--token-write-rate=5.5",
            "--token-write-burst=40",
            "--boundary-write-rate=0",
            "--boundary-write-burst=10",
            "--max-upload-bytes=512Mi",
            "--history-days=90",
            "--demo"
        ])
    );
    assert_eq!(container["env"][2]["name"], "PALISADE_ADMIN_TOKEN");
    assert_eq!(
        container["env"][2]["valueFrom"]["secretKeyRef"],
        serde_json::json!({"name": "palisade-admin", "key": "admin-token"})
    );
    // extraEnv follows the chart's own variables, as written.
    assert_eq!(
        container["env"].as_array().unwrap()[3..],
        [
            serde_json::json!({"name": "RUST_LOG", "value": "debug"}),
            serde_json::json!({"name": "HTTPS_PROXY", "value": "http://proxy.example.com:3128"}),
            serde_json::json!({"name": "NO_PROXY", "valueFrom": {"configMapKeyRef": {"name": "proxy", "key": "no-proxy"}}}),
        ]
    );
    // Both files in /etc/palisade, each from its ConfigMap.
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(
        container["volumeMounts"][1],
        serde_json::json!({"name": "config", "mountPath": "/etc/palisade", "readOnly": true})
    );
    assert_eq!(
        pod["volumes"][1],
        serde_json::json!({"name": "config", "projected": {"sources": [
            {"configMap": {"name": "rel-palisade-catalog"}},
            {"configMap": {"name": "rel-palisade-workload-config"}}
        ]}})
    );
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    assert!(
        annotations["checksum/workload-config"].is_string(),
        "a changed workload configuration restarts the pods: {annotations}"
    );
    // The workload configuration the ConfigMap carries is the one `palisade serve
    // --workload-config` reads, every key as given (a big number stays a whole number).
    let workload_config = named(&full, "ConfigMap", "rel-palisade-workload-config")["data"]
        ["workload-config.yaml"]
        .as_str()
        .unwrap();
    assert_eq!(
        workload_config,
        "appBuilder: registry.example.com/builders/app-builder:2.0.1\n\
         buildRegistry: registry.example.com:5000/builds\n\
         fileServer: registry.example.com/mirror/nginx:1.27.3\n\
         functionBuilder: registry.example.com/builders/function-builder@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n\
         functionUploadBuilder: registry.example.com:5000/builders/function-builder\n\
         staticWebAppBuilder: registry.example.com/builders/static-web-app-builder:2.0.1\n\
         staticWebAppCpu: 0.5\n\
         staticWebAppMemoryMib: 1048576\n"
    );
    assert_eq!(
        palisade_workload::WorkloadConfig::from_yaml(workload_config).unwrap(),
        palisade_workload::WorkloadConfig {
            app_builder: "registry.example.com/builders/app-builder:2.0.1".to_owned(),
            function_builder: "registry.example.com/builders/function-builder@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef".to_owned(),
            static_web_app_builder: "registry.example.com/builders/static-web-app-builder:2.0.1".to_owned(),
            function_upload_builder: "registry.example.com:5000/builders/function-builder".to_owned(),
            file_server: "registry.example.com/mirror/nginx:1.27.3".to_owned(),
            build_registry: "registry.example.com:5000/builds".to_owned(),
            static_web_app_cpu: 0.5,
            static_web_app_memory_mib: 1_048_576,
        }
    );
    // The catalog the ConfigMap carries is one `palisade serve --catalog` reads.
    let catalog = named(&full, "ConfigMap", "rel-palisade-catalog")["data"]["catalog.yaml"]
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
    for layout in ["per-policy", "shared", "per-boundary"] {
        let objects = render(&["--set", &format!("reconciler.admissionLayout={layout}")]);
        let args =
            &find(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(
            args,
            &serde_json::json!([
                "serve",
                "--listen=0.0.0.0:8080",
                "--data-dir=/var/lib/palisade",
                "--log-format=json",
                format!("--admission-layout={layout}")
            ])
        );
    }
}

#[test]
fn serve_flags_come_from_their_values() {
    let objects = render(&[
        "--set",
        "publicUrl=https://palisade.example.com/",
        "--set",
        "reconciler.auditInterval=1h",
        "--set-json",
        r#"extraArgs=["--demo"]"#,
        "--set-json",
        r#"extraEnv=[{"name":"HTTPS_PROXY","value":"http://proxy:3128"}]"#,
        "--set-json",
        r#"workloadConfig={"appBuilder":"ghcr.io/acme/app-builder:1.2.3","functionBuilder":"ghcr.io/acme/function-builder:1.2.3","staticWebAppBuilder":"ghcr.io/acme/static-web-app-builder:1.2.3","functionUploadBuilder":"ghcr.io/acme/function-builder","fileServer":"docker.io/library/nginx:1.27.3","buildRegistry":"registry.acme.internal/builds","staticWebAppCpu":0.25,"staticWebAppMemoryMib":256}"#,
    ]);
    assert_eq!(
        kinds(&objects),
        [
            "ConfigMap",
            "Deployment",
            "PodDisruptionBudget",
            "Service",
            "ServiceAccount"
        ]
    );
    let container = palisade_container(&objects);
    assert_eq!(
        container["args"],
        serve_args(&[
            "--workload-config=/etc/palisade/workload-config.yaml",
            "--public-url=https://palisade.example.com/",
            "--audit-interval=1h",
            "--demo"
        ])
    );
    assert_eq!(
        container["env"].as_array().unwrap().last().unwrap(),
        &serde_json::json!({"name": "HTTPS_PROXY", "value": "http://proxy:3128"})
    );
    let config_map = named(&objects, "ConfigMap", "rel-palisade-workload-config");
    assert_eq!(
        config_map["data"],
        serde_json::json!({"workload-config.yaml": "\
appBuilder: ghcr.io/acme/app-builder:1.2.3
buildRegistry: registry.acme.internal/builds
fileServer: docker.io/library/nginx:1.27.3
functionBuilder: ghcr.io/acme/function-builder:1.2.3
functionUploadBuilder: ghcr.io/acme/function-builder
staticWebAppBuilder: ghcr.io/acme/static-web-app-builder:1.2.3
staticWebAppCpu: 0.25
staticWebAppMemoryMib: 256
"})
    );
    let pod = &find(&objects, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(
        pod["volumes"][1],
        serde_json::json!({"name": "config", "projected": {"sources": [
            {"configMap": {"name": "rel-palisade-workload-config"}}
        ]}})
    );
    assert_eq!(
        container["volumeMounts"][1],
        serde_json::json!({"name": "config", "mountPath": "/etc/palisade", "readOnly": true})
    );

    // The audit runs in the reconciler: without it, no interval (nor layout) is passed.
    let objects = render(&[
        "--set",
        "reconciler.enabled=false",
        "--set",
        "reconciler.auditInterval=1h",
        "--set",
        "reconciler.admissionLayout=shared",
    ]);
    assert_eq!(
        palisade_container(&objects)["args"],
        serve_args(&["--no-reconciler"])
    );
    // The default interval is serve's own: not repeated.
    let objects = render(&["--set", "reconciler.auditInterval=10m"]);
    assert_eq!(palisade_container(&objects)["args"], serve_args(&[]));
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
        ("publicUrl=palisade.example.com", "publicUrl"),
        ("publicUrl=https://palisade.example.com/?x=1", "publicUrl"),
        ("publicUrl=https:///builds", "publicUrl"),
        ("reconciler.auditInterval=5s", "reconciler.auditInterval"),
        ("reconciler.auditInterval=1d", "reconciler.auditInterval"),
        (
            "workloadConfig.appBuilder=ghcr.io/acme/app-builder:1.0",
            "workloadConfig",
        ),
        (
            "workloadConfig.appBuilder=ghcr.io/acme/app-builder:latest",
            "workloadConfig.appBuilder",
        ),
        ("workloadConfig.registry=x", "workloadConfig"),
        ("extraArgs[0]=--listen=0.0.0.0:9090", "extraArgs.0"),
        ("extraArgs[0]=--no-reconciler", "extraArgs.0"),
        ("extraEnv[0].value=x", "extraEnv.0"),
        ("extraEnv[0].name=RUST_LOG", "extraEnv.0.name"),
    ] {
        let stderr = refused_set(set);
        let pointer = format!("/{}", names.replace('.', "/"));
        assert!(
            stderr.contains(names) || stderr.contains(&pointer),
            "--set {set}: the error does not name {names}:\n{stderr}"
        );
    }
}

#[test]
fn a_wrong_type_for_each_new_value_fails_naming_the_key() {
    for (set, line) in [
        (
            "publicUrl=8080",
            "- at '/publicUrl': got number, want string",
        ),
        (
            "reconciler.auditInterval=600",
            "- at '/reconciler/auditInterval': got number, want string",
        ),
        (
            "workloadConfig=images.yaml",
            "- at '/workloadConfig': got string, want object",
        ),
        (
            "workloadConfig.staticWebAppCpu=fast",
            "- at '/workloadConfig/staticWebAppCpu': got string, want number",
        ),
        (
            "workloadConfig.staticWebAppMemoryMib=256Mi",
            "- at '/workloadConfig/staticWebAppMemoryMib': got string, want integer",
        ),
        (
            "workloadConfig.appBuilder=true",
            "- at '/workloadConfig/appBuilder': got boolean, want string",
        ),
        (
            "extraArgs=--demo",
            "- at '/extraArgs': got string, want array",
        ),
        (
            "writeLimits.tokenRate=fast",
            "- at '/writeLimits/tokenRate': got string, want number",
        ),
        (
            "writeLimits.boundaryBurst=many",
            "- at '/writeLimits/boundaryBurst': got string, want integer",
        ),
        (
            "historyDays=forever",
            "- at '/historyDays': got string, want integer",
        ),
        (
            "maxUploadBytes=1GB",
            "- at '/maxUploadBytes': '1GB' does not match pattern '^[0-9]+(Ki|Mi|Gi|Ti)?$'",
        ),
        (
            "extraArgs[0]=1",
            "- at '/extraArgs/0': got number, want string",
        ),
        (
            "extraEnv=HTTPS_PROXY",
            "- at '/extraEnv': got string, want array",
        ),
        (
            "extraEnv[0].name=A,extraEnv[0].value=1",
            "- at '/extraEnv/0/value': got number, want string",
        ),
        (
            "extraEnv[0].name=A,extraEnv[0].valueFrom=x",
            "- at '/extraEnv/0/valueFrom': got string, want object",
        ),
    ] {
        let stderr = refused_set(set);
        assert!(
            stderr.lines().any(|l| l == line),
            "--set {set}: no line {line:?} in:\n{stderr}"
        );
    }
}

/// The Helm guide's install commands work on a fresh cluster: the namespace the Secrets go
/// into is created before any command uses it.
#[test]
fn the_helm_guide_s_install_commands_create_the_namespace_first() {
    let guide = std::fs::read_to_string(root().join("docs/install-helm.md")).unwrap();
    let section = guide.split("## The chart").nth(1).unwrap();
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
    assert_eq!(applied, 7);
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

/// `source <workdir>/env` (README, "One cluster walkthrough")
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
