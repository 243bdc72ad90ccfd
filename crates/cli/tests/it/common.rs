//! What the client tests share: `palisade serve` as a real process on a free port, and small
//! helpers for its output and files.

use std::io::Write;
use std::path::PathBuf;
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
pub fn command(home: &std::path::Path) -> Command {
    let mut command = Command::new(BIN);
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("PALISADE_") {
            command.env_remove(name);
        }
    }
    command
        .env("HOME", home)
        .env("XDG_CONFIG_HOME", home.join("config"));
    command
}

/// `palisade ARGS` against `server` as its admin, with `input` on its standard input, and no
/// palisade settings from the test's environment ([`command`], at home in the server's
/// directory).
pub fn palisade_with_stdin(server: &Server, args: &[&str], input: &str) -> Output {
    let mut child = command(server.dir.path())
        .args(args)
        .env("PALISADE_URL", &server.url)
        .env("PALISADE_TOKEN", &server.token)
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
