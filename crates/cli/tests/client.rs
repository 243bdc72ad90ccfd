//! The README tour, end to end: `palisade serve` as a real process on a free port, driven by
//! the `palisade` client commands; exact output lines and exit codes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_palisade");

struct Server {
    child: Child,
    url: String,
    token: String,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn serve(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let child = Command::new(BIN)
        .args([
            "serve",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--data-dir",
        ])
        .arg(dir.path())
        .args(extra)
        .env_remove("PALISADE_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let token_file = dir.path().join("admin.token");
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && token_file.exists() {
            break;
        }
        assert!(Instant::now() < deadline, "palisade serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let token = std::fs::read_to_string(token_file)
        .unwrap()
        .trim()
        .to_owned();
    Server {
        child,
        url,
        token,
        dir,
    }
}

fn palisade(server_url: &str, token: Option<&str>, args: &[&str]) -> Output {
    let mut command = Command::new(BIN);
    command.args(args).env("PALISADE_URL", server_url);
    match token {
        Some(token) => command.env("PALISADE_TOKEN", token),
        None => command.env_remove("PALISADE_TOKEN"),
    };
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path
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
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: Compute plan 'large' is not allowed in this boundary: a boundary policy disallows it. Allowed plans: small, medium. [compute_plan_not_allowed]\n"
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
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        "error: the token is not valid [unauthorized]\n"
    );
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
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!(
            "error: namespace '{namespace}' in cluster 'local' belongs to boundary 'shop' [conflict]\n"
        )
    );
    let policy = write(
        &server.dir,
        "trusted.yaml",
        "apiVersion: palisade.dev/v1\nkind: BoundaryPolicy\nmetadata: {name: trusted, boundary: shop}\nspec:\n  rules:\n    - allowedRegistries: {registries: [ghcr.io/acme]}\n    - disallowLatestTag: {}\n",
    );
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
    let clusters = run(&["get", "clusters"]);
    assert!(
        clusters.contains("local   v1.37.2      enforced          -"),
        "{clusters}"
    );

    // The API server itself refuses the Pod, with the policy's message.
    let runtime = tokio::runtime::Runtime::new().unwrap();
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
            "pods \"web\" is forbidden: ValidatingAdmissionPolicy 'trusted.shop.palisade.dev' \
             with binding 'trusted.shop.palisade.dev' denied request: Policy 'trusted' \
             (AllowedRegistries) denied image nginx:latest: it is not under ghcr.io/acme."
        ),
        other => panic!("expected a denial, got {other:?}"),
    }
    assert_eq!(
        run(&["delete", "namespace", &target, "--cluster", "local"]),
        format!("namespace {target} in cluster local deleted\n")
    );
    assert_eq!(
        run(&["delete", "cluster", "local"]),
        "cluster local deleted\n"
    );
}
