//! `palisade serve --tls-cert/--tls-key`: HTTPS with the given identity (checked here with
//! curl and the certificate as the trust anchor), nothing in plain HTTP on that port, and
//! files that do not make a TLS identity refused at start-up with the file named. The client
//! commands speak HTTPS to it, trusting a private CA given with `--ca-file`/`PALISADE_CA_FILE`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{assert_exit, free_port, serve_command, spawn_quiet, text};

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

/// The `Set-Cookie` header of cookie `name` in a response head, without the header's name.
fn set_cookie(head: &str, name: &str) -> String {
    head.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(|(header, _)| header.eq_ignore_ascii_case("set-cookie"))
        .map(|(_, value)| value.trim().to_owned())
        .find(|value| value.starts_with(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no Set-Cookie {name} in {head}"))
}

/// Plain HTTP on loopback: cookies are not Secure (a browser would never send them back);
/// with an `https://` public URL TLS is terminated in front, and every cookie is Secure.
#[test]
fn cookies_are_secure_when_the_public_url_is_https() {
    for (public_url, secure) in [
        (None, false),
        (Some("http://127.0.0.1:9"), false),
        (Some("https://palisade.example.com"), true),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let mut command = serve_command(port, dir.path());
        command
            .arg("--no-reconciler")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(url) = public_url {
            command.args(["--public-url", url]);
        }
        let mut child = command.spawn().unwrap();
        let url = format!("http://127.0.0.1:{port}/sign-in");
        let deadline = Instant::now() + Duration::from_secs(30);
        let head = loop {
            let (ok, head) = curl(&["-D", "-", "-o", "/dev/null", &url]);
            if ok {
                break head;
            }
            assert!(Instant::now() < deadline, "palisade serve did not start");
            std::thread::sleep(Duration::from_millis(100));
        };
        let _ = child.kill();
        let _ = child.wait();
        let cookie = set_cookie(&head, "palisade_sign_in");
        assert_eq!(
            cookie.ends_with("; Secure"),
            secure,
            "{public_url:?}: {cookie}"
        );
    }
}

#[test]
fn serve_speaks_https_with_the_given_identity_and_refuses_bad_files() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key) = identity(dir.path());
    let data = dir.path().join("data");
    let (mut child, port) = serve_https(&data, &cert, &key);
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
    // Over the HTTPS palisade serves, the portal's cookies are Secure.
    let (ok, head) = curl(&[
        "--cacert",
        &cert,
        "-D",
        "-",
        "-o",
        "/dev/null",
        &format!("https://localhost:{port}/sign-in"),
    ]);
    assert!(ok, "{head}");
    let cookie = set_cookie(&head, "palisade_sign_in");
    assert!(cookie.ends_with("; Secure"), "{cookie}");
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

/// A private CA named `name` and, signed by it, a certificate for `localhost` and its key, as PEM files in
/// `dir`: (CA certificate, server certificate, server key).
fn private_ca(dir: &Path, name: &str) -> (String, String, String) {
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let ca = rcgen::CertifiedIssuer::self_signed(params, ca_key).unwrap();
    let server_key = rcgen::KeyPair::generate().unwrap();
    let server = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    let files = [
        ("ca.crt", ca.pem()),
        ("server.crt", server.pem()),
        ("server.key", server_key.serialize_pem()),
    ];
    let paths: Vec<String> = files
        .iter()
        .map(|(name, pem)| {
            let path = dir.join(name);
            std::fs::write(&path, pem).unwrap();
            path.display().to_string()
        })
        .collect();
    (paths[0].clone(), paths[1].clone(), paths[2].clone())
}

/// `palisade serve` over HTTPS with `cert` and `key` on a free port, with `data` as its data
/// directory and no reconciler: the process and its port.
fn serve_https(data: &Path, cert: &str, key: &str) -> (std::process::Child, u16) {
    let port = free_port();
    let child = spawn_quiet(serve_command(port, data).arg("--no-reconciler").args([
        "--tls-cert",
        cert,
        "--tls-key",
        key,
    ]));
    (child, port)
}

/// `palisade` with `PALISADE_URL` set and the variables the test sets; none of the caller's.
fn client(url: &str, env: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("PALISADE_URL", url)
        .env_remove("PALISADE_TOKEN")
        .env_remove("PALISADE_CA_FILE");
    for (name, value) in env {
        command.env(name, value);
    }
    command.output().unwrap()
}

#[test]
fn the_client_speaks_https_trusting_a_private_ca() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = private_ca(dir.path(), "palisade test CA");
    let data = dir.path().join("data");
    let (mut child, port) = serve_https(&data, &cert, &key);
    let url = format!("https://localhost:{port}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while !curl(&["--cacert", &ca, &format!("{url}/healthz")]).0
        || !data.join("admin.token").exists()
    {
        assert!(
            Instant::now() < deadline,
            "no HTTPS answer from palisade serve"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let token = std::fs::read_to_string(data.join("admin.token")).unwrap();
    let token = token.trim();

    // PALISADE_CA_FILE, then --ca-file: the private CA is trusted.
    let out = client(
        &url,
        &[("PALISADE_TOKEN", token), ("PALISADE_CA_FILE", &ca)],
        &["boundary", "create", "shop"],
    );
    assert_eq!(
        (out.status.code(), text(&out.stdout)),
        (Some(0), "boundary shop created\n".to_owned()),
        "{}",
        text(&out.stderr)
    );
    let out = client(
        &url,
        &[("PALISADE_TOKEN", token)],
        &["get", "boundaries", "--ca-file", &ca, "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let body: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["items"][0]["name"], "shop", "{body}");
    let out = client(&url, &[], &["version", "--ca-file", &ca]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("\nServer Version: "),
        "{}",
        text(&out.stdout)
    );

    // Without the CA the server's certificate is not trusted: one clear line, exit 1.
    let out = client(&url, &[("PALISADE_TOKEN", token)], &["get", "boundaries"]);
    assert_exit(
        &out,
        1,
        format!(
            "error: cannot reach palisade at {url}: TLS verification failed: the server's \
             certificate is not signed by a trusted certificate authority (trust its CA with \
             --ca-file or PALISADE_CA_FILE)\n"
        ),
    );
    assert_eq!(text(&out.stdout), "");
    // Another CA did not sign it either.
    let elsewhere = tempfile::tempdir().unwrap();
    let (other_ca, _, _) = private_ca(elsewhere.path(), "another CA");
    let out = client(
        &url,
        &[("PALISADE_TOKEN", token)],
        &["get", "boundaries", "--ca-file", &other_ca],
    );
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (
            Some(1),
            format!(
                "error: cannot reach palisade at {url}: TLS verification failed: the server's \
                 certificate is not signed by a trusted certificate authority (nor by a CA of \
                 {other_ca})\n"
            )
        )
    );

    // A CA file that cannot be used: one line naming it, exit 1 (2 for preview, whose
    // failures are 2), before any request.
    let missing = dir.path().join("missing.crt").display().to_string();
    let garbled = dir.path().join("garbled.crt");
    std::fs::write(
        &garbled,
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n",
    )
    .unwrap();
    let garbled = garbled.display().to_string();
    for (ca_file, expected) in [
        (
            missing.as_str(),
            format!("error: {missing}: No such file or directory (os error 2)\n"),
        ),
        (
            key.as_str(),
            format!(
                "error: {key}: no certificate in it (the CA's certificates are expected, PEM \
                 encoded)\n"
            ),
        ),
        (
            garbled.as_str(),
            format!("error: {garbled}: not a usable CA certificate (BadEncoding)\n"),
        ),
    ] {
        let out = client(
            &url,
            &[("PALISADE_TOKEN", token)],
            &["get", "boundaries", "--ca-file", ca_file],
        );
        assert_eq!(
            (out.status.code(), text(&out.stderr)),
            (Some(1), expected.clone())
        );
        let out = client(
            &url,
            &[("PALISADE_TOKEN", token), ("PALISADE_CA_FILE", ca_file)],
            &["preview", "-f", "-"],
        );
        assert_eq!((out.status.code(), text(&out.stderr)), (Some(2), expected));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A self-signed certificate marked CA:TRUE (what `openssl req -x509` makes by default), given
/// to `serve` and trusted with `--ca-file`: TLS refuses a CA's certificate as a server's, and
/// the client says so in words, not in the TLS library's debug text.
#[test]
fn a_ca_certificate_used_as_the_server_s_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let cert_path = cert_path.display().to_string();
    let (mut child, port) = serve_https(
        &dir.path().join("data"),
        &cert_path,
        &key_path.display().to_string(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "palisade serve did not listen");
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!("https://localhost:{port}");
    let out = client(
        &url,
        &[("PALISADE_TOKEN", "x")],
        &["get", "boundaries", "--ca-file", &cert_path],
    );
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(
        (out.status.code(), text(&out.stderr)),
        (
            Some(1),
            format!(
                "error: cannot reach palisade at {url}: TLS verification failed: the server's \
                 certificate is a CA certificate (CA:TRUE), which TLS does not accept as a \
                 server's: sign the server's certificate with a CA and trust that CA\n"
            )
        )
    );
}
