//! Answers that are not the API's types: a tiny HTTP server answers every request with one
//! canned response, and the client reports it as one error line naming the request and what
//! is wrong, with exit code 1 (never a table of silent defaults).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::{Command, Output};

use crate::common::{assert_exit, text};

const BIN: &str = env!("CARGO_BIN_EXE_palisade");

/// Starts a server that answers every request with `status` and `body`; returns its URL.
fn answering(status: &str, content_type: &str, body: &str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let response = format!(
        "HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            // Read the whole request, so that closing the connection does not reset it.
            let mut reader = BufReader::new(&mut stream);
            let mut line = String::new();
            let mut length = 0;
            while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line != "\r\n" {
                if let Some((name, value)) = line.split_once(':') {
                    if name.eq_ignore_ascii_case("content-length") {
                        length = value.trim().parse().unwrap_or(0);
                    }
                }
                line.clear();
            }
            let _ = reader.read_exact(&mut vec![0; length]);
            let _ = stream.write_all(response.as_bytes());
        }
    });
    url
}

fn palisade(url: &str, args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("PALISADE_URL", url)
        .env("PALISADE_TOKEN", "pal_test")
        .output()
        .unwrap()
}

/// Exit code 1, nothing on standard output, and exactly `stderr`.
fn fails_with(out: &Output, stderr: &str) {
    assert_eq!(
        (out.status.code(), text(&out.stdout), text(&out.stderr)),
        (Some(1), String::new(), stderr.to_owned())
    );
}

#[test]
fn a_list_that_is_not_a_list_is_an_error() {
    let url = answering("200 OK", "application/json", r#"{"items": 5}"#);
    let expected = "error: the server's answer to GET /v1/boundaries could not be read: items: invalid type: integer `5`, expected a sequence\n";
    fails_with(&palisade(&url, &["get", "boundaries"]), expected);
    // Also when the body would be printed as it came.
    fails_with(
        &palisade(&url, &["get", "boundaries", "-o", "json"]),
        expected,
    );
}

#[test]
fn a_missing_field_is_named_by_its_path() {
    let url = answering(
        "200 OK",
        "application/json",
        r#"{"items": [{"name": "shop", "created_at": "2026-01-01T00:00:00Z"}, {"name": "web"}]}"#,
    );
    fails_with(
        &palisade(&url, &["get", "boundaries"]),
        "error: the server's answer to GET /v1/boundaries could not be read: items[1]: missing field `created_at`\n",
    );
    fails_with(
        &palisade(&url, &["get", "resources", "shop", "--type", "app"]),
        "error: the server's answer to GET /v1/boundaries/shop/resources?type=app could not be read: items[0]: missing field `boundary`\n",
    );
}

#[test]
fn an_unknown_install_status_or_spec_is_an_error() {
    let policy = |spec: &str, status: &str| {
        format!(
            r#"{{"boundary": "shop", "name": "p", "spec": {spec}, "metadata": {{}}, "etag": "1", "version": 1,
            "created_at": "t", "updated_at": "t", "updated_by": "u",
            "status": {{"clusters": [{{"cluster": "prod-1", "status": "{status}"}}]}}}}"#
        )
    };
    let good_spec = r#"{"rules": [{"disallowLatestTag": {}}]}"#;
    let url = answering(
        "200 OK",
        "application/json",
        &format!(r#"{{"items": [{}]}}"#, policy(good_spec, "enforcing")),
    );
    fails_with(
        &palisade(&url, &["get", "policies", "shop"]),
        "error: the server's answer to GET /v1/boundaries/shop/policies could not be read: items[0].status.clusters[0].status: 'enforcing' is not an install status (pending, installed, enforced, active (audit), error: ..., not enforced: ...)\n",
    );
    let url = answering(
        "200 OK",
        "application/json",
        &policy(r#"{"rules": [{"noSuchRule": {}}]}"#, "pending"),
    );
    fails_with(
        &palisade(&url, &["get", "policy", "shop/p", "-o", "yaml"]),
        "error: the server's answer to GET /v1/boundaries/shop/policies/p could not be read: spec.rules[0].noSuchRule: unknown field `noSuchRule`, expected one of `allowedComputePlans`, `requiredLabels`, `allowedRegistries`, `disallowLatestTag`\n",
    );
}

#[test]
fn a_body_that_is_not_json_is_an_error() {
    let url = answering("200 OK", "text/html", "<html>proxy login</html>");
    fails_with(
        &palisade(&url, &["get", "plans", "shop", "--type", "app"]),
        "error: the server's answer to GET /v1/boundaries/shop/plans?type=app could not be read: it is not JSON (expected value at line 1 column 1)\n",
    );
    let url = answering(
        "200 OK",
        "application/json",
        r#"{"status": "ok", "version": 7}"#,
    );
    let out = Command::new(BIN)
        .args(["version", "--server", &url])
        .output()
        .unwrap();
    assert_exit(&out, 1, "error: the server's answer to GET /healthz could not be read: version: invalid type: integer `7`, expected a string\n");
}

#[test]
fn error_answers_print_their_message_and_code() {
    let url = answering(
        "404 Not Found",
        "application/json",
        r#"{"error": {"code": "not_found", "message": "boundary 'shop' not found"}}"#,
    );
    fails_with(
        &palisade(&url, &["get", "policies", "shop"]),
        "error: boundary 'shop' not found [not_found]\n",
    );
    let url = answering(
        "422 Unprocessable Entity",
        "application/json",
        r#"{"error": {"code": "compute_plan_not_allowed", "message": "Compute plan 'large' is not allowed", "resource_type": "app", "plan": "large", "component": null, "allowed_plans": ["small"], "denied_by": ["size-limits"]}}"#,
    );
    fails_with(
        &palisade(
            &url,
            &[
                "resource", "create", "shop", "--type", "app", "--name", "web", "--plan", "large",
            ],
        ),
        "error: Compute plan 'large' is not allowed [compute_plan_not_allowed]\n",
    );
    // Not palisade's error body (e.g. a proxy's page): the status is all there is.
    let url = answering("502 Bad Gateway", "text/html", "<html>bad gateway</html>");
    fails_with(
        &palisade(&url, &["get", "boundaries"]),
        "error: HTTP 502 Bad Gateway [unknown]\n",
    );
}

/// What the server says is printed with its control characters escaped: an error message, and
/// an exception `approve` shows (its spec, the status line), so that no answer can move the
/// cursor, retitle the terminal or forge a line.
#[test]
fn server_text_is_printed_with_control_characters_escaped() {
    let url = answering(
        "409 Conflict",
        "application/json",
        r#"{"error": {"code": "conflict", "message": "taken\u001b[2J\nboundary shop created"}}"#,
    );
    fails_with(
        &palisade(&url, &["exception", "approve", "shop/legacy"]),
        "error: taken\\u{1b}[2J\\nboundary shop created [conflict]\n",
    );
    let view = r#"{"boundary": "shop", "name": "legacy", "status": "requested\u001b[32m",
        "spec": {"policy": "size", "match": {"namespaces": ["web"]},
            "expiresAt": "2027-01-31T00:00:00Z", "reason": "OPS\u001b]0;owned\u0007"},
        "expires_at": "2027-01-31T00:00:00Z", "requested_by": "dev\rroot",
        "approved_by": "admin\u001b[8m", "etag": "e1", "created_at": "x", "updated_at": "x",
        "updated_by": "x"}"#;
    let url = answering("200 OK", "application/json", view);
    let out = palisade(&url, &["exception", "approve", "shop/legacy"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(
        !stdout.chars().any(|c| c.is_control() && c != '\n'),
        "{stdout:?}"
    );
    assert!(
        stdout.starts_with(
            "approving boundaryexception shop/legacy (requested\\u{1b}[32m, requested by dev\\rroot), this spec:\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.ends_with(
            "boundaryexception shop/legacy requested\\u{1b}[32m (approved by admin\\u{1b}[8m, until 2027-01-31T00:00:00Z)\n"
        ),
        "{stdout}"
    );
}
