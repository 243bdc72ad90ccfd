//! A real Kubernetes control plane for tests: `testenv/start.sh` runs etcd and kube-apiserver
//! (built from their Go modules and cached by `testenv/build.sh`) on loopback, the way
//! controller-runtime's envtest does. It stops when dropped, and with the test process.

use std::path::{Path, PathBuf};
use std::process::Command;

/// One running control plane.
#[derive(Debug)]
pub struct ControlPlane {
    version: String,
    workdir: tempfile::TempDir,
}

fn testenv_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testenv")
}

fn run(script: &str, args: &[&str], extra_env: &[(&str, &str)]) -> Result<String, String> {
    let mut command = Command::new("bash");
    command.arg(testenv_dir().join(script)).args(args);
    for (key, value) in extra_env {
        command.env(key, value);
    }
    let output = command
        .output()
        .map_err(|e| format!("cannot run testenv/{script}: {e}"))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(format!(
            "testenv/{script} {} failed:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

impl ControlPlane {
    /// Builds the binaries of `version` (`1.30`, `1.37`) when they are not cached, then starts
    /// etcd and kube-apiserver. `extra_apiserver_args` go to kube-apiserver as they are.
    pub fn start(version: &str, extra_apiserver_args: &str) -> Result<ControlPlane, String> {
        run("build.sh", &[version], &[])?;
        let workdir = tempfile::Builder::new()
            .prefix("palisade-control-plane-")
            .tempdir()
            .map_err(|e| format!("cannot make a work dir: {e}"))?;
        let dir = workdir.path().to_string_lossy().into_owned();
        let parent = std::process::id().to_string();
        run(
            "start.sh",
            &[version, &dir],
            &[
                ("PALISADE_TESTENV_PARENT_PID", &parent),
                ("APISERVER_EXTRA_ARGS", extra_apiserver_args),
            ],
        )?;
        Ok(ControlPlane {
            version: version.to_owned(),
            workdir,
        })
    }

    pub fn version(&self) -> &str {
        &self.version
    }

    pub fn kubeconfig_path(&self) -> PathBuf {
        self.workdir.path().join("kubeconfig")
    }

    /// The admin kubeconfig (inline client certificate, https server).
    pub fn kubeconfig_yaml(&self) -> Result<String, String> {
        std::fs::read_to_string(self.kubeconfig_path())
            .map_err(|e| format!("cannot read the kubeconfig: {e}"))
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let dir = self.workdir.path().to_string_lossy().into_owned();
        let _ = run("stop.sh", &[&dir], &[]);
    }
}
