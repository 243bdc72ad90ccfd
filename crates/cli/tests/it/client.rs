//! The README tour, end to end: `palisade serve` as a real process on a free port, driven by
//! the `palisade` client commands; exact output lines and exit codes.

use crate::common::{
    assert_exit, assert_stderr_contains, free_port, palisade_with_stdin, serve, text, write, BIN,
};

use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn palisade(server_url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.args(args).env("PALISADE_URL", server_url);
    match token {
        Some(token) => command.env("PALISADE_TOKEN", token),
        None => command.env_remove("PALISADE_TOKEN"),
    };
    command.output().unwrap()
}

/// The value of a `Label:` line of `describe`'s output.
fn field<'a>(described: &'a str, label: &str) -> Option<&'a str> {
    described
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{label}:")))
        .map(str::trim)
}

#[test]
fn the_readme_tour_gives_the_exact_422() {
    let server = serve(&[]);
    let t = Some(server.token.as_str());
    let out = palisade(&server.url, t, &["boundary", "create", "shop"]);
    assert_eq!(
        text(&out.stdout),
        "boundary shop created\n",
        "{}",
        text(&out.stderr)
    );

    let policy = write(
        &server.dir,
        "size-limits.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size-limits, boundary: shop}\nspec:\n  rules:\n    - allowedComputePlans: {plans: [small, medium, tiny]}\n",
    );
    let out = palisade(&server.url, t, &["apply", "-f", policy.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "boundarypolicy shop/size-limits created\n"
    );
    assert_eq!(
        text(&out.stderr),
        "warning: boundarypolicy shop/size-limits: plan entry 'tiny' names no plan of any type it applies to\n"
    );
    let out = palisade(&server.url, t, &["apply", "-f", policy.to_str().unwrap()]);
    assert_eq!(
        text(&out.stdout),
        "boundarypolicy shop/size-limits unchanged\n"
    );

    let out = palisade(
        &server.url,
        t,
        &[
            "resource",
            "create",
            "shop",
            "--type",
            "app",
            "--name",
            "web",
            "--plan",
            "large",
            "--image",
            "ghcr.io/acme/web:1.4",
        ],
    );
    assert_exit(&out, 1, "error: Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium. [compute_plan_not_allowed]\n");
    let out = palisade(
        &server.url,
        t,
        &[
            "resource",
            "create",
            "shop",
            "--type",
            "app",
            "--name",
            "web",
            "--plan",
            "medium",
            "--image",
            "ghcr.io/acme/web:1.4",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "resource shop/app/web created (plan medium)\n"
    );

    let out = palisade(
        &server.url,
        t,
        &["resource", "update", "shop/app/web", "--plan", "xlarge"],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).starts_with("error: Compute plan 'xlarge' is not allowed"));

    let out = palisade(&server.url, t, &["get", "resources", "shop", "-o", "json"]);
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["items"][0]["plan"], "medium");

    let out = palisade(&server.url, t, &["get", "plans", "shop", "--type", "app"]);
    let table = text(&out.stdout);
    assert!(table.starts_with("PLAN"), "{table}");
    assert!(
        table.contains("Disallowed by boundary policy 'size-limits'"),
        "{table}"
    );
}

#[test]
fn a_server_that_is_down_or_a_bad_token_gives_one_line() {
    let port = free_port();
    let out = palisade(
        &format!("http://127.0.0.1:{port}"),
        Some("x"),
        &["get", "boundaries"],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    // The cause in words, not the HTTP library's wrapper text.
    assert_eq!(
        stderr,
        format!("error: cannot reach palisade at http://127.0.0.1:{port}: connection refused\n")
    );
    let out = palisade(
        "http://no-such-host.invalid:8080",
        Some("x"),
        &["get", "boundaries"],
    );
    assert_eq!(
        text(&out.stderr),
        "error: cannot reach palisade at http://no-such-host.invalid:8080: name not resolved\n"
    );
    let out = palisade("palisade.example", Some("x"), &["get", "boundaries"]);
    assert_eq!(
        text(&out.stderr),
        "error: cannot reach palisade at palisade.example: the URL is not valid (relative URL without a base)\n"
    );

    let server = serve(&[]);
    let out = palisade(&server.url, Some("pal_wrong"), &["get", "boundaries"]);
    assert_exit(&out, 1, "error: the token is not valid [unauthorized]\n");
    let out = palisade(&server.url, None, &["get", "boundaries"]);
    assert_eq!(
        text(&out.stderr),
        "error: missing Authorization: Bearer <token> header [unauthorized] (set PALISADE_TOKEN)\n"
    );
}

#[test]
fn demo_data_has_every_type_and_a_grandfathered_resource() {
    let server = serve(&["--demo"]);
    let t = Some(server.token.as_str());
    let out = palisade(&server.url, t, &["get", "policies", "shop", "-o", "json"]);
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["items"].as_array().unwrap().len(), 3);
    let out = palisade(&server.url, t, &["get", "resources", "shop", "-o", "json"]);
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut types: Vec<String> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["type"].as_str().unwrap().to_owned())
        .collect();
    types.dedup();
    assert_eq!(
        types,
        [
            "app",
            "container_instance",
            "function",
            "postgresql",
            "qdrant",
            "sqlserver",
            "static_web_app",
            "valkey"
        ]
    );
    let out = palisade(
        &server.url,
        t,
        &["get", "resources", "shop", "--grandfathered"],
    );
    let table = text(&out.stdout);
    assert_eq!(table.lines().count(), 2, "{table}");
    assert!(
        table.contains("legacy-reports") && table.contains("size-limits"),
        "{table}"
    );
}

/// The README's local-cluster section: `palisade serve` (with its reconciler) and a real
/// kube-apiserver; the CLI registers the cluster, makes a namespace, applies a policy, shows
/// it enforced, and the API server denies a violating Pod with the policy's message.
#[test]
fn the_readme_local_cluster_flow_ends_in_a_denied_create() {
    let plane = palisade_testkit::control_plane::ControlPlane::start("1.37");
    let server = serve(&[]);
    let t = Some(server.token.as_str());
    let run = |args: &[&str]| {
        let out = palisade(&server.url, t, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    run(&["boundary", "create", "shop"]);
    let kubeconfig = plane.kubeconfig_path();
    let kubeconfig = kubeconfig.to_str().unwrap();
    assert_eq!(
        run(&["cluster", "add", "local", "--kubeconfig", kubeconfig]),
        "cluster local saved\n"
    );
    assert_eq!(
        run(&["cluster", "attach", "shop", "local"]),
        "cluster local attached to boundary shop\n"
    );
    let namespace = palisade_testkit::control_plane::unique_name("web");
    let target = format!("shop/{namespace}");
    assert_eq!(
        run(&["namespace", "create", &target, "--cluster", "local"]),
        format!("namespace {target} created in cluster local\n")
    );
    // Another boundary cannot adopt it: one line, exit 1.
    run(&["boundary", "create", "other"]);
    run(&["cluster", "attach", "other", "local"]);
    let out = palisade(
        &server.url,
        t,
        &[
            "namespace",
            "adopt",
            &format!("other/{namespace}"),
            "--cluster",
            "local",
        ],
    );
    assert_exit(&out, 1, format!(
            "error: namespace '{namespace}' in cluster 'local' belongs to boundary 'shop' [conflict]\n"
        ));
    let policy = write(
        &server.dir,
        "trusted.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: trusted, boundary: shop}\nspec:\n  rules:\n    - allowedRegistries: {registries: [ghcr.io/acme]}\n    - disallowLatestTag: {}\n",
    );
    // A Deployment that already runs and that the policy would break.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let client = plane.client().await;
        let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
            kube::Api::namespaced(client, &namespace);
        let deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]}}},
        }))
        .unwrap();
        deployments
            .create(&kube::api::PostParams::default(), &deployment)
            .await
            .unwrap();
    });
    let message = "Policy 'trusted' (AllowedRegistries) denied image nginx:latest: it is not under ghcr.io/acme.";
    // The dry run shows it, its replicas and the exact message, and exits 1; nothing is saved.
    let out = palisade(
        &server.url,
        t,
        &["apply", "-f", policy.to_str().unwrap(), "--dry-run"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!(
            "boundarypolicy shop/trusted created (dry run)\n\
             preview shop/trusted (enforce): 1 denied (1 workloads, 2 replicas at risk), 0 warned, 0 loosened, 0 resources grandfathered; clusters read: local\n\
             denied local {namespace}/Deployment/web (2 replicas): {message}\n"
        )
    );
    let out = palisade(
        &server.url,
        t,
        &["preview", "-f", policy.to_str().unwrap(), "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let previews: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        previews["items"][0]["clusters"][0]["denied"][0]["message"],
        message
    );
    assert_eq!(previews["items"][0]["saved"], false);
    assert_eq!(
        run(&["apply", "-f", policy.to_str().unwrap()]),
        "boundarypolicy shop/trusted created\n"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let table = run(&["get", "policies", "shop"]);
        if table.contains("local: enforced") {
            break;
        }
        assert!(Instant::now() < deadline, "never enforced:\n{table}");
        std::thread::sleep(Duration::from_millis(100));
    }
    // The audit finds the same Deployment.
    let finding =
        format!("local {namespace}/Deployment/web (Deployment/web, 2 replicas): {message}\n");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let report = run(&["get", "report", "shop/trusted"]);
        if report.contains("current") {
            assert!(report.ends_with(&finding), "{report}");
            assert!(report.contains("\nlocal     1         1"), "{report}");
            break;
        }
        assert!(Instant::now() < deadline, "never audited:\n{report}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let clusters = run(&["get", "clusters"]);
    assert!(
        clusters.contains("local   v1.37.2      enforced          -"),
        "{clusters}"
    );

    // The API server itself refuses the Pod, with the policy's message.
    let answer = runtime.block_on(async {
        let client = plane.client().await;
        let pods: kube::Api<k8s_openapi::api::core::v1::Pod> =
            kube::Api::namespaced(client, &namespace);
        let pod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
            "spec": {"containers": [{"name": "web", "image": "nginx:latest"}]},
        }))
        .unwrap();
        pods.create(&kube::api::PostParams::default(), &pod).await
    });
    match answer {
        Err(kube::Error::Api(status)) => assert_eq!(
            status.message,
            "pods \"web\" is forbidden: ValidatingAdmissionPolicy 'enforce-1.shop.boundary.palisade.dev' \
             with binding 'enforce-1.shop.boundary.palisade.dev' denied request: Policy 'trusted' \
             (AllowedRegistries) denied image nginx:latest: it is not under ghcr.io/acme."
        ),
        other => panic!("expected a denial, got {other:?}"),
    }
    assert_eq!(
        run(&["delete", "namespace", &target, "--cluster", "local"]),
        format!("namespace {target} released in cluster local (its boundary label removed; the namespace and its objects stay)\n")
    );
    assert_eq!(
        run(&["delete", "cluster", "local"]),
        "cluster local deleted\n"
    );
}

const TRUSTED: &str = "apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata:
  name: trusted
  boundary: shop
  labels: {team: platform}
  annotations: {owner: platform@acme.example}
spec:
  mode: audit
  rules:
    - allowedRegistries: {registries: [ghcr.io/acme, docker.io/library/]}
    - requiredLabels: {labels: [{key: team, value: web}, {key: owner, value: \"\"}]}
    - disallowLatestTag: {}
    - allowedComputePlans: {plans: [small, valkey/medium]}
";

/// What the server saved, as the document: normalised (the trailing `/` and `value: ""`
/// are gone), labels and annotations kept.
const TRUSTED_SAVED: &str = "apiVersion: palisade.dev/v1
kind: BoundaryPolicy
metadata:
  name: trusted
  boundary: shop
  labels:
    team: platform
  annotations:
    owner: platform@acme.example
spec:
  mode: audit
  rules:
  - allowedRegistries:
      registries:
      - ghcr.io/acme
      - docker.io/library
  - requiredLabels:
      labels:
      - key: team
        value: web
      - key: owner
  - disallowLatestTag: {}
  - allowedComputePlans:
      plans:
      - small
      - valkey/medium
";

/// `get policy B/N -o yaml` prints the BoundaryPolicy document, which `apply -f` (a file or
/// standard input) takes back unchanged; `-o json` too; the table is one row.
/// `palisade get clusters` ends each line with the admission layout in use in the cluster and
/// why (SPEC 3.4), `-` until the reconciler has said; `-o json` has it as `layout`.
#[test]
fn get_clusters_shows_the_layout_in_use_and_why_and_the_last_repair() {
    let server = serve(&["--no-reconciler"]);
    let t = Some(server.token.as_str());
    let run = |args: &[&str]| {
        let out = palisade(&server.url, t, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let kubeconfig = write(
        &server.dir,
        "kubeconfig",
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443'}}]\nusers: [{name: u, user: {token: abc}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\n",
    );
    for name in ["prod", "staging"] {
        run(&[
            "cluster",
            "add",
            name,
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
        ]);
    }
    // What the reconciler records once it has chosen the layout of `prod`.
    let database = format!(
        "sqlite://{}",
        server.dir.path().join("palisade.db").display()
    );
    tokio::runtime::Runtime::new().unwrap().block_on(async {
        let store = palisade_store::connect(&database).await.unwrap();
        store
            .set_cluster_layout("prod", "shared", "212 boundaries")
            .await
            .unwrap();
        // And a repair of something someone else deleted there.
        store
            .record_repair(
                "prod",
                "binding trusted.shop.palisade.dev was deleted; restored",
            )
            .await
            .unwrap();
    });

    let json: serde_json::Value =
        serde_json::from_str(&run(&["get", "clusters", "-o", "json"])).unwrap();
    assert_eq!(
        json["items"][0]["layout"],
        serde_json::json!({"name": "shared", "reason": "212 boundaries"})
    );
    assert!(json["items"][1].get("layout").is_none(), "{json}");
    assert_eq!(json["items"][0]["repairs"], 1, "{json}");
    let at = json["items"][0]["last_repair"]["at"].as_str().unwrap();
    assert_eq!(
        json["items"][0]["last_repair"]["message"],
        "binding trusted.shop.palisade.dev was deleted; restored"
    );
    assert_eq!(
        run(&["get", "clusters"]),
        format!(
            "NAME      KUBERNETES   ADMISSION RULES                                                        LAST ERROR   LAYOUT                   LAST REPAIR\n\
             prod      -            not enforced: not checked yet: palisade has not reached this cluster   -            shared: 212 boundaries   {at} binding trusted.shop.palisade.dev was deleted; restored\n\
             staging   -            not enforced: not checked yet: palisade has not reached this cluster   -            -                        -\n"
        )
    );
    // `describe cluster`: the same in words; no reconciler runs, so no replica holds it.
    assert_eq!(
        run(&["describe", "cluster", "prod"])
            .lines()
            .filter(|l| !l.starts_with("Created:") && !l.starts_with("Updated:"))
            .collect::<Vec<_>>(),
        [
            "Name:                 prod",
            "Kubernetes version:   unknown (palisade has not reached it yet)",
            "Admission rules:      not enforced: not checked yet: palisade has not reached this cluster",
            "Layout:               shared (212 boundaries)",
            "Reconciled by:        no replica now",
            "Reserved namespaces:  default, kube-*",
            "Last error:           none",
            "API server restarts:  0",
            &format!("Repairs:              1 (last at {at}: binding trusted.shop.palisade.dev was deleted; restored)"),
        ]
    );
    let out = palisade(&server.url, t, &["describe", "cluster", "nope"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_stderr_contains(&out, "cluster 'nope' not found");
}

#[test]
fn get_policy_prints_a_document_that_applies_unchanged() {
    let server = serve(&[]);
    let token = server.token.as_str();
    let t = Some(token);
    palisade(&server.url, t, &["boundary", "create", "shop"]);
    let out = palisade_with_stdin(&server, &["apply", "-f", "-"], TRUSTED);
    assert_eq!(
        text(&out.stdout),
        "boundarypolicy shop/trusted created\n",
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        text(&out.stderr),
        "warning: boundarypolicy shop/trusted: registry prefix 'docker.io/library/' saved as 'docker.io/library'\n\
         warning: boundarypolicy shop/trusted: label 'owner' value \"\" saved as any value\n"
    );

    let out = palisade(
        &server.url,
        t,
        &["get", "policy", "shop/trusted", "-o", "yaml"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let yaml = text(&out.stdout);
    assert_eq!(yaml, TRUSTED_SAVED);
    let back = write(&server.dir, "back.yaml", &yaml);
    let out = palisade(&server.url, t, &["apply", "-f", back.to_str().unwrap()]);
    assert_eq!(
        (text(&out.stdout), text(&out.stderr)),
        (
            "boundarypolicy shop/trusted unchanged\n".to_owned(),
            String::new()
        )
    );
    let out = palisade_with_stdin(&server, &["apply", "-f", "-"], &yaml);
    assert_eq!(text(&out.stdout), "boundarypolicy shop/trusted unchanged\n");

    let out = palisade(
        &server.url,
        t,
        &["get", "policy", "shop/trusted", "-o", "json"],
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::to_value(serde_yaml_ng::from_str::<serde_json::Value>(TRUSTED_SAVED).unwrap())
            .unwrap()
    );
    let out = palisade_with_stdin(&server, &["apply", "-f", "-"], &text(&out.stdout));
    assert_eq!(text(&out.stdout), "boundarypolicy shop/trusted unchanged\n");

    let out = palisade(&server.url, t, &["get", "policy", "shop/trusted"]);
    let table = text(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(lines.len(), 2, "{table}");
    assert!(
        lines[0].starts_with("NAME      VERSION   MODE    SCOPE          RULES"),
        "{table}"
    );
    assert!(
        lines[1].starts_with(
            "trusted   1         audit   all clusters   allowedRegistries,requiredLabels,disallowLatestTag,allowedComputePlans   -   "
        ),
        "{table}"
    );

    let out = palisade(
        &server.url,
        t,
        &["get", "policy", "shop/nope", "-o", "yaml"],
    );
    assert_exit(
        &out,
        1,
        "error: policy 'nope' not found in boundary 'shop' [not_found]\n",
    );
    let out = palisade(&server.url, t, &["get", "policy", "shop"]);
    assert_eq!(
        text(&out.stderr),
        "error: 'shop' must be written BOUNDARY/NAME\n"
    );
}

/// `-f` is repeatable, and standard input can be named once.
#[test]
fn apply_takes_several_files_and_standard_input_once() {
    let server = serve(&[]);
    let token = server.token.as_str();
    palisade(&server.url, Some(token), &["boundary", "create", "shop"]);
    let other = write(
        &server.dir,
        "no-latest.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: no-latest, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n",
    );
    let out = palisade_with_stdin(
        &server,
        &[
            "apply",
            "-f",
            other.to_str().unwrap(),
            "-f",
            "-",
            "--dry-run",
        ],
        TRUSTED,
    );
    assert_eq!(
        text(&out.stdout),
        "boundarypolicy shop/no-latest created (dry run)\n\
         boundarypolicy shop/trusted created (dry run)\n\
         preview shop/no-latest (enforce): 0 denied (0 workloads, 0 replicas at risk), 0 warned, 0 loosened, 0 resources grandfathered; clusters read: none\n\
         preview shop/trusted (audit): 0 denied (0 workloads, 0 replicas at risk), 0 warned, 0 loosened, 0 resources grandfathered; clusters read: none\n",
        "{}",
        text(&out.stderr)
    );
    let out = palisade_with_stdin(&server, &["apply", "-f", "-", "-f", "-"], TRUSTED);
    assert_exit(&out, 1, "error: standard input (-) can be read only once\n");
}

/// kubectl's `Client Version:`/`Server Version:` lines; the server is asked only when one
/// is named, and one that cannot be reached is an error after the client's line.
#[test]
fn version_prints_the_client_and_the_server() {
    let client = format!("Client Version: {}\n", env!("CARGO_PKG_VERSION"));
    let server = serve(&[]);
    let out = palisade(&server.url, None, &["version"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    // Today's server does not report a version; one that does is shown as it is.
    let known = format!("{client}Server Version: {}\n", env!("CARGO_PKG_VERSION"));
    let unknown =
        format!("{client}Server Version: unknown (the server does not report its version)\n");
    assert!(stdout == known || stdout == unknown, "{stdout}");

    let out = palisade(&server.url, None, &["version", "--client"]);
    assert_eq!(text(&out.stdout), client);
    let out = palisade(&server.url, None, &["version", "--client", "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"clientVersion": env!("CARGO_PKG_VERSION")})
    );

    let port = free_port();
    let down = format!("http://127.0.0.1:{port}");
    let out = palisade(&down, None, &["version"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), client);
    assert_eq!(
        text(&out.stderr),
        format!("error: cannot reach palisade at {down}: connection refused\n")
    );
    let out = Command::new(BIN)
        .arg("version")
        .env_remove("PALISADE_URL")
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), client.clone())
    );
}

/// The README's workloads section: a control plane where workloads run (scheduler and kwok),
/// `palisade serve` with its reconciler; an app on a `latest` image in a boundary that forbids
/// it is rejected, with the policy's message on `palisade get resources`; fixed, it runs. A
/// function from an uploaded directory is warned about before its build is denied.
#[test]
fn the_readme_workloads_flow_rejects_latest_then_runs() {
    let options = palisade_testkit::control_plane::Options {
        workloads: true,
        ..Default::default()
    };
    let plane = palisade_testkit::control_plane::ControlPlane::start_with("1.37", &options);
    let server = serve(&["--public-url", "http://palisade.invalid:8080"]);
    let t = Some(server.token.as_str());
    let run = |args: &[&str]| {
        let out = palisade(&server.url, t, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    run(&["boundary", "create", "shop"]);
    let kubeconfig = plane.kubeconfig_path();
    run(&[
        "cluster",
        "add",
        "local",
        "--kubeconfig",
        kubeconfig.to_str().unwrap(),
    ]);
    run(&["cluster", "attach", "shop", "local"]);
    run(&["namespace", "create", "shop/web", "--cluster", "local"]);
    let policy = write(
        &server.dir,
        "trusted.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: trusted, boundary: shop}\nspec:\n  rules:\n    - allowedRegistries: {registries: [ghcr.io/acme, ghcr.io/palisade-dev]}\n    - disallowLatestTag: {}\n",
    );
    run(&["apply", "-f", policy.to_str().unwrap()]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !run(&["get", "policies", "shop"]).contains("local: enforced") {
        assert!(Instant::now() < deadline, "the policy was never enforced");
        std::thread::sleep(Duration::from_millis(100));
    }
    let status_of = |name: &str, done: &dyn Fn(&str) -> bool| -> (String, String) {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let table = run(&["get", "resources", "shop"]);
            let row = table
                .lines()
                .find(|l| l.split_whitespace().nth(1) == Some(name))
                .unwrap_or("")
                .to_owned();
            let status = row.split_whitespace().skip(4).collect::<Vec<_>>().join(" ");
            if done(&status) {
                return (table, status);
            }
            assert!(
                Instant::now() < deadline,
                "{name} never got there:\n{table}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    };

    assert_eq!(
        run(&[
            "resource",
            "create",
            "shop",
            "--type",
            "app",
            "--name",
            "web",
            "--plan",
            "small",
            "--image",
            "ghcr.io/acme/web:latest",
        ]),
        "resource shop/app/web created (plan small)\n\
         placed in local/web; follow it with: palisade get resources shop\n"
    );
    let (table, status) = status_of("web", &|s| s.starts_with("rejected"));
    assert_eq!(
        status,
        "rejected: Policy 'trusted' (DisallowLatestTag) denied image ghcr.io/acme/web:latest: it is tagged latest or carries no tag."
    );
    assert!(
        table.lines().next().unwrap().trim_end().ends_with("STATUS"),
        "{table}"
    );
    // Denied: nothing of it in the cluster, and describe says so.
    let described = run(&["describe", "resource", "shop/app/web"]);
    for (label, value) in [
        ("Name", "web"),
        ("Type", "app"),
        ("Boundary", "shop"),
        ("Plan", "small"),
        ("Image", "ghcr.io/acme/web:latest"),
        ("Placement", "cluster local, namespace web"),
        ("Status", "rejected: Policy 'trusted' (DisallowLatestTag) denied image ghcr.io/acme/web:latest: it is tagged latest or carries no tag."),
        ("Deployment", "none in the cluster"),
    ] {
        assert_eq!(field(&described, label), Some(value), "{label}:\n{described}");
    }
    assert!(described.contains("\nPods:\n  none\n"), "{described}");
    assert_eq!(
        run(&[
            "resource",
            "update",
            "shop/app/web",
            "--image",
            "ghcr.io/acme/web:1.4",
            "--replicas",
            "2"
        ]),
        "resource shop/app/web updated (plan small)\n\
         placed in local/web; follow it with: palisade get resources shop\n"
    );
    let (_, status) = status_of("web", &|s| s == "running");
    assert_eq!(status, "running");
    // Running: its replicas, both pods and the Deployment's events, read from the cluster.
    let described = run(&["describe", "resource", "shop/app/web"]);
    assert_eq!(field(&described, "Status"), Some("running"), "{described}");
    assert_eq!(
        field(&described, "Replicas wanted"),
        Some("2"),
        "{described}"
    );
    assert_eq!(
        field(&described, "Deployment"),
        Some("app-web: 2/2 ready (2 available, 2 up to date)"),
        "{described}"
    );
    for header in ["\nPods:\n  NAME ", "\nEvents (latest first):\n  TIME "] {
        assert!(
            described.contains(header),
            "{header:?} not in:\n{described}"
        );
    }
    let running = described
        .lines()
        .filter(|l| l.starts_with("  app-web-") && l.contains(" Running "))
        .count();
    assert_eq!(running, 2, "{described}");
    assert!(
        described.lines().any(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            words.get(1..4) == Some(&["Normal", "ScalingReplicaSet", "Deployment/app-web"][..])
        }),
        "{described}"
    );
    // -o json: the API's body, with what the cluster holds under "workload".
    let json: serde_json::Value = serde_json::from_str(&run(&[
        "describe",
        "resource",
        "shop/app/web",
        "-o",
        "json",
    ]))
    .unwrap();
    assert_eq!(json["name"], "web");
    assert_eq!(json["workload"]["deployment"]["ready"], 2);
    assert_eq!(json["workload"]["pods"].as_array().unwrap().len(), 2);

    // A function from an uploaded directory: the warning comes with the create.
    let code = tempfile::tempdir().unwrap();
    std::fs::write(
        code.path().join("handler.py"),
        "def handler(e):\n    return 1\n",
    )
    .unwrap();
    std::fs::create_dir(code.path().join("lib")).unwrap();
    std::fs::write(code.path().join("lib/util.py"), "X = 1\n").unwrap();
    let out = palisade(
        &server.url,
        t,
        &[
            "resource",
            "create",
            "shop",
            "--type",
            "function",
            "--name",
            "hook",
            "--plan",
            "small",
            "--upload",
            code.path().to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The builder's registry is allowed here; the registry builds are pushed to is not.
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines[0],
        "warning: Policy 'trusted' (DisallowLatestTag) denies builds of uploaded code: the function builder is referenced by the tag latest",
        "{stderr}"
    );
    assert!(
        lines[1].starts_with("warning: the Deployment palisade runs for function/hook will be denied: Policy 'trusted' (AllowedRegistries) denied image registry.palisade.internal/builds/shop/function-hook:")
            && lines[1].ends_with(": it is not under ghcr.io/acme, ghcr.io/palisade-dev."),
        "{stderr}"
    );
    assert_eq!(lines.len(), 2, "{stderr}");
    let (_, status) = status_of("hook", &|s| s.starts_with("build"));
    assert_eq!(
        status,
        "build rejected: Policy 'trusted' (DisallowLatestTag) denied image ghcr.io/palisade-dev/function-builder:latest: it is tagged latest or carries no tag."
    );
    // Deleting them removes their Deployments; the cluster can then go.
    run(&["delete", "resource", "shop/app/web"]);
    run(&["delete", "resource", "shop/function/hook"]);
    let out = palisade(&server.url, t, &["get", "resources", "shop"]);
    assert!(!text(&out.stdout).contains("web"), "{}", text(&out.stdout));
}

/// `apply -f DIR` (also with --dry-run) and `preview -f DIR` name the file of a broken
/// document and the line in that file, as `check` does; a document the server refuses is
/// named by its file and index. Nothing is saved.
#[test]
fn apply_and_preview_name_the_file_of_a_broken_document() {
    let server = serve(&[]);
    let t = Some(server.token.as_str());
    palisade(&server.url, t, &["boundary", "create", "shop"]);
    let dir = tempfile::tempdir().unwrap();
    let policies = dir.path().join("policies");
    std::fs::create_dir(&policies).unwrap();
    std::fs::write(
        policies.join("a.yaml"),
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size-limits, boundary: shop}\nspec:\n  rules:\n    - allowedComputePlans: {plans: [small]}\n",
    )
    .unwrap();
    let broken = policies.join("b.yaml");
    std::fs::write(
        &broken,
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: trusted, boundary: shop}\nspec:\n  rules:\n    - allowedRegistries: {registries: [ghcr.io/acme]\n",
    )
    .unwrap();
    let manifest = write(
        &server.dir,
        "pod.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: web, image: ghcr.io/acme/web:1}]}\n",
    );
    let dir_arg = policies.to_str().unwrap();
    let line = format!(
        "error: {}: did not find expected ',' or '}}' at line 7 column 1, while parsing a flow mapping\n",
        broken.display()
    )
    .replacen(".yaml:", ".yaml:7:1:", 1);
    let out = palisade(
        &server.url,
        t,
        &["check", "-p", dir_arg, manifest.to_str().unwrap()],
    );
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (Some(2), line.clone())
    );
    for (args, code) in [
        (vec!["apply", "-f", dir_arg], 1),
        (vec!["apply", "-f", dir_arg, "--dry-run"], 2),
        (vec!["preview", "-f", dir_arg], 2),
    ] {
        let out = palisade(&server.url, t, &args);
        assert_eq!(
            (out.status.code(), text(&out.stderr)),
            (Some(code), line.clone()),
            "{args:?}"
        );
    }

    // Well-formed, but refused by the server: the file and the document's index in it.
    std::fs::write(
        &broken,
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: no-latest, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n---\napiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: trusted, boundary: shop}\nspec:\n  rules:\n    - allowedRegistries: {registries: [Bad Registry]}\n",
    )
    .unwrap();
    let why = "registry prefix 'Bad Registry' must start with a registry host: a name containing '.' or ':', or 'localhost' (e.g. docker.io/library, not library) [invalid_request]";
    let at = format!(
        "{}:1: /spec/rules/0/allowedRegistries/registries/0",
        broken.display()
    );
    for (args, code) in [
        (vec!["apply", "-f", dir_arg], 1),
        (vec!["preview", "-f", dir_arg], 2),
    ] {
        let out = palisade(&server.url, t, &args);
        assert_eq!(
            (out.status.code(), text(&out.stderr)),
            (Some(code), format!("error: {at}: {why}\n")),
            "{args:?}"
        );
    }
    let out = palisade(&server.url, t, &["get", "policies", "shop", "-o", "json"]);
    assert_eq!(text(&out.stdout), "{\n  \"items\": []\n}\n");
}

/// Every client command honours `-o json`: the API's body, or for a 204 (a delete, a
/// revoke) an object naming what was deleted; `-o yaml` is the same as YAML.
#[test]
fn every_client_command_honours_output_json() {
    let plane = palisade_testkit::control_plane::ControlPlane::start("1.37");
    let server = serve(&[]);
    let t = Some(server.token.as_str());
    let output = |args: &[&str], format: &str| -> String {
        let mut args = args.to_vec();
        args.extend(["-o", format]);
        let out = palisade(&server.url, t, &args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
    };
    let json = |args: &[&str]| -> serde_json::Value {
        let stdout = output(args, "json");
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{args:?}: {e}: {stdout}"))
    };
    // An existing namespace to adopt.
    let legacy = palisade_testkit::control_plane::unique_name("legacy");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> =
            kube::Api::all(plane.client().await);
        let namespace =
            serde_json::from_value(serde_json::json!({"metadata": {"name": legacy}})).unwrap();
        namespaces
            .create(&kube::api::PostParams::default(), &namespace)
            .await
            .unwrap();
    });
    let web = palisade_testkit::control_plane::unique_name("web");
    let kubeconfig = plane.kubeconfig_path();
    let policy = write(
        &server.dir,
        "size-limits.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size-limits, boundary: shop}\nspec:\n  rules:\n    - allowedComputePlans: {plans: [small, medium]}\n",
    );
    let (shop_web, shop_legacy) = (format!("shop/{web}"), format!("shop/{legacy}"));
    // Commands answered with a body: the fields the body must have.
    let answered: Vec<(Vec<&str>, serde_json::Value)> = vec![
        (
            vec!["boundary", "create", "shop"],
            serde_json::json!({"name": "shop"}),
        ),
        (
            vec![
                "cluster",
                "add",
                "local",
                "--kubeconfig",
                kubeconfig.to_str().unwrap(),
            ],
            serde_json::json!({"name": "local"}),
        ),
        (
            vec!["cluster", "attach", "shop", "local"],
            serde_json::json!({"name": "local"}),
        ),
        (
            vec!["namespace", "create", &shop_web, "--cluster", "local"],
            serde_json::json!({"boundary": "shop", "cluster": "local", "name": web, "action": "created"}),
        ),
        (
            vec!["namespace", "adopt", &shop_legacy, "--cluster", "local"],
            serde_json::json!({"boundary": "shop", "cluster": "local", "name": legacy, "action": "adopted"}),
        ),
        (
            vec!["apply", "-f", policy.to_str().unwrap()],
            serde_json::json!({"results": [{"boundary": "shop", "name": "size-limits", "action": "created", "warnings": []}]}),
        ),
        (
            vec![
                "resource",
                "create",
                "shop",
                "--type",
                "postgresql",
                "--name",
                "db",
                "--plan",
                "small",
            ],
            serde_json::json!({"boundary": "shop", "type": "postgresql", "name": "db", "plan": "small"}),
        ),
        (
            vec![
                "resource",
                "update",
                "shop/postgresql/db",
                "--plan",
                "medium",
            ],
            serde_json::json!({"boundary": "shop", "name": "db", "plan": "medium"}),
        ),
        (
            vec![
                "token",
                "create",
                "--role",
                "developer",
                "--boundary",
                "shop",
            ],
            serde_json::json!({"role": "developer", "boundary": "shop"}),
        ),
    ];
    let mut tokens = Vec::new();
    for (args, expected) in &answered {
        let body = json(args);
        for (key, value) in expected.as_object().unwrap() {
            assert_eq!(&body[key], value, "{args:?}: {key} in {body}");
        }
        if args[0] == "token" {
            tokens.push(body["id"].as_str().unwrap().to_owned());
            tokens.push(json(args)["id"].as_str().unwrap().to_owned());
        }
    }
    // -o yaml: the same as YAML.
    assert_eq!(
        output(&["delete", "token", &tokens[1]], "yaml"),
        format!("kind: token\nid: {}\naction: deleted\n", tokens[1])
    );
    // Commands answered with 204: what was deleted, the same shape for every kind.
    let deleted: Vec<(Vec<&str>, serde_json::Value)> = vec![
        (
            vec!["delete", "resource", "shop/postgresql/db"],
            serde_json::json!({"kind": "resource", "boundary": "shop", "type": "postgresql", "name": "db", "action": "deleted"}),
        ),
        (
            vec!["delete", "policy", "shop/size-limits"],
            serde_json::json!({"kind": "policy", "boundary": "shop", "name": "size-limits", "action": "deleted"}),
        ),
        (
            vec!["token", "revoke", &tokens[0]],
            serde_json::json!({"kind": "token", "id": tokens[0], "action": "deleted"}),
        ),
        (
            vec!["delete", "namespace", &shop_web, "--cluster", "local"],
            serde_json::json!({"kind": "namespace", "boundary": "shop", "cluster": "local", "name": web, "action": "deleted"}),
        ),
        (
            vec!["delete", "namespace", &shop_legacy, "--cluster", "local"],
            serde_json::json!({"kind": "namespace", "boundary": "shop", "cluster": "local", "name": legacy, "action": "deleted"}),
        ),
        (
            vec!["delete", "boundary", "shop"],
            serde_json::json!({"kind": "boundary", "name": "shop", "action": "deleted"}),
        ),
        (
            vec!["delete", "cluster", "local"],
            serde_json::json!({"kind": "cluster", "name": "local", "action": "deleted"}),
        ),
    ];
    for (args, expected) in &deleted {
        assert_eq!(&json(args), expected, "{args:?}");
    }
    assert_eq!(
        json(&["get", "tokens"])["items"].as_array().unwrap().len(),
        1
    );
}

/// The API pages a preview's findings (at most 1,000 a page, as the CLI asks); `preview`
/// follows every page and prints them all, and `-o json` is the whole preview, without
/// `continue`.
#[test]
fn preview_prints_every_page_of_findings() {
    // 1,001 creates in a few seconds: past the default write rate.
    let server = serve(&["--token-write-rate", "0", "--boundary-write-rate", "0"]);
    let client = reqwest::blocking::Client::new();
    let post = |path: &str, body: serde_json::Value| {
        let answer = client
            .post(format!("{}{path}", server.url))
            .bearer_auth(&server.token)
            .json(&body)
            .send()
            .unwrap();
        assert!(
            answer.status().is_success(),
            "{path}: {}",
            answer.text().unwrap()
        );
    };
    post("/v1/boundaries", serde_json::json!({"name": "shop"}));
    // 1,001 resources on a plan the policy disallows, created by 8 clients at once.
    std::thread::scope(|scope| {
        for worker in 0..8 {
            let post = &post;
            scope.spawn(move || {
                for i in (worker..1001).step_by(8) {
                    post(
                        "/v1/boundaries/shop/resources",
                        serde_json::json!({"type": "postgresql", "name": format!("db-{i:04}"), "plan": "large"}),
                    );
                }
            });
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let policy = write(
        &dir,
        "policy.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: size-limits, boundary: shop}\nspec:\n  rules:\n    - allowedComputePlans: {plans: [small]}\n",
    );
    let out = palisade(
        &server.url,
        Some(&server.token),
        &["preview", "-f", policy.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines[0],
        "preview shop/size-limits (enforce): 0 denied (0 workloads, 0 replicas at risk), 0 warned, 0 loosened, 1001 resources grandfathered; clusters read: none"
    );
    let names: Vec<String> = (0..1001)
        .map(|i| format!("grandfathered postgresql/db-{i:04} (large): Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small."))
        .collect();
    assert_eq!(
        lines.len(),
        1 + 1001,
        "{} grandfathered lines",
        lines.len() - 1
    );
    assert!(lines[1..] == names, "the lines are the resources in order");
    let out = palisade(
        &server.url,
        Some(&server.token),
        &["preview", "-f", policy.to_str().unwrap(), "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let previews: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let preview = &previews["items"][0];
    assert_eq!(preview["grandfathered"].as_array().unwrap().len(), 1001);
    assert_eq!(preview["summary"]["resources_grandfathered"], 1001);
    assert!(preview.get("continue").is_none(), "{preview}");
}

/// `palisade serve --max-upload-bytes` bounds what one boundary's uploads store (SPEC 5,
/// v3.1): the upload that would pass it is refused with the limit and the boundary's use, and
/// the resource it was for is not created.
#[test]
fn uploads_past_the_boundarys_limit_are_refused_naming_it() {
    let server = serve(&["--max-upload-bytes", "20000"]);
    let t = Some(server.token.as_str());
    let out = palisade(&server.url, t, &["boundary", "create", "shop"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let code = tempfile::tempdir().unwrap();
    let file = |name: &str, fill: u8| {
        let path = code.path().join(name);
        std::fs::write(&path, vec![fill; 12_000]).unwrap();
        path
    };
    let create = |name: &str, path: &std::path::Path| {
        palisade(
            &server.url,
            t,
            &[
                "resource",
                "create",
                "shop",
                "--type",
                "static_web_app",
                "--name",
                name,
                "--upload",
                path.to_str().unwrap(),
            ],
        )
    };
    let out = create("first", &file("first.html", b'a'));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = create("second", &file("second.html", b'b'));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    assert_eq!(
        text(&out.stderr),
        "error: boundary 'shop' stores 12000 of 20000 bytes of uploads (serve --max-upload-bytes); \
         this upload of 12000 bytes would exceed it [payload_too_large]\n"
    );
    let out = palisade(&server.url, t, &["get", "resources", "shop"]);
    let listed = text(&out.stdout);
    assert!(
        listed.contains("first") && !listed.contains("second"),
        "{listed}"
    );
}

/// `apply -f` takes a BoundaryException beside a policy (all or nothing), `get exceptions`
/// lists it with its time left, `get exception -o yaml` prints a document that applies back
/// unchanged, and the excepted resource is created with the warning.
#[test]
fn exceptions_apply_beside_policies_and_list_with_their_time_left() {
    let server = serve(&[]);
    let token = server.token.as_str();
    palisade(&server.url, Some(token), &["boundary", "create", "shop"]);
    let expires = (chrono::Utc::now() + chrono::Duration::days(30))
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let documents = format!(
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {{name: size, boundary: shop}}\nspec: {{rules: [{{allowedComputePlans: {{plans: [small]}}}}]}}\n---\n\
         apiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {{name: legacy-reports, boundary: shop}}\nspec:\n  policy: size\n  resources: [app/reports]\n  plans: [large]\n  expiresAt: \"{expires}\"\n  reason: moving to small, OPS-1234\n"
    );
    let file = write(&server.dir, "shop.yaml", &documents);
    let out = palisade(
        &server.url,
        Some(token),
        &["apply", "-f", file.to_str().unwrap()],
    );
    assert_eq!(
        text(&out.stdout),
        "boundarypolicy shop/size created\nboundaryexception shop/legacy-reports created\n",
        "{}",
        text(&out.stderr)
    );
    let out = palisade(&server.url, Some(token), &["get", "exceptions", "shop"]);
    let listed = text(&out.stdout);
    let mut lines = listed.lines();
    let header: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        [
            "NAME",
            "POLICY",
            "STATUS",
            "EXPIRES",
            "LEFT",
            "REQUESTED",
            "BY",
            "APPROVED",
            "BY"
        ]
    );
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(
        &row[..5],
        ["legacy-reports", "size", "active", expires.as_str(), "29d"],
        "{listed}"
    );
    let out = palisade(
        &server.url,
        Some(token),
        &["get", "exception", "shop/legacy-reports", "-o", "yaml"],
    );
    let yaml = text(&out.stdout);
    assert!(yaml.contains("kind: BoundaryException"), "{yaml}");
    let out = palisade_with_stdin(&server, &["apply", "-f", "-"], &yaml);
    assert_eq!(
        text(&out.stdout),
        "boundaryexception shop/legacy-reports unchanged\n",
        "{}",
        text(&out.stderr)
    );
    let out = palisade(
        &server.url,
        Some(token),
        &[
            "resource",
            "create",
            "shop",
            "--type",
            "app",
            "--name",
            "reports",
            "--plan",
            "large",
            "--image",
            "ghcr.io/acme/reports:1.0",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_stderr_contains(
        &out,
        &format!("Compute plan 'large' is allowed by exception 'legacy-reports' until {expires}"),
    );
    // A broken exception names its file, document and field; nothing is written.
    let broken = write(
        &server.dir,
        "broken.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: other, boundary: shop}\nspec: {rules: [{disallowLatestTag: {}}]}\n---\napiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {name: bad, boundary: shop}\nspec: {policy: size, resources: [app/reports], expiresAt: \"2030-01-01T00:00:00Z\", reason: r}\n",
    );
    let out = palisade(
        &server.url,
        Some(token),
        &["apply", "-f", broken.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_stderr_contains(
        &out,
        "broken.yaml:1: /spec/plans: is required with resources",
    );
    let out = palisade(&server.url, Some(token), &["get", "policies", "shop"]);
    assert!(!text(&out.stdout).contains("other"), "all or nothing");

    // A developer requests, a boundary-admin approves.
    let create = |role: &str| {
        let out = palisade(
            &server.url,
            Some(token),
            &["token", "create", "--role", role, "--boundary", "shop"],
        );
        text(&out.stdout).trim().to_owned()
    };
    let developer = create("developer");
    let boundary_admin = create("boundary-admin");
    let request = write(
        &server.dir,
        "request.yaml",
        &format!("apiVersion: palisade.dev/v1\nkind: BoundaryException\nmetadata: {{name: legacy-web, boundary: shop}}\nspec:\n  policy: size\n  resources: [app/web]\n  plans: [large]\n  expiresAt: \"{expires}\"\n  reason: OPS-1235\n"),
    );
    let out = palisade(
        &server.url,
        Some(&developer),
        &["exception", "request", "-f", request.to_str().unwrap()],
    );
    assert_eq!(
        text(&out.stdout),
        "boundaryexception shop/legacy-web requested\n",
        "{}",
        text(&out.stderr)
    );
    let out = palisade(
        &server.url,
        Some(&developer),
        &["exception", "approve", "shop/legacy-web"],
    );
    assert_eq!(out.status.code(), Some(1));
    // The approver sees the spec approved; its etag goes with the approval.
    let out = palisade(
        &server.url,
        Some(&boundary_admin),
        &["exception", "approve", "shop/legacy-web"],
    );
    let approved = text(&out.stdout);
    let lines: Vec<&str> = approved.lines().collect();
    assert!(
        lines[0].starts_with(
            "approving boundaryexception shop/legacy-web (requested, requested by token:"
        ),
        "{approved}{}",
        text(&out.stderr)
    );
    assert!(
        lines[0].ends_with(" (developer)), this spec:"),
        "{approved}"
    );
    assert_eq!(
        lines[1..lines.len() - 1],
        [
            "  policy: size",
            "  resources:",
            "  - app/web",
            "  plans:",
            "  - large",
            format!("  expiresAt: {expires}").as_str(),
            "  reason: OPS-1235",
        ],
        "{approved}"
    );
    assert!(
        lines[lines.len() - 1]
            .starts_with("boundaryexception shop/legacy-web active (approved by token:"),
        "{approved}"
    );

    // describe: what it lets past, who asked, who approved, and its history.
    let out = palisade(
        &server.url,
        Some(token),
        &["describe", "exception", "shop/legacy-web"],
    );
    let described = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines: Vec<&str> = described.lines().collect();
    assert_eq!(lines[0], "Name:          legacy-web", "{described}");
    assert_eq!(lines[2], "Policy:        size", "{described}");
    assert_eq!(
        lines[3], "Rules:         every rule of the policy",
        "{described}"
    );
    assert_eq!(lines[4], "Status:        active", "{described}");
    assert!(
        lines[5].starts_with(&format!("Expires:       {expires} (")),
        "{described}"
    );
    assert_eq!(lines[6], "Reason:        OPS-1235", "{described}");
    assert!(lines[7].ends_with("(developer)"), "{described}");
    assert!(lines[8].contains("(boundary-admin) at "), "{described}");
    assert_eq!(lines[9], "Resources:     app/web", "{described}");
    assert_eq!(lines[10], "Plans:         large", "{described}");
    assert_eq!(lines[11], "History:", "{described}");
    assert!(lines[13].ends_with("   put"), "{described}");
    assert!(lines[14].ends_with("   approve"), "{described}");
    let out = palisade(
        &server.url,
        Some(token),
        &["describe", "policy", "shop/size"],
    );
    let described = text(&out.stdout);
    assert!(
        described
            .starts_with("Name:      size\nBoundary:  shop\nVersion:   1\nMode:      enforce\n"),
        "{described}"
    );
    assert!(
        described.contains("Exceptions:\n  NAME             STATUS   EXPIRES"),
        "{described}"
    );
    assert!(
        described.contains("\n  legacy-reports   active   "),
        "{described}"
    );
    let out = palisade(
        &server.url,
        Some(token),
        &["describe", "exception", "shop/nope"],
    );
    assert_exit(
        &out,
        1,
        "error: exception 'nope' not found in boundary 'shop' [not_found]\n",
    );
}
