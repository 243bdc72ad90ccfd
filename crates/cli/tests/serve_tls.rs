//! `palisade serve --tls-cert/--tls-key`: HTTPS with the given identity (checked here with
//! curl and the certificate as the trust anchor), nothing in plain HTTP on that port, and
//! files that do not make a TLS identity refused at start-up with the file named.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a test fails loudly on bad fixtures"
)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_palisade");

/// A self-signed certificate for `localhost` and its key, as PEM files in `dir`.
fn identity(dir: &Path) -> (String, String) {
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let cert = dir.join("tls.crt");
    let key = dir.join("tls.key");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (cert.display().to_string(), key.display().to_string())
}

fn curl(args: &[&str]) -> (bool, String) {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "5"])
        .args(args)
        .output()
        .expect("curl runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn serve_speaks_https_with_the_given_identity_and_refuses_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity(dir.path());
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let data = dir.path().join("data");
    let mut child = Command::new(BIN)
        .args(["serve", "--no-reconciler", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--data-dir")
        .arg(&data)
        .args(["--tls-cert", &cert, "--tls-key", &key])
        .env_remove("PALISADE_DATABASE_URL")
        .env_remove("PALISADE_ADMIN_TOKEN")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let url = format!("https://localhost:{port}/healthz");
    let deadline = Instant::now() + Duration::from_secs(30);
    let answer = loop {
        let (ok, body) = curl(&["--cacert", &cert, &url]);
        if ok {
            break body;
        }
        assert!(
            Instant::now() < deadline,
            "no HTTPS answer from palisade serve"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(answer.contains("ok"), "{answer}");
    // Without the certificate as trust anchor curl refuses it; plain HTTP gets no answer.
    assert!(
        !curl(&[&url]).0,
        "a self-signed certificate must not verify"
    );
    let (plain, _) = curl(&[&format!("http://localhost:{port}/healthz")]);
    assert!(!plain, "plain HTTP must not be served on the TLS port");
    let _ = child.kill();
    let _ = child.wait();

    // Files that make no identity: the error names the file; nothing is created.
    let missing = dir.path().join("missing.key").display().to_string();
    for (cert_file, key_file, expected) in [
        (
            cert.as_str(),
            missing.as_str(),
            format!("error: {missing}: "),
        ),
        (key.as_str(), key.as_str(), format!("error: {key}: ")),
        (cert.as_str(), cert.as_str(), format!("error: {cert}: ")),
    ] {
        let fresh = tempfile::tempdir().unwrap();
        let out = Command::new(BIN)
            .args(["serve", "--no-reconciler", "--listen", "127.0.0.1:0"])
            .arg("--data-dir")
            .arg(fresh.path().join("data"))
            .args(["--tls-cert", cert_file, "--tls-key", key_file])
            .env_remove("PALISADE_DATABASE_URL")
            .env_remove("PALISADE_ADMIN_TOKEN")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&expected),
            "wanted {expected:?} in {stderr}"
        );
        assert!(!fresh.path().join("data").exists(), "nothing is created");
    }

    // --tls-cert without --tls-key is a usage error.
    let out = Command::new(BIN)
        .args(["serve", "--tls-cert", &cert])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
