//! Dev-only PostgreSQL for tests: a fresh database per test, and `TempPostgres`, a private
//! cluster a test may stop and restart under a running server.
//!
//! The databases are made on the server named by `PALISADE_TEST_POSTGRES_URL` (`scripts/test.sh`
//! sets it: `eval "$(bash scripts/ci-postgres.sh)"`). When it is unset, they are made on the
//! machine's own test server, which the kit starts on first use from Debian's server binaries
//! (`/usr/lib/postgresql/<version>/bin`) in `~/.cache/palisade/postgres/<version>`
//! (`$PALISADE_CACHE_DIR/postgres/<version>`); as root it runs as the `postgres` user, in the
//! same place under that user's home, since PostgreSQL refuses to run as root. It listens on a
//! loopback port only, with a random password of its own, and keeps running for the next test
//! process (stop it with `pg_ctl -D <dir>/data stop`); a lock file in its directory makes
//! concurrent test processes start it once.
//!
//! A PostgreSQL test never skips: without the server binaries it fails and says how to install
//! them (`apt-get install postgresql`), and a server that cannot be reached fails it too.

#![allow(
    clippy::panic,
    reason = "test helpers: a missing or broken test database must fail the test loudly"
)]

use std::io::{self, Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Once, OnceLock};
use std::time::Duration;

use sqlx::{Connection, PgConnection};

/// The shared test server's URL, e.g. `postgres://palisade:palisade@127.0.0.1:5432/postgres`.
/// Unset: the machine's own test server, started by the kit.
pub const URL_VAR: &str = "PALISADE_TEST_POSTGRES_URL";

const HOW_TO_START: &str = "start one with (as root): eval \"$(bash scripts/ci-postgres.sh)\"";
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const DATABASE_PREFIX: &str = "palisade_test_";
/// Appended to `postgresql.conf` of every cluster the kit makes: TCP on loopback only, and a
/// log of the server's own troubles only (the tests' failing statements are expected).
const SETTINGS: &str = "\n# palisade-testkit\nlisten_addresses = '127.0.0.1'\n\
     unix_socket_directories = ''\nmax_connections = 200\nlog_min_messages = fatal\n";

/// A fresh, uniquely named database for one test, as a URL: on the server named by
/// `PALISADE_TEST_POSTGRES_URL`, or, when that is unset, on the machine's own test server
/// (started when it is not running).
///
/// Panics when PostgreSQL is not installed, or when the server cannot be reached or refuses
/// to create the database: a PostgreSQL test never passes without running.
pub fn test_database_url() -> String {
    let (base, about) = server();
    static CLEAN: Once = Once::new();
    CLEAN.call_once(|| drop_stale_databases(&base));

    let name = unique_database_name();
    let statement = format!("CREATE DATABASE \"{name}\"");
    if let Err(error) = run_on_server(&base, vec![statement]) {
        panic!("cannot create a test database on {about}: {error}");
    }
    with_database(&base, &name)
}

/// The server's URL (its maintenance database) and how to name it in messages.
fn server() -> (String, String) {
    if let Ok(url) = std::env::var(URL_VAR) {
        if !url.is_empty() {
            let about = format!(
                "the PostgreSQL test server {} ({URL_VAR}); {HOW_TO_START}",
                redact(&url)
            );
            return (url, about);
        }
    }
    static OWN: OnceLock<Result<(String, String), String>> = OnceLock::new();
    match OWN.get_or_init(own_server) {
        Ok(server) => server.clone(),
        Err(error) => panic!(
            "the test needs PostgreSQL; {URL_VAR} is not set, so the test kit runs its own \
             server, but {error}"
        ),
    }
}

/// Finds the machine's own test server running, or creates and starts it.
fn own_server() -> Result<(String, String), String> {
    let (version, bin) = server_binaries()
        .map_err(|e| format!("{e}; or name a running server in {URL_VAR} ({HOW_TO_START})"))?;
    let user = User::current().map_err(|e| format!("cannot tell who runs the server: {e}"))?;
    let dir = user.cache_dir().join("postgres").join(&version);
    let cluster = Cluster {
        bin,
        dir,
        as_root: user.as_root,
    };
    let failed = |what: &str, error: io::Error| {
        format!("{what} in {} failed: {error}", cluster.dir.display())
    };
    cluster
        .make_dir()
        .map_err(|e| failed("creating the directory", e))?;
    let lock = std::fs::File::create(cluster.dir.join("lock"))
        .and_then(|file| file.lock().map(|()| file))
        .map_err(|e| failed("locking", e))?;
    if !cluster.data_dir().join("PG_VERSION").exists() {
        cluster
            .create_shared()
            .map_err(|e| failed("creating the cluster", e))?;
    }
    let password = std::fs::read_to_string(cluster.dir.join("password"))
        .map_err(|e| failed("reading the password", e))?;
    let port = match cluster.running_port() {
        Some(port) => port,
        None => {
            let port = cluster
                .start_on_a_free_port()
                .map_err(|e| failed("starting the server", e))?;
            eprintln!(
                "palisade-testkit: started this machine's PostgreSQL test server on 127.0.0.1:{port} \
                 (data and log in {}; it keeps running for later tests)",
                cluster.dir.display()
            );
            port
        }
    };
    drop(lock);
    let url = format!(
        "postgres://palisade:{}@127.0.0.1:{port}/postgres",
        password.trim()
    );
    let about = format!(
        "this machine's PostgreSQL test server {} (its log: {})",
        redact(&url),
        cluster.dir.join("server.log").display()
    );
    Ok((url, about))
}

/// `palisade_test_<pid>_<nanoseconds>_<counter>`: unique across processes and runs, and the
/// pid tells `drop_stale_databases` whether its process is gone.
fn unique_database_name() -> String {
    let (pid, counter, nanos) = crate::unique_parts();
    format!("{DATABASE_PREFIX}{pid}_{nanos}_{counter}")
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
        return; // `test_database_url` reports the problem when it creates its database.
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
    cluster: Cluster,
    port: u16,
    running: bool,
    // Last: removed after the server has stopped.
    _dir: tempfile::TempDir,
}

impl TempPostgres {
    /// Creates the cluster (`initdb`) and starts it.
    pub fn start() -> io::Result<Self> {
        let (_, bin) = server_binaries()?;
        let user = User::current()?;
        let dir = tempfile::Builder::new().prefix("palisade-pg-").tempdir()?;
        if let Some((uid, gid)) = user.server_ids {
            std::os::unix::fs::chown(dir.path(), Some(uid), Some(gid))?;
        }
        let cluster = Cluster {
            bin,
            dir: dir.path().to_path_buf(),
            as_root: user.as_root,
        };
        cluster.initdb(&cluster.data_dir(), &["--auth=trust", "--no-sync"])?;
        let mut pg = Self {
            cluster,
            port: free_port()?,
            running: false,
            _dir: dir,
        };
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
            self.cluster
                .pg_ctl(&["stop", "-m", "fast", "-w", "-t", "60"])?;
            self.running = false;
        }
        Ok(())
    }

    /// Stops the server if it runs, then starts it again on the same port and data.
    pub fn restart(&mut self) -> io::Result<()> {
        self.stop()?;
        self.start_server()
    }

    fn start_server(&mut self) -> io::Result<()> {
        self.cluster.start(self.port)?;
        self.running = true;
        Ok(())
    }
}

impl Drop for TempPostgres {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            eprintln!("TempPostgres: stopping the server failed: {error}");
        }
    }
}

/// Who runs the server: this process's user, or `postgres` when we are root.
struct User {
    as_root: bool,
    /// The `postgres` user's uid and gid, when we are root.
    server_ids: Option<(u32, u32)>,
    /// The `postgres` user's home, when we are root.
    server_home: Option<PathBuf>,
}

impl User {
    fn current() -> io::Result<Self> {
        let as_root = std::fs::metadata("/proc/self")?.uid() == 0;
        if !as_root {
            return Ok(Self {
                as_root,
                server_ids: None,
                server_home: None,
            });
        }
        let (uid, gid, home) = postgres_user()?;
        Ok(Self {
            as_root,
            server_ids: Some((uid, gid)),
            server_home: Some(home),
        })
    }

    /// The cache directory of the user that runs the server.
    fn cache_dir(&self) -> PathBuf {
        match &self.server_home {
            Some(home) => home.join(".cache/palisade"),
            None => crate::cache_dir(),
        }
    }
}

/// Debian's server binaries on one cluster directory (`data/`, `server.log`), run as
/// `postgres` when we are root.
#[derive(Debug)]
struct Cluster {
    bin: PathBuf,
    dir: PathBuf,
    as_root: bool,
}

impl Cluster {
    fn data_dir(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn log(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Creates the cluster directory, owned by the user that runs the server.
    fn make_dir(&self) -> io::Result<()> {
        if self.as_root {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--", "mkdir", "-p"]);
            run(command.arg(&self.dir)).map(drop)
        } else {
            std::fs::create_dir_all(&self.dir)
        }
    }

    /// `initdb` of a cluster in `data` with role `palisade`.
    fn initdb(&self, data: &Path, auth: &[&str]) -> io::Result<()> {
        let mut command = self.command("initdb");
        command
            .arg("-D")
            .arg(data)
            .args(["-U", "palisade", "-E", "UTF8", "--locale=C"])
            .args(auth);
        run(&mut command)?;
        let conf = data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf)?;
        text.push_str(SETTINGS);
        std::fs::write(&conf, text)
    }

    /// The machine's shared cluster: a random password for `palisade` (in `password`), made
    /// in `data.new` and renamed to `data` once complete, so an interrupted `initdb` leaves no
    /// half cluster behind.
    fn create_shared(&self) -> io::Result<()> {
        let password = self.dir.join("password");
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&password)?;
        file.write_all(random_password()?.as_bytes())?;
        drop(file);
        if self.as_root {
            let (uid, gid, _) = postgres_user()?;
            std::os::unix::fs::chown(&password, Some(uid), Some(gid))?;
        }
        let fresh = self.dir.join("data.new");
        if fresh.exists() {
            std::fs::remove_dir_all(&fresh)?;
        }
        let pwfile = format!("--pwfile={}", password.display());
        self.initdb(&fresh, &["--auth=scram-sha-256", &pwfile])?;
        std::fs::rename(&fresh, self.data_dir())
    }

    /// The port of the running server, from `postmaster.pid`; `None` when it is not running.
    fn running_port(&self) -> Option<u16> {
        let mut command = self.command("pg_ctl");
        command.arg("-D").arg(self.data_dir()).arg("status");
        let running = command.output().is_ok_and(|out| out.status.success());
        if !running {
            return None;
        }
        // Line 4 of postmaster.pid is the port.
        let pid_file = std::fs::read_to_string(self.data_dir().join("postmaster.pid")).ok()?;
        pid_file.lines().nth(3)?.trim().parse().ok()
    }

    /// Starts the server on a free port; a port taken by a neighbour between the check and the
    /// server's bind is replaced by another, at most three times.
    fn start_on_a_free_port(&self) -> io::Result<u16> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let port = free_port()?;
            match self.start(port) {
                Ok(()) => return Ok(port),
                Err(error) if attempt >= 3 => return Err(error),
                Err(_) => {}
            }
        }
    }

    fn start(&self, port: u16) -> io::Result<()> {
        let log = self.log().to_string_lossy().into_owned();
        let port = format!("-p {port}");
        if let Err(error) = self.pg_ctl(&["start", "-w", "-t", "60", "-l", &log, "-o", &port]) {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(20)..].join("\n");
            return Err(io::Error::other(format!(
                "{error}\nserver log ({log}):\n{tail}"
            )));
        }
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
        command.current_dir(&self.dir);
        command
    }
}

/// 32 hexadecimal digits from `/dev/urandom`.
fn random_password() -> io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The newest `/usr/lib/postgresql/<version>/bin` that holds `initdb` and `pg_ctl`, with its
/// version.
fn server_binaries() -> io::Result<(String, PathBuf)> {
    let not_found = || {
        io::Error::new(
            io::ErrorKind::NotFound,
            "PostgreSQL's server binaries (initdb, pg_ctl) are not installed under \
             /usr/lib/postgresql/<version>/bin: install them with (as root) \
             apt-get install postgresql",
        )
    };
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .map_err(|_| not_found())?
        .filter_map(|entry| entry.ok())
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            (bin.join("initdb").exists() && bin.join("pg_ctl").exists()).then_some((version, bin))
        })
        .collect();
    found.sort();
    found
        .pop()
        .map(|(version, bin)| (version.to_string(), bin))
        .ok_or_else(not_found)
}

/// The `postgres` user's uid, gid and home, from `/etc/passwd`.
fn postgres_user() -> io::Result<(u32, u32, PathBuf)> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    passwd
        .lines()
        .find_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            match fields.as_slice() {
                ["postgres", _, uid, gid, _, home, ..] => {
                    Some((uid.parse().ok()?, gid.parse().ok()?, PathBuf::from(home)))
                }
                _ => None,
            }
        })
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                "no `postgres` user to run the server as (apt-get install postgresql creates it)",
            )
        })
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

    /// The machine's own server, whatever `PALISADE_TEST_POSTGRES_URL` says, so that CI (which
    /// sets it) runs this path too: found or started, and it answers with its password.
    #[test]
    fn the_machine_server_starts_or_is_found_and_answers() {
        let (url, about) = own_server().unwrap_or_else(|e| panic!("{e}"));
        let again = own_server().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(url, again.0, "a second look finds the same server");
        if let Err(error) = run_on_server(&url, vec!["SELECT 1".into()]) {
            panic!("{about}: {error}");
        }
    }

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
