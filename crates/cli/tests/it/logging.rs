//! `serve --log-format`: JSON lines for a collector by default when standard output is not a
//! terminal (a container's, a pipe), text on request; never colour codes off a terminal.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, serve_command, BIN};

/// What `palisade serve` writes to standard output (a pipe) from its start until it listens
/// and has written its admin token, with `extra` flags and environment.
fn first_lines(extra: &[&str], env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = serve_command(port, dir.path())
        .args(extra)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !(std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        && dir.path().join("admin.token").exists())
    {
        assert!(Instant::now() < deadline, "palisade serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // A moment for the lines written while it started.
    std::thread::sleep(Duration::from_millis(300));
    let _ = child.kill();
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    let _ = child.wait();
    assert!(!out.trim().is_empty(), "serve logged nothing");
    assert!(
        !out.contains('\u{1b}'),
        "colour codes in a pipe's log:\n{out}"
    );
    out
}

#[test]
fn logs_are_json_lines_off_a_terminal_and_text_on_request() {
    for (extra, env) in [
        (&[][..], &[][..]),
        (&["--log-format", "json"][..], &[][..]),
        (&[][..], &[("PALISADE_LOG_FORMAT", "json")][..]),
    ] {
        let out = first_lines(extra, env);
        for line in out.lines() {
            let object: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            assert!(object["timestamp"].is_string(), "{line}");
            assert!(
                ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"]
                    .contains(&object["level"].as_str().unwrap_or("")),
                "{line}"
            );
            assert!(object["target"].is_string(), "{line}");
        }
        assert!(
            out.lines().any(|l| l.contains("\"message\"")),
            "no message field: {out}"
        );
    }

    let out = first_lines(&["--log-format", "text"], &[]);
    assert!(
        out.lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_err()),
        "{out}"
    );
    assert!(out.contains(" INFO "), "{out}");
}

#[test]
fn an_unknown_log_format_is_refused_with_the_choices() {
    let out = Command::new(BIN)
        .args(["serve", "--log-format", "xml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid value 'xml' for '--log-format <FORMAT>'")
            && stderr.contains("[possible values: json, text]"),
        "{stderr}"
    );
}
