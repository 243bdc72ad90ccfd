//! Dev-only PostgreSQL for tests: a fresh database per test on the shared test server named
//! by `PALISADE_TEST_POSTGRES_URL` (started by `scripts/ci-postgres.sh`), and `TempPostgres`,
//! a private cluster a test may stop and restart under a running server.
//!
//! Tests never skip silently when PostgreSQL is required: with `PALISADE_REQUIRE_POSTGRES=1`
//! an unset URL panics, and an unreachable server always panics.

#![allow(
    clippy::panic,
    reason = "test helpers: a missing or broken test database must fail the test loudly"
)]

use std::io;
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sqlx::{Connection, PgConnection};

/// The shared test server's URL, e.g. `postgres://palisade:palisade@127.0.0.1:5432/postgres`.
pub const URL_VAR: &str = "PALISADE_TEST_POSTGRES_URL";
/// `1`: tests that need PostgreSQL fail when `URL_VAR` is unset instead of skipping.
pub const REQUIRE_VAR: &str = "PALISADE_REQUIRE_POSTGRES";

const HOW_TO_START: &str = "start one with (as root): eval \"$(bash scripts/ci-postgres.sh)\"";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DATABASE_PREFIX: &str = "palisade_test_";

/// Whether PostgreSQL tests must run (`PALISADE_REQUIRE_POSTGRES=1`).
pub fn postgres_required() -> bool {
    std::env::var(REQUIRE_VAR).is_ok_and(|v| v == "1")
}

/// A fresh, uniquely named database on the shared test server, as a URL.
///
/// Panics when `PALISADE_TEST_POSTGRES_URL` is unset, or when the server cannot be reached
/// or refuses to create the database.
pub fn test_database_url() -> String {
    match try_test_database_url() {
        Some(url) => url,
        None => panic!("{URL_VAR} is not set: the test needs PostgreSQL; {HOW_TO_START}"),
    }
}

/// Like `test_database_url`, but `None` (with a note on stderr) when
/// `PALISADE_TEST_POSTGRES_URL` is unset and `PALISADE_REQUIRE_POSTGRES` is not `1`, so the
/// caller can skip its PostgreSQL half.
pub fn try_test_database_url() -> Option<String> {
    let base = match std::env::var(URL_VAR) {
        Ok(url) if !url.is_empty() => url,
        _ if postgres_required() => {
            panic!("{REQUIRE_VAR}=1 but {URL_VAR} is not set; {HOW_TO_START}")
        }
        _ => {
            eprintln!("note: {URL_VAR} is not set: skipping the PostgreSQL half of this test");
            return None;
        }
    };
    static CLEAN: Once = Once::new();
    CLEAN.call_once(|| drop_stale_databases(&base));

    let name = unique_database_name();
    let statement = format!("CREATE DATABASE \"{name}\"");
    if let Err(error) = run_on_server(&base, vec![statement]) {
        panic!(
            "cannot create a test database on the PostgreSQL test server {} ({URL_VAR}): \
             {error}; {HOW_TO_START}",
            redact(&base)
        );
    }
    Some(with_database(&base, &name))
}

/// `palisade_test_<pid>_<nanoseconds>_<counter>`: unique across processes and runs, and the
/// pid tells `drop_stale_databases` whether its process is gone.
fn unique_database_name() -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{DATABASE_PREFIX}{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Drops the test databases of processes that no longer run (best effort), so that a
/// long-lived test server does not fill up.
fn drop_stale_databases(base: &str) {
    let listed = on_server(base, |mut conn| async move {
        let names: Vec<String> = sqlx::query_scalar(
            "SELECT datname::text FROM pg_database WHERE datname LIKE 'palisade\\_test\\_%'",
        )
        .fetch_all(&mut conn)
        .await?;
        conn.close().await?;
        Ok(names)
    });
    let Ok(names) = listed else {
        return; // `try_test_database_url` reports the problem when it creates its database.
    };
    let stale: Vec<String> = names
        .into_iter()
        .filter(|name| {
            let pid = name
                .strip_prefix(DATABASE_PREFIX)
                .and_then(|rest| rest.split('_').next());
            pid.is_some_and(|pid| !Path::new("/proc").join(pid).exists())
        })
        .map(|name| format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
        .collect();
    if !stale.is_empty() {
        let _ = run_on_server(base, stale);
    }
}

/// Runs statements one by one on the server (`base` names its maintenance database).
fn run_on_server(base: &str, statements: Vec<String>) -> Result<(), String> {
    on_server(base, |mut conn| async move {
        for statement in statements {
            sqlx::query(&statement).execute(&mut conn).await?;
        }
        conn.close().await
    })
}

/// Connects to `base` and runs `work` on a runtime of its own, on a thread of its own, so
/// that it can be called from synchronous code and from inside an async test alike.
fn on_server<T, F, Fut>(base: &str, work: F) -> Result<T, String>
where
    T: Send + 'static,
    F: FnOnce(PgConnection) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = sqlx::Result<T>>,
{
    let base = base.to_owned();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime: {e}"))?;
        runtime.block_on(async move {
            let conn = tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect(&base))
                .await
                .map_err(|_| format!("no answer within {CONNECT_TIMEOUT:?}"))?
                .map_err(|e| format!("cannot connect: {e}"))?;
            work(conn).await.map_err(|e| e.to_string())
        })
    });
    thread
        .join()
        .unwrap_or_else(|_| Err("the connecting thread panicked".into()))
}

/// `url` with its database (the path) replaced by `database`; query parameters are kept.
fn with_database(url: &str, database: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (authority_and_path, query) = match rest.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (rest, None),
    };
    let authority = authority_and_path
        .split_once('/')
        .map_or(authority_and_path, |(authority, _)| authority);
    match query {
        Some(query) => format!("{scheme}://{authority}/{database}?{query}"),
        None => format!("{scheme}://{authority}/{database}"),
    }
}

/// `url` without its password, for messages.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((user_info, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = user_info.split(':').next().unwrap_or_default();
    format!("{scheme}://{user}:***@{host}")
}

/// A private PostgreSQL cluster: its own data directory in a temporary directory and its own
/// free loopback port, run with Debian's server binaries (`/usr/lib/postgresql/<v>/bin`).
/// As root, the binaries run as the `postgres` user (`runuser -u postgres --`), since
/// PostgreSQL refuses to run as root. Login: role `palisade`, no password (trust), database
/// `postgres`. Dropping it stops the server and deletes everything.
#[derive(Debug)]
pub struct TempPostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    as_root: bool,
    running: bool,
}

impl TempPostgres {
    /// Creates the cluster (`initdb`) and starts it.
    pub fn start() -> io::Result<Self> {
        let bin = server_binaries()?;
        let as_root = std::fs::metadata("/proc/self")?.uid() == 0;
        let dir = tempfile::Builder::new().prefix("palisade-pg-").tempdir()?;
        if as_root {
            let (uid, gid) = postgres_user()?;
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let mut pg = Self {
            dir,
            bin,
            port: free_port()?,
            as_root,
            running: false,
        };
        pg.initdb()?;
        pg.start_server()?;
        Ok(pg)
    }

    /// `postgres://palisade@127.0.0.1:<port>/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://palisade@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Stops the server (fast shutdown: open sessions are cut off, transactions rolled back).
    /// Does nothing when it is stopped already.
    pub fn stop(&mut self) -> io::Result<()> {
        if self.running {
            self.pg_ctl(&["stop", "-m", "fast", "-w", "-t", "60"])?;
            self.running = false;
        }
        Ok(())
    }

    /// Stops the server if it runs, then starts it again on the same port and data.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.start_server()
    }

    fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn initdb(&self) -> io::Result<()> {
        let data = self.data_dir();
        let mut command = self.command("initdb");
        command
            .arg("-D")
            .arg(&data)
            .args(["-U", "palisade", "--auth=trust", "-E", "UTF8"])
            .args(["--locale=C", "--no-sync"]);
        run(&mut command)?;
        let settings = format!(
            "\n# TempPostgres\nport = {}\nlisten_addresses = '127.0.0.1'\n\
             unix_socket_directories = '{}'\n",
            self.port,
            self.dir.path().display()
        );
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)?;
        text.push_str(&settings);
        std::fs::write(&conf, text)
    }

    fn start_server(&mut self) -> io::Result<()> {
        let log = self.dir.path().join("server.log");
        let log = log.to_string_lossy().into_owned();
        if let Err(error) = self.pg_ctl(&["start", "-w", "-t", "60", "-l", &log]) {
            let tail = std::fs::read_to_string(&log).unwrap_or_default();
            return Err(io::Error::other(format!("{error}\nserver log:\n{tail}")));
        }
        self.running = true;
        Ok(())
    }

    fn pg_ctl(&self, args: &[&str]) -> io::Result<()> {
        let mut command = self.command("pg_ctl");
        command.arg("-D").arg(self.data_dir()).args(args);
        run(&mut command).map(drop)
    }

    /// One of the server's programs, run as `postgres` when we are root.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = if self.as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.current_dir(self.dir.path());
        command
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            eprintln!("TempPostgres: stopping the server failed: {error}");
        }
    }
}

/// The newest `/usr/lib/postgresql/<version>/bin` that holds `initdb` and `pg_ctl`.
fn server_binaries() -> io::Result<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            "no PostgreSQL server binaries under /usr/lib/postgresql (apt-get install postgresql)",
        )
    })
}

/// The `postgres` user's uid and gid, from `/etc/passwd`.
fn postgres_user() -> io::Result<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                ["postgres", _, uid, gid, ..] => Some((uid.parse().ok()?, gid.parse().ok()?)),
                _ => None,
            }
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no `postgres` user"))
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn run(command: &mut Command) -> io::Result<Output> {
    let output = command.output()?;
    if output.status.success() {
        Ok(output)
    } else {
        Err(io::Error::other(format!(
            "{command:?} failed ({}):\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_is_replaced_in_urls() {
        assert_eq!(
            with_database("postgres://u:p@h:5432/postgres", "x"),
            "postgres://u:p@h:5432/x"
        );
        assert_eq!(
            with_database("postgres://u:p@h:5432/postgres?sslmode=disable", "x"),
            "postgres://u:p@h:5432/x?sslmode=disable"
        );
        assert_eq!(with_database("postgres://h", "x"), "postgres://h/x");
        assert_eq!(
            redact("postgres://u:secret@h:1/db"),
            "postgres://u:***@h:1/db"
        );
    }
}
