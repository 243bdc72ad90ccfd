//! Dev-only: a real Kubernetes control plane (etcd + kube-apiserver, optionally
//! kube-controller-manager, kube-scheduler and kwok with fake nodes) for end-to-end tests,
//! started with `testenv/start.sh`.
//!
//! The binaries come from `testenv/build.sh` (cached under `~/.cache/palisade`); when they are
//! missing they are built first, and when they cannot be built the test FAILS: these tests
//! never skip. Each control plane gets `PALISADE_TESTENV_PARENT_PID` set to the test process,
//! so its watchdog stops it when the test binary exits, even after a panic or a kill.
//!
//! [`shared`] starts one control plane per test binary and version; [`ControlPlane::start`]
//! and [`ControlPlane::start_with`] start a private one that stops on drop.

#![allow(
    clippy::panic,
    reason = "test helpers: a control plane that cannot start must fail the test loudly"
)]

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use palisade_policy::labels::BOUNDARY_LABEL;

const WORKDIR_PREFIX: &str = "palisade-cp-";

/// How to start a control plane.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Also start kube-controller-manager (`START_KCM=1`; the newest version only).
    pub controller_manager: bool,
    /// Also start kube-scheduler and kwok with fake nodes (`START_WORKLOADS=1`), so that Pods
    /// are scheduled and become `Running` without a container runtime; the newest version
    /// only; implies the controller manager.
    pub workloads: bool,
    /// Extra kube-apiserver flags (`APISERVER_EXTRA_ARGS`).
    pub apiserver_args: Vec<String>,
}

/// A running control plane; stopped (and its directory removed) on drop.
#[derive(Debug)]
pub struct ControlPlane {
    version: String,
    workdir: PathBuf,
    dir: Option<tempfile::TempDir>,
    kubeconfig_yaml: String,
    env: BTreeMap<String, String>,
    startup: Duration,
}

/// The repository's `testenv/` directory.
pub fn testenv_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testenv")
}

/// `testenv/versions.env` as key/value pairs.
fn pinned_versions() -> BTreeMap<String, String> {
    let path = testenv_dir().join("versions.env");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().trim_matches('"').to_owned()))
        .collect()
}

fn major_minor(version: &str) -> &str {
    version.rsplit_once('.').map_or(version, |(head, _)| head)
}

/// Resolves `1.30`, `1.30.14`, `v1.37.2`, `old` or `new` to a pinned full version, with the
/// etcd version pinned for it. Panics on a version that is not pinned.
pub fn resolve_version(wanted: &str) -> (String, String) {
    let pins = pinned_versions();
    let pin = |key: &str| {
        pins.get(key)
            .cloned()
            .unwrap_or_else(|| panic!("testenv/versions.env has no {key}"))
    };
    let old = (pin("K8S_OLD_VERSION"), pin("K8S_OLD_ETCD_VERSION"));
    let new = (pin("K8S_NEW_VERSION"), pin("K8S_NEW_ETCD_VERSION"));
    let wanted = wanted.trim_start_matches('v');
    match wanted {
        "old" => return old,
        "new" | "newest" => return new,
        _ => {}
    }
    for pair in [old, new] {
        if wanted == pair.0 || wanted == major_minor(&pair.0) {
            return pair;
        }
    }
    panic!("Kubernetes {wanted} is not pinned in testenv/versions.env")
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A binary, or kwok's stages file, as `testenv/build.sh` leaves it.
fn is_built(path: &Path) -> bool {
    if path.extension().is_some_and(|ext| ext == "yaml") {
        path.is_file()
    } else {
        is_executable(path)
    }
}

/// Builds what `options` needs of `version` with `testenv/build.sh` (`build.sh <version>`,
/// and `build.sh kwok` for [`Options::workloads`]) unless it is all present. Panics when it
/// cannot be built.
pub fn ensure_binaries(version: &str, options: &Options) {
    let (version, etcd) = resolve_version(version);
    let cache = crate::cache_dir();
    // (build.sh target, file it builds)
    let mut needed = vec![
        (
            version.clone(),
            cache.join(format!("k8s/{version}/bin/kube-apiserver")),
        ),
        (version.clone(), cache.join(format!("etcd/{etcd}/bin/etcd"))),
    ];
    if options.controller_manager || options.workloads {
        needed.push((
            version.clone(),
            cache.join(format!("k8s/{version}/bin/kube-controller-manager")),
        ));
    }
    if options.workloads {
        needed.push((
            version.clone(),
            cache.join(format!("k8s/{version}/bin/kube-scheduler")),
        ));
        let kwok = pinned_versions()
            .get("KWOK_VERSION")
            .cloned()
            .unwrap_or_else(|| panic!("testenv/versions.env pins no KWOK_VERSION"));
        needed.push((
            "kwok".to_owned(),
            cache.join(format!("kwok/{kwok}/bin/kwok")),
        ));
        needed.push((
            "kwok".to_owned(),
            cache.join(format!("kwok/{kwok}/stages.yaml")),
        ));
    }
    let missing = |needed: &[(String, PathBuf)]| -> Vec<(String, String)> {
        needed
            .iter()
            .filter(|(_, path)| !is_built(path))
            .map(|(target, path)| (target.clone(), path.display().to_string()))
            .collect()
    };
    let first = missing(&needed);
    let mut targets: Vec<&str> = first.iter().map(|(target, _)| target.as_str()).collect();
    targets.dedup();
    for target in targets {
        let files: Vec<&str> = first
            .iter()
            .filter(|(t, _)| t == target)
            .map(|(_, path)| path.as_str())
            .collect();
        eprintln!(
            "control plane {version}: missing {}; running testenv/build.sh {target} (this takes a while)",
            files.join(", ")
        );
        let started = Instant::now();
        build(
            target,
            "the control plane binaries cannot be built, so the end-to-end tests cannot run",
        );
        eprintln!(
            "control plane {version}: testenv/build.sh {target} done in {:.0?}",
            started.elapsed()
        );
    }
    let still_missing: Vec<String> = missing(&needed).into_iter().map(|(_, path)| path).collect();
    if !still_missing.is_empty() {
        panic!(
            "testenv/build.sh succeeded but {} are still missing",
            still_missing.join(", ")
        );
    }
}

/// The `helm` binary pinned in `versions.env` (`HELM_VERSION`), built by
/// `testenv/build.sh helm` into the cache dir when absent. Panics when it cannot be built.
pub fn helm() -> PathBuf {
    let versions = pinned_versions();
    let version = versions
        .get("HELM_VERSION")
        .unwrap_or_else(|| panic!("testenv/versions.env pins no HELM_VERSION"));
    let path = crate::cache_dir().join(format!("helm/{version}/bin/helm"));
    if is_executable(&path) {
        return path;
    }
    eprintln!("helm {version}: missing; running testenv/build.sh helm");
    build("helm", "so the chart's tests cannot run");
    assert!(
        is_executable(&path),
        "testenv/build.sh helm succeeded but {} is still missing",
        path.display()
    );
    path
}

/// Runs `testenv/build.sh <target>`; panics with `consequence` and the output's tails when it
/// fails.
fn build(target: &str, consequence: &str) {
    let output = Command::new("bash")
        .arg(testenv_dir().join("build.sh"))
        .arg(target)
        .output()
        .unwrap_or_else(|e| panic!("cannot run testenv/build.sh {target}: {e}"));
    if !output.status.success() {
        panic!(
            "testenv/build.sh {target} failed ({}): {consequence}.\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
            output.status,
            tail(&output.stdout, 40),
            tail(&output.stderr, 40)
        );
    }
}

fn tail(bytes: &[u8], lines: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes the work directories of control planes whose test process is gone (their
/// watchdog has stopped them; `stop.sh` is run again to be sure).
fn remove_stale_workdirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(WORKDIR_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || process_alive(pid) {
            continue;
        }
        let path = entry.path();
        let _ = Command::new("bash")
            .arg(testenv_dir().join("stop.sh"))
            .arg(&path)
            .output();
        let _ = std::fs::remove_dir_all(&path);
    }
}

/// `KEY=value` lines, `export KEY=value` too (`start.sh` exports KUBECONFIG).
fn parse_env(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(|line| line.strip_prefix("export ").unwrap_or(line))
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

impl ControlPlane {
    /// Starts a private control plane of `version` (see [`resolve_version`]); panics when it
    /// cannot be built or started.
    pub fn start(version: &str) -> ControlPlane {
        ControlPlane::start_with(version, &Options::default())
    }

    /// Starts a private control plane with `options`.
    pub fn start_with(version: &str, options: &Options) -> ControlPlane {
        let (full_version, _) = resolve_version(version);
        ensure_binaries(&full_version, options);
        static CLEANED: OnceLock<()> = OnceLock::new();
        CLEANED.get_or_init(remove_stale_workdirs);

        // A port found free can be taken by a process running beside us before the server
        // binds it; such a start is tried again on other ports, at most three times.
        let mut attempt = 0;
        let (dir, workdir, startup) = loop {
            attempt += 1;
            let dir = tempfile::Builder::new()
                .prefix(&format!("{WORKDIR_PREFIX}{}-", std::process::id()))
                .tempdir()
                .unwrap_or_else(|e| panic!("cannot create a control plane directory: {e}"));
            let workdir = dir.path().to_path_buf();
            let started = Instant::now();
            let output = Command::new("bash")
                .arg(testenv_dir().join("start.sh"))
                .arg(&full_version)
                .arg(&workdir)
                .env(
                    "PALISADE_TESTENV_PARENT_PID",
                    std::process::id().to_string(),
                )
                .env(
                    "START_KCM",
                    if options.controller_manager { "1" } else { "0" },
                )
                .env("START_WORKLOADS", if options.workloads { "1" } else { "0" })
                .env("APISERVER_EXTRA_ARGS", options.apiserver_args.join(" "))
                .output()
                .unwrap_or_else(|e| panic!("cannot run testenv/start.sh: {e}"));
            let startup = started.elapsed();
            if output.status.success() {
                break (dir, workdir, startup);
            }
            let stderr = tail(&output.stderr, 40);
            if attempt < 3 && stderr.contains("address already in use") {
                eprintln!("control plane start found a port taken; trying other ports");
                continue;
            }
            panic!(
                "testenv/start.sh {full_version} {} failed ({}):\n--- stdout\n{}\n--- stderr (tail)\n{}",
                workdir.display(),
                output.status,
                tail(&output.stdout, 20),
                stderr
            );
        };
        let read = |file: &str| {
            let path = workdir.join(file);
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("start.sh wrote no {}: {e}", path.display()))
        };
        let kubeconfig_yaml = read("kubeconfig");
        let env = parse_env(&read("env"));
        let version = env
            .get("K8S_VERSION")
            .cloned()
            .unwrap_or(full_version.clone());
        eprintln!(
            "control plane {version} started in {startup:.1?} at {}",
            env.get("APISERVER_URL").map_or("?", String::as_str)
        );
        ControlPlane {
            version,
            workdir,
            dir: Some(dir),
            kubeconfig_yaml,
            env,
            startup,
        }
    }

    /// The full Kubernetes version, e.g. `1.30.14`.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The admin kubeconfig (inline credentials, https server).
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.workdir.join("kubeconfig")
    }

    /// The admin kubeconfig's text.
    pub fn kubeconfig_yaml(&self) -> &str {
        &self.kubeconfig_yaml
    }

    /// `<workdir>/env` as written by `start.sh` (`APISERVER_URL`, `K8S_VERSION`, `KUBECONFIG`,
    /// ...), without the `export` of `KUBECONFIG`.
    pub fn env(&self) -> &BTreeMap<String, String> {
        &self.env
    }

    /// The directory holding the kubeconfig, certificates and logs.
    pub fn workdir(&self) -> &Path {
        &self.workdir
    }

    /// How long `start.sh` took.
    pub fn startup_time(&self) -> Duration {
        self.startup
    }

    /// A client with the admin identity (`CN=admin`, `O=system:masters`).
    pub async fn client(&self) -> kube::Client {
        self.client_with(|_| {}).await
    }

    /// A client that impersonates `user` in `groups` (the admin may impersonate anyone).
    pub async fn impersonating_client(&self, user: &str, groups: &[&str]) -> kube::Client {
        let user = user.to_owned();
        let groups: Vec<String> = groups.iter().map(|g| (*g).to_owned()).collect();
        self.client_with(move |config| {
            config.auth_info.impersonate = Some(user);
            if !groups.is_empty() {
                config.auth_info.impersonate_groups = Some(groups);
            }
        })
        .await
    }

    /// A client that authenticates with a bearer `token` only (e.g. a service account's, made
    /// with the TokenRequest API): its own identity, no impersonation.
    pub async fn token_client(&self, token: &str) -> kube::Client {
        let token = token.to_owned();
        self.client_with(move |config| {
            config.auth_info = kube::config::AuthInfo {
                token: Some(token.into()),
                ..kube::config::AuthInfo::default()
            };
        })
        .await
    }

    /// A client with a bearer `token` that impersonates `user` (what the token's identity may
    /// impersonate is up to RBAC).
    pub async fn token_client_as(&self, token: &str, user: &str) -> kube::Client {
        let token = token.to_owned();
        let user = user.to_owned();
        self.client_with(move |config| {
            config.auth_info = kube::config::AuthInfo {
                token: Some(token.into()),
                impersonate: Some(user),
                ..kube::config::AuthInfo::default()
            };
        })
        .await
    }

    async fn client_with(&self, adjust: impl FnOnce(&mut kube::Config)) -> kube::Client {
        let kubeconfig = Kubeconfig::from_yaml(&self.kubeconfig_yaml)
            .unwrap_or_else(|e| panic!("start.sh's kubeconfig does not parse: {e}"));
        let mut config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap_or_else(|e| panic!("start.sh's kubeconfig is not usable: {e}"));
        adjust(&mut config);
        kube::Client::try_from(config)
            .unwrap_or_else(|e| panic!("cannot build a client for the control plane: {e}"))
    }

    /// Restarts its kube-apiserver (`testenv/restart-apiserver.sh`): the same command line, a
    /// new process; returns when it is ready again.
    pub fn restart_apiserver(&self) {
        self.restart_apiserver_after(Duration::ZERO);
    }

    /// Stops its kube-apiserver, leaves it down for `down` (an outage), then starts it again;
    /// returns when it is ready again.
    pub fn restart_apiserver_after(&self, down: Duration) {
        let output = Command::new("bash")
            .env("DOWN_FOR", down.as_secs_f64().to_string())
            .arg(testenv_dir().join("restart-apiserver.sh"))
            .arg(&self.workdir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run testenv/restart-apiserver.sh: {e}"));
        assert!(
            output.status.success(),
            "testenv/restart-apiserver.sh failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Stops the control plane now (also done on drop).
    pub fn stop(&mut self) {
        if let Some(dir) = self.dir.take() {
            let output = Command::new("bash")
                .arg(testenv_dir().join("stop.sh"))
                .arg(&self.workdir)
                .output();
            if let Ok(output) = &output {
                if !output.status.success() {
                    eprintln!(
                        "testenv/stop.sh {} failed: {}",
                        self.workdir.display(),
                        String::from_utf8_lossy(&output.stderr)
                    );
                }
            }
            drop(dir);
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The control plane of `version` shared by every test of this test binary: started on first
/// use, stopped by its watchdog when the binary exits.
pub fn shared(version: &str) -> &'static ControlPlane {
    shared_slot(version, "")
}

/// Another control plane of `version` shared by every test of this test binary, one per
/// `slot` (for tests that need two clusters): started on first use like [`shared`].
pub fn shared_slot(version: &str, slot: &str) -> &'static ControlPlane {
    type Cells = Mutex<HashMap<String, &'static OnceLock<ControlPlane>>>;
    static CELLS: OnceLock<Cells> = OnceLock::new();
    let (full_version, _) = resolve_version(version);
    let cell: &'static OnceLock<ControlPlane> = {
        let mut cells = CELLS
            .get_or_init(|| Mutex::new(HashMap::new()))
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        cells
            .entry(format!("{full_version}/{slot}"))
            .or_insert_with(|| Box::leak(Box::new(OnceLock::new())))
    };
    cell.get_or_init(|| ControlPlane::start(&full_version))
}

/// A unique DNS-1123 name starting with `prefix`.
pub fn unique_name(prefix: &str) -> String {
    let (pid, counter, nanos) = crate::unique_parts();
    format!("{prefix}-{pid}-{counter}-{:x}", nanos % 0x10000)
}

/// Creates a uniquely named namespace, labelled `palisade.dev/boundary=<boundary>` when given,
/// and returns its name.
pub async fn temp_namespace(client: &kube::Client, boundary: Option<&str>) -> String {
    let name = unique_name("t");
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            labels: boundary.map(|b| BTreeMap::from([(BOUNDARY_LABEL.to_owned(), b.to_owned())])),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("cannot create namespace {name}: {e}"));
    name
}
