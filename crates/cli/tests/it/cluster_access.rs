//! `palisade cluster kubeconfig` end to end (docs/cluster-access.md), against a real API
//! server with kube-controller-manager (whose token controller fills the Secret): the printed
//! YAML applied as an admin would apply it, the account's token Secret read back, the
//! kubeconfig made from it added to a running palisade, and the cluster `enforced` with the
//! account's rights only. Then `/metrics` has the cluster's series, at 0 where nothing happened.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use kube::api::{DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use palisade_testkit::control_plane::{self, ControlPlane};

use crate::common::{command, palisade_with_stdin, serve, text};
use crate::metrics::{samples, scrape};

fn offline(args: &[&str], input: Option<&str>) -> Output {
    let home = tempfile::tempdir().unwrap();
    let mut child = command(home.path())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(input) = input {
        use std::io::Write;
        stdin.write_all(input.as_bytes()).unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// `kubectl apply --server-side` of every document of `yaml`, with the admin's client.
async fn apply(client: &kube::Client, yaml: &str) -> Vec<String> {
    let mut applied = Vec::new();
    for document in yaml.split("\n---\n") {
        let object: serde_json::Value = serde_yaml_ng::from_str(document).unwrap();
        let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_owned(), v.to_owned()),
            None => (
                String::new(),
                object["apiVersion"].as_str().unwrap().to_owned(),
            ),
        };
        let kind = object["kind"].as_str().unwrap();
        let gvk = GroupVersionKind::gvk(&group, &version, kind);
        let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk).await.unwrap();
        let name = object["metadata"]["name"].as_str().unwrap();
        let api: kube::Api<DynamicObject> = match capabilities.scope {
            kube::discovery::Scope::Namespaced => kube::Api::namespaced_with(
                client.clone(),
                object["metadata"]["namespace"].as_str().unwrap(),
                &resource,
            ),
            kube::discovery::Scope::Cluster => kube::Api::all_with(client.clone(), &resource),
        };
        let params = PatchParams::apply("kubectl").validation_strict();
        api.patch(name, &params, &Patch::Apply(&object))
            .await
            .unwrap_or_else(|e| panic!("{kind} {name}: {e}"));
        applied.push(format!("{kind}/{name}"));
    }
    applied
}

#[test]
fn a_service_account_token_kubeconfig_gets_a_managed_cluster_enforced() {
    let started = Instant::now();
    let options = control_plane::Options {
        controller_manager: true,
        ..control_plane::Options::default()
    };
    let plane = ControlPlane::start_with("1.37", &options);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let admin = runtime.block_on(plane.client());

    // 1. What to apply in the cluster.
    let account = control_plane::unique_name("access");
    let out = offline(
        &[
            "cluster",
            "kubeconfig",
            "--service-account",
            &format!("{account}/palisade"),
        ],
        None,
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    let applied = runtime.block_on(apply(&admin, &yaml));
    assert_eq!(
        applied,
        [
            format!("Namespace/{account}"),
            "ServiceAccount/palisade".to_owned(),
            "ClusterRole/palisade".to_owned(),
            "ClusterRoleBinding/palisade".to_owned(),
            "Secret/palisade-token".to_owned(),
        ]
    );
    // Applied again (as after an upgrade that changes the role): nothing to fix by hand.
    runtime.block_on(apply(&admin, &yaml));

    // 2. The Secret, once the token controller filled it, as `kubectl get secret -o json`.
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(admin.clone(), &account);
    let deadline = Instant::now() + Duration::from_secs(60);
    let secret = loop {
        let secret = runtime.block_on(secrets.get("palisade-token")).unwrap();
        if secret
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key("token") && d.contains_key("ca.crt"))
        {
            break secret;
        }
        assert!(Instant::now() < deadline, "the token was never filled in");
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut secret_json = serde_json::to_value(&secret).unwrap();
    secret_json["apiVersion"] = "v1".into();
    secret_json["kind"] = "Secret".into();
    let server = plane.env()["APISERVER_URL"].clone();
    let out = offline(
        &[
            "cluster",
            "kubeconfig",
            "--from-secret",
            "-",
            "--api-server",
            &server,
        ],
        Some(&secret_json.to_string()),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let kubeconfig = text(&out.stdout);
    assert!(
        kubeconfig.contains(&format!("system:serviceaccount:{account}:palisade")),
        "{kubeconfig}"
    );

    // 3. Added to a running palisade, attached, a namespace and a policy: enforced.
    let palisade = serve(&[]);
    let run = |args: &[&str], input: &str| {
        let out = palisade_with_stdin(&palisade, args, input);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    run(&["boundary", "create", "shop"], "");
    assert_eq!(
        run(
            &["cluster", "add", "managed", "--kubeconfig", "-"],
            &kubeconfig
        ),
        "cluster managed saved\n"
    );
    run(&["cluster", "attach", "shop", "managed"], "");
    let namespace = control_plane::unique_name("web");
    run(
        &[
            "namespace",
            "create",
            &format!("shop/{namespace}"),
            "--cluster",
            "managed",
        ],
        "",
    );
    run(
        &["apply", "-f", "-"],
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: trusted, boundary: shop}\nspec:\n  rules:\n    - allowedRegistries: {registries: [ghcr.io/acme]}\n",
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let policies = run(&["get", "policies", "shop"], "");
        if policies.contains("managed: enforced") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never enforced:\n{policies}\n{}",
            run(&["get", "clusters"], "")
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let clusters = run(&["get", "clusters"], "");
    assert!(clusters.contains("enforced"), "{clusters}");
    eprintln!(
        "cluster kubeconfig: enforced {:.1?} after the control plane was asked for",
        started.elapsed()
    );

    // The API server denies a violating Pod for palisade.
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
        kube::Api::namespaced(admin.clone(), &namespace);
    let pod = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
        "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]},
    }))
    .unwrap();
    // (The namespace's default ServiceAccount, which a Pod needs before admission policies
    // judge it, is made by kube-controller-manager a moment after the namespace.)
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let denied = runtime
            .block_on(pods.create(&kube::api::PostParams::default(), &pod))
            .unwrap_err();
        if denied.to_string().contains("Policy 'trusted'") {
            break;
        }
        assert!(Instant::now() < deadline, "{denied}");
        std::thread::sleep(Duration::from_millis(200));
    }

    // /metrics: the cluster's series, at 0 where nothing happened.
    let metrics = scrape(&palisade.url);
    let samples = samples(&metrics);
    for (name, labels) in [
        (
            "palisade_reconcile_status_write_failures_total",
            "{cluster=\"managed\"}".to_owned(),
        ),
        (
            "palisade_cluster_apiserver_restarts_total",
            "{cluster=\"managed\"}".to_owned(),
        ),
        (
            "palisade_exceptions_ended_still_installed",
            "{cluster=\"managed\"}".to_owned(),
        ),
        (
            "palisade_reconcile_repairs_total",
            "{cluster=\"managed\",kind=\"definition\"}".to_owned(),
        ),
    ] {
        let sample = samples
            .iter()
            .find(|s| s.name == name && s.labels == labels)
            .unwrap_or_else(|| panic!("no {name}{labels}:\n{metrics}"));
        assert_eq!(sample.value, 0.0, "{name}{labels}");
    }
    assert!(samples
        .iter()
        .any(|s| s.name == "palisade_reconcile_passes_total"
            && s.labels == "{cluster=\"managed\",outcome=\"ok\"}"
            && s.value >= 1.0));

    // The kubeconfig is the account's: it may not read Secrets.
    let config = kube::config::Kubeconfig::from_yaml(&kubeconfig).unwrap();
    let as_account = runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(config, &Default::default())
            .await
            .unwrap();
        kube::Client::try_from(config).unwrap()
    });
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> =
        kube::Api::namespaced(as_account, &account);
    let refused = runtime.block_on(secrets.get("palisade-token")).unwrap_err();
    assert!(refused.to_string().contains("forbidden"), "{refused}");
}
