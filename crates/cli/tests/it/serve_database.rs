//! `palisade serve --database`: a value that names no supported store is a start-up error
//! that echoes no password and creates no file; the SQLite file palisade creates is private.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::{free_port, serve_command, spawn_quiet};

const BIN: &str = env!("CARGO_BIN_EXE_palisade");

/// Every file under `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(root).unwrap().display().to_string());
            if path.is_dir() {
                walk(root, &path, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Waits up to `limit` for the child to exit; kills it (and says so) otherwise.
fn wait_for(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
            return (status.code(), stderr);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, "still running: it started on something".into());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_unknown_scheme_is_refused_without_echoing_the_password() {
    for (url, scheme) in [
        ("postgress://user:secret@host/db", "postgress"),
        ("mysql://user:secret@host/db", "mysql"),
        ("mysql:x", "mysql"),
    ] {
        let cwd = tempfile::tempdir().unwrap();
        let data = cwd.path().join("data");
        let child = Command::new(BIN)
            .current_dir(cwd.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--no-reconciler"])
            .arg("--data-dir")
            .arg(&data)
            .args(["--database", url])
            .env_remove("PALISADE_DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (code, stderr) = wait_for(child, Duration::from_secs(20));
        assert_eq!(code, Some(1), "{url}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "error: --database: unsupported scheme '{scheme}' \
                 (use postgres://, postgresql://, sqlite: or a file path)"
            )),
            "{url}: {stderr}"
        );
        assert!(!stderr.contains("secret"), "{url}: {stderr}");
        assert_eq!(files(cwd.path()), Vec::<String>::new(), "{url}");
    }
}

#[test]
fn the_default_database_file_is_private() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = spawn_quiet(serve_command(port, dir.path()).arg("--no-reconciler"));
    let deadline = Instant::now() + Duration::from_secs(30);
    // Started: the database file is there and the port answers. (The port alone is not
    // enough: a connect to a free local port can now and then reach something else, or the
    // socket itself, before palisade listens.)
    while !dir.path().join("palisade.db").exists()
        || std::net::TcpStream::connect(("127.0.0.1", port)).is_err()
    {
        assert!(Instant::now() < deadline, "palisade serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    for name in ["palisade.db", "palisade.db-wal", "palisade.db-shm"] {
        let path = dir.path().join(name);
        if name == "palisade.db" || path.exists() {
            let mode = std::fs::metadata(&path)
                .unwrap_or_else(|e| panic!("{name}: {e}"))
                .permissions()
                .mode()
                & 0o777;
            assert_eq!(mode, 0o600, "{name}: {mode:o}");
        }
    }
}

/// Starts `palisade serve` on a fresh data directory with `PALISADE_ADMIN_TOKEN` = `token`;
/// the child and its port once it answers.
fn serve_with_token(data: &Path, token: &str) -> (Child, u16) {
    let port = free_port();
    let child = spawn_quiet(
        serve_command(port, data)
            .arg("--no-reconciler")
            .env("PALISADE_ADMIN_TOKEN", token),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(port, "/healthz", None) != Some(200) {
        assert!(Instant::now() < deadline, "palisade serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, port)
}

/// The HTTP status of a GET, or `None` when nothing answers.
fn status_of(port: u16, path: &str, token: Option<&str>) -> Option<u16> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split(' ').nth(1)?.parse().ok()
}

/// `PALISADE_ADMIN_TOKEN` makes the first start's admin token (no admin.token file: for a
/// container nobody can read files of); a later start with another value changes nothing, and
/// a token too short is refused at start-up with the variable named.
#[test]
fn an_admin_token_given_in_the_environment_is_the_first_admin() {
    let dir = tempfile::tempdir().unwrap();
    let given = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=";
    let (mut child, port) = serve_with_token(dir.path(), given);
    assert_eq!(status_of(port, "/v1/boundaries", Some(given)), Some(200));
    assert_eq!(
        status_of(port, "/v1/boundaries", Some("pal_x_y")),
        Some(401)
    );
    assert!(!dir.path().join("admin.token").exists());
    let _ = child.kill();
    let _ = child.wait();

    let other = "b3RoZXItb3RoZXItb3RoZXItb3RoZXItb3RoZXItb3Ro";
    let (mut child, port) = serve_with_token(dir.path(), other);
    assert_eq!(status_of(port, "/v1/boundaries", Some(other)), Some(401));
    assert_eq!(status_of(port, "/v1/boundaries", Some(given)), Some(200));
    let _ = child.kill();
    let _ = child.wait();

    let fresh = tempfile::tempdir().unwrap();
    let child = Command::new(BIN)
        .args(["serve", "--no-reconciler", "--listen", "127.0.0.1:0"])
        .arg("--data-dir")
        .arg(fresh.path())
        .env_remove("PALISADE_DATABASE_URL")
        .env("PALISADE_ADMIN_TOKEN", "short")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, stderr) = wait_for(child, Duration::from_secs(20));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: PALISADE_ADMIN_TOKEN: must be at least 32 characters \
             (e.g. head -c 32 /dev/urandom | base64), got 5"
        ),
        "{stderr}"
    );
    assert_eq!(
        files(fresh.path()),
        Vec::<String>::new(),
        "nothing is created"
    );
}

/// The body of a GET, or `None` when nothing answers.
fn body_of(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer.split_once("\r\n\r\n")?.1.to_owned())
}

fn reconciling(port: u16) -> bool {
    // The sample's line, not the `# HELP` line, which reads "1 while ...".
    body_of(port, "/metrics").is_some_and(|m| m.lines().any(|l| l == "palisade_reconcile_active 1"))
}

/// Two `palisade serve` processes on one SQLite file: one runs the reconciler, the other
/// serves with it on standby (and says so), and takes over when the first stops.
#[test]
fn one_reconciler_per_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let token = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=";
    let start = |stdout: Stdio| {
        let port = free_port();
        let child = serve_command(port, dir.path())
            .env("PALISADE_ADMIN_TOKEN", token)
            .env("RUST_LOG", "info")
            .stdout(stdout)
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while status_of(port, "/healthz", None) != Some(200) {
            assert!(Instant::now() < deadline, "palisade serve did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        (child, port)
    };
    let (mut first, first_port) = start(Stdio::null());
    let deadline = Instant::now() + Duration::from_secs(20);
    while !reconciling(first_port) {
        assert!(Instant::now() < deadline, "the first process never led");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (mut second, second_port) = start(Stdio::piped());
    std::thread::sleep(Duration::from_secs(2));
    assert!(reconciling(first_port));
    assert!(
        !reconciling(second_port),
        "two reconcilers for one installation"
    );

    let _ = first.kill();
    let _ = first.wait();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reconciling(second_port) {
        assert!(
            Instant::now() < deadline,
            "the second process never took over"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let _ = second.kill();
    let _ = second.wait();
    // The log (on standard output) says why the second one did not reconcile at first.
    let mut log = String::new();
    std::io::Read::read_to_string(&mut second.stdout.take().unwrap(), &mut log).unwrap();
    assert!(
        log.contains("reconciler standing by: another process holds this installation's lease"),
        "{log}"
    );
}

/// An in-memory SQLite database keeps nothing across a restart: refused unless `--ephemeral`
/// says that is meant (and then it works, writes included).
#[test]
fn an_in_memory_database_needs_ephemeral() {
    for url in [
        "sqlite::memory:",
        "sqlite://:memory:",
        "sqlite:file:x?mode=memory",
        "sqlite:file::memory:?cache=shared",
        "sqlite://file::memory:",
        "sqlite:file:%3Amemory%3A",
        "sqlite:x.db?mode=%6Demory",
        "sqlite:x.db?vfs=memdb",
        "sqlite:file:x%3Fmode=memory",
    ] {
        let cwd = tempfile::tempdir().unwrap();
        let child = Command::new(BIN)
            .args(["serve", "--no-reconciler", "--listen", "127.0.0.1:0"])
            .args(["--database", url])
            .current_dir(cwd.path())
            .env_remove("PALISADE_DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (code, stderr) = wait_for(child, Duration::from_secs(20));
        assert_eq!(code, Some(1), "{url}: {stderr}");
        assert!(
            stderr.contains(&format!(
                "error: --database: {url} is an in-memory database: everything stored is lost when palisade stops; add --ephemeral to run on it anyway"
            )),
            "{url}: {stderr}"
        );
        assert_eq!(
            files(cwd.path()),
            Vec::<String>::new(),
            "nothing is created"
        );
    }
    let token = "c2VjcmV0LXNlY3JldC1zZWNyZXQtc2VjcmV0LXNlY3I=";
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = spawn_quiet(
        serve_command(port, dir.path())
            .args(["--no-reconciler", "--ephemeral"])
            .args(["--database", "sqlite::memory:"])
            .env("PALISADE_ADMIN_TOKEN", token),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(port, "/healthz", None) != Some(200) {
        assert!(
            Instant::now() < deadline,
            "palisade serve --ephemeral did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    use std::io::{Read, Write};
    let body = r#"{"name": "shop"}"#;
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        stream,
        "POST /v1/boundaries HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");
    let listed = body_of_with(port, "/v1/boundaries/shop", token).unwrap();
    assert!(listed.contains(r#""name":"shop""#), "{listed}");
    let _ = child.kill();
    let _ = child.wait();
}

fn body_of_with(port: u16, path: &str, token: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    Some(answer.split_once("\r\n\r\n")?.1.to_owned())
}

/// A client holding more idle sockets than palisade has file descriptors: `serve` raises its
/// soft open-files limit to the hard one and caps its connections below it, closing the
/// connection idle the longest to make room, so `/healthz` keeps answering (the probe that
/// found this held about 1,100 sockets against a soft limit of 1,024: `accept failed ... Too
/// many open files`). Here the limits are 256 soft and 512 hard, and 700 sockets are held.
#[test]
fn healthz_answers_beside_more_idle_sockets_than_file_descriptors() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut child = Command::new("bash")
        .args([
            "-c",
            r#"ulimit -Sn 256 && ulimit -Hn 512 && exec "$0" serve --no-reconciler --listen "$1" --data-dir "$2""#,
        ])
        .arg(BIN)
        .arg(format!("127.0.0.1:{port}"))
        .arg(dir.path())
        .env_remove("PALISADE_DATABASE_URL")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(port, "/healthz", None) != Some(200) {
        assert!(Instant::now() < deadline, "palisade serve did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The idle sockets are opened beside the probes (a connect the full listen queue holds
    // back must not hold the probes back too), and kept until the probes are done.
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let holder = {
        let done = done.clone();
        std::thread::spawn(move || {
            let idle: Vec<std::net::TcpStream> = (0..700)
                .filter_map(|_| std::net::TcpStream::connect(("127.0.0.1", port)).ok())
                .collect();
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
            idle.len()
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    // Probes as a liveness check sends them: 2 s each, while the sockets are held (well within
    // the 10 s after which palisade closes a connection that sent nothing).
    let mut answered = 0;
    for _ in 0..10 {
        if status_with_timeout(port, "/healthz", Duration::from_secs(2)) == Some(200) {
            answered += 1;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let held = holder.join().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(held > 256, "only {held} sockets were opened");
    assert_eq!(answered, 10, "/healthz answered {answered} of 10 probes");
}

/// [`status_of`] within `timeout` (connecting included): `None` when nothing answers by then.
fn status_with_timeout(port: u16, path: &str, timeout: Duration) -> Option<u16> {
    use std::io::{Read, Write};
    let started = Instant::now();
    let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let mut stream = std::net::TcpStream::connect_timeout(&address, timeout).ok()?;
    let left = timeout.checked_sub(started.elapsed())?;
    stream.set_read_timeout(Some(left)).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).ok()?;
    answer.split(' ').nth(1)?.parse().ok()
}

/// A replica started with another encryption key than the store's is refused at start, naming
/// where the key comes from, rather than sealing what the other replicas cannot open; with the
/// store's key (here through PALISADE_ENCRYPTION_KEY) it starts.
#[test]
fn a_replica_with_another_encryption_key_does_not_start() {
    let shared = tempfile::tempdir().unwrap();
    let database = format!("sqlite:{}", shared.path().join("palisade.db").display());
    let start = |data: &Path, key: Option<&str>, extra: &[&str]| {
        let port = free_port();
        let mut command = serve_command(port, data);
        command
            .args(["--no-reconciler", "--database", &database])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(key) = key {
            command.env("PALISADE_ENCRYPTION_KEY", key);
        }
        (command.spawn().unwrap(), port)
    };
    let first = tempfile::tempdir().unwrap();
    let (mut child, port) = start(first.path(), None, &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(port, "/healthz", None) != Some(200) {
        assert!(Instant::now() < deadline, "the first replica did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();

    // Another data directory: another encryption.key, made at start.
    let second = tempfile::tempdir().unwrap();
    let (child, _) = start(second.path(), None, &[]);
    let (code, stderr) = wait_for(child, Duration::from_secs(20));
    assert_eq!(code, Some(1), "{stderr}");
    let key_file = second.path().join("encryption.key").display().to_string();
    assert!(
        stderr.contains(&format!(
            "error: the encryption key ({key_file}) is not the key of the store {database}: the store's values were sealed with another key; what this replica sealed the others could not open, nor it theirs. Start every replica with the same key: PALISADE_ENCRYPTION_KEY, or the file encryption.key in --data-dir (to change the key, see --replace-encryption-key)"
        )),
        "{stderr}"
    );
    // A key given in the environment is named as such.
    let other = "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE=";
    let (child, _) = start(second.path(), Some(other), &[]);
    let (code, stderr) = wait_for(child, Duration::from_secs(20));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains(
            "error: the encryption key (PALISADE_ENCRYPTION_KEY) is not the key of the store"
        ),
        "{stderr}"
    );
    // The store's key, given to the second replica: it starts (and, below, a new key made
    // the store's on purpose).
    let key = std::fs::read_to_string(first.path().join("encryption.key")).unwrap();
    let (mut child, port) = start(second.path(), Some(key.trim()), &[]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(port, "/healthz", None) != Some(200) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the replica with the store's key stopped: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the replica with the store's key did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    // Another key made the store's on purpose: it starts, and the old one is refused.
    let (mut child, port) = start(second.path(), Some(other), &["--replace-encryption-key"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    while status_of(port, "/healthz", None) != Some(200) {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the replica replacing the key stopped: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "the replica replacing the key did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    let (child, _) = start(first.path(), None, &[]);
    let (code, stderr) = wait_for(child, Duration::from_secs(20));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("is not the key of the store"), "{stderr}");
}
