//! What the client tests share: `palisade serve` as a real process on a free port, and small
//! helpers for its output and files.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_palisade");

pub struct Server {
    pub child: Child,
    pub url: String,
    pub token: String,
    pub dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `palisade serve` on a fresh data directory and a free port, with `extra` flags; answers once
/// it listens and has written the admin token.
pub fn serve(extra: &[&str]) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let child = spawn_quiet(serve_command(port, dir.path()).args(extra));
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

/// `palisade ARGS` run in `dir`, as the test's environment has it; its output once it ends.
pub fn run_in(args: &[&str], dir: &Path) -> Output {
    Command::new(BIN)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

/// Asserts the exit code `code` and exactly `stderr` on standard error.
pub fn assert_exit(out: &Output, code: i32, stderr: impl AsRef<str>) {
    assert_eq!(out.status.code(), Some(code), "{}", text(&out.stderr));
    assert_eq!(text(&out.stderr), stderr.as_ref());
}

/// Asserts that standard error holds `part`.
pub fn assert_stderr_contains(out: &Output, part: &str) {
    let stderr = text(&out.stderr);
    assert!(stderr.contains(part), "{stderr}");
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn write(dir: &tempfile::TempDir, name: &str, content: &str) -> PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, content).unwrap();
    path
}

/// A `palisade` command with no palisade settings from the test's environment: no
/// `PALISADE_*` variable, and a config file in a directory of its own (none there).
pub fn command(home: &Path) -> Command {
    let mut command = without_palisade_variables();
    command
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"));
    command
}

/// `palisade` with no `PALISADE_*` variable of the test's environment.
fn without_palisade_variables() -> Command {
    let mut command = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PALISADE_") {
            command.env_remove(name);
        }
    }
    command
}

/// `palisade serve` listening on 127.0.0.1:`port` with its data in `data`, and no
/// `PALISADE_*` variable of the test's environment; the caller adds flags, variables, output.
pub fn serve_command(port: u16, data: &Path) -> Command {
    let mut command = without_palisade_variables();
    command
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(data);
    command
}

/// Spawns `command` with its standard output and error dropped.
pub fn spawn_quiet(command: &mut Command) -> Child {
    command
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Runs `command` with `input` on its standard input; its output once it ends.
pub fn output_with_stdin(command: &mut Command, input: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// `palisade ARGS` against `server` as its admin, with `input` on its standard input, and no
/// palisade settings from the test's environment ([`command`], at home in the server's
/// directory).
pub fn palisade_with_stdin(server: &Server, args: &[&str], input: &str) -> Output {
    let mut command = command(server.dir.path());
    command
        .args(args)
        .env("PALISADE_URL", &server.url)
        .env("PALISADE_TOKEN", &server.token);
    output_with_stdin(&mut command, input)
}
