//! `palisade serve --workload-config FILE`, `--public-url URL` and `--max-upload-bytes` are
//! checked before anything is created: a builder that is not pinned, a tag on the function-upload
//! builder, an unknown field, a public URL that is not http(s) or a limit that is no number of
//! bytes stops `serve` with the field named, and no data directory is made.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_palisade");

const GOOD: &str = "appBuilder: ghcr.io/acme/app-builder:2.1.0
functionBuilder: ghcr.io/acme/function-builder:2.1.0
staticWebAppBuilder: ghcr.io/acme/site-builder:2.1.0
functionUploadBuilder: ghcr.io/acme/function-builder
fileServer: docker.io/library/nginx:1.27.3
buildRegistry: registry.acme.internal/builds
staticWebAppCpu: 0.25
staticWebAppMemoryMib: 256
";

fn serve(extra: &[&str]) -> (Option<i32>, String, bool) {
    let fresh = tempfile::tempdir().unwrap();
    let data = fresh.path().join("data");
    let mut command = Command::new(BIN);
    command
        .args(["serve", "--no-reconciler", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(&data)
        .args(extra)
        .env_remove("PALISADE_DATABASE_URL")
        .env_remove("PALISADE_ADMIN_TOKEN")
        .env_remove("PALISADE_PUBLIC_URL");
    let out = command.output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        data.exists(),
    )
}

/// `serve` with `args` stops with exit code 2, saying `message`, before it creates anything.
fn refused_flag(args: &[&str], message: &str) {
    let (code, stderr, created) = serve(args);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains(message), "{stderr}");
    assert!(!created);
}

#[test]
fn a_bad_workload_config_or_public_url_stops_serve_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            GOOD.replace("app-builder:2.1.0", "app-builder:latest"),
            "appBuilder",
        ),
        (
            GOOD.replace(
                "functionUploadBuilder: ghcr.io/acme/function-builder\n",
                "functionUploadBuilder: ghcr.io/acme/function-builder:1.0\n",
            ),
            "functionUploadBuilder",
        ),
        (format!("{GOOD}replicas: 3\n"), "replicas"),
    ];
    for (i, (text, field)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad-{i}.yaml"));
        std::fs::write(&path, text).unwrap();
        let (code, stderr, created) = serve(&["--workload-config", path.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!("error: {}: ", path.display())) && stderr.contains(field),
            "{field}: {stderr}"
        );
        assert!(!created, "nothing is created");
    }
    refused_flag(
        &["--public-url", "ftp://palisade.example.com"],
        "must start with https:// or http://",
    );
}

#[test]
fn an_unknown_admission_layout_stops_serve_naming_the_flag() {
    refused_flag(
        &["--admission-layout", "flat"],
        "invalid value 'flat' for '--admission-layout <LAYOUT>': unknown admission layout 'flat': expected auto, per-policy, per-boundary or shared",
    );
}

#[test]
fn a_bad_upload_limit_stops_serve_naming_the_flag() {
    refused_flag(
        &["--max-upload-bytes", "1GB"],
        "invalid value '1GB' for '--max-upload-bytes <BYTES>': '1GB' is not a number of bytes like 1073741824, 1Gi or 512Mi",
    );
}
