//! The SQLite backend, the default: one database file in WAL mode with `synchronous=FULL`,
//! foreign keys on and a 5 s busy timeout. Every write runs in a `BEGIN IMMEDIATE`
//! transaction, which takes the database's write lock before its first read, so a guarded
//! write's checks and its write cannot interleave with a policy change. One process owns the
//! file: its writers take turns in-process, its reconciler is woken by an in-process channel
//! and always holds the lease.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::future::BoxFuture;
use sqlx::sqlite::{
    Sqlite, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePoolOptions,
    SqliteRow, SqliteSynchronous,
};
use sqlx::Pool;
use tokio::sync::watch;

use crate::error::{db, migrate};
use crate::group_commit::{GroupCommit, Op};
use crate::sql::{impl_conn, remaining, Conn};
use crate::sql_store::{SqlBackend, SqlStore};
use crate::turns::Class;
use crate::{DatabaseError, Lease, Result, StoreError};

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

impl_conn!(
    SqliteConnection,
    SqliteRow,
    Sqlite,
    // `BEGIN IMMEDIATE` already holds the database's write lock: reading the row is enough.
    lock_boundary: "SELECT name FROM boundaries WHERE name = $1",
    share: "",
    lock_row: "",
    lock_database: None,
);

/// The store on a SQLite file.
pub type SqliteStore = SqlStore<SqliteBackend>;

/// What is SQLite's own in `SqliteStore`.
#[derive(Debug)]
pub struct SqliteBackend {
    /// The one writer: this process's writes take turns there before `BEGIN IMMEDIATE`,
    /// round-robin between the boundaries that wait (`turns`), so they queue fairly instead of
    /// polling SQLite's lock (the busy timeout then only covers other processes using the same
    /// file) and one boundary's queue does not hold up another's writes; resource writes that
    /// queue together share a commit (see `group_commit`). It also wakes the reconciler after
    /// each committed change it acts on (`Store::subscribe`).
    group: Arc<GroupCommit>,
    /// `<file>.reconciler.lock` (`None`: an in-memory database).
    reconciler_lock: Option<PathBuf>,
    /// The clusters this process's reconciler holds.
    holds: crate::lease::LocalHolds,
}

impl SqliteStore {
    /// Opens `sqlite://PATH`, `sqlite:PATH` or a plain path, creating the file and its
    /// directory when absent, and applies the migrations.
    ///
    /// Processes starting together on a new file take turns: the file is created (mode 0600,
    /// which SQLite gives its `-wal` and `-shm` files too) and migrated under an exclusive
    /// lock on `<file>.lock`, so a second process waits and then finds the migrations applied.
    pub async fn connect(url: &str) -> Result<Self> {
        if crate::backend_of(url)? != crate::Backend::Sqlite {
            return Err(StoreError::UnsupportedUrl("postgres".into()));
        }
        let options = match url.get(..7) {
            Some(scheme) if scheme.eq_ignore_ascii_case("sqlite:") => {
                SqliteConnectOptions::from_str(&format!("sqlite:{}", &url[7..])).map_err(db)?
            }
            _ => SqliteConnectOptions::new().filename(url),
        };
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .foreign_keys(true)
            .busy_timeout(BUSY_TIMEOUT);
        create_parent_dir(&options).await?;
        let file = database_file(&options);
        let migration_lock = match &file {
            Some(path) => Some(lock_exclusively(lock_path(path)).await?),
            None => None,
        };
        if let Some(path) = &file {
            create_private(path).map_err(io_error)?;
        }

        let pool = SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .map_err(db)?;
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .map_err(migrate)?;
        // Closing the lock file releases the lock.
        drop(migration_lock);
        let backend = SqliteBackend {
            group: GroupCommit::new(pool.clone(), begin_immediate),
            reconciler_lock: file.as_deref().map(reconciler_lock_path),
            holds: Default::default(),
        };
        Ok(SqlStore::new(pool, backend))
    }
}

#[async_trait]
impl SqlBackend for SqliteBackend {
    /// A deferred transaction: its first read fixes what it sees (WAL).
    const BEGIN_READ: &'static str = "BEGIN";
    const NAME: &'static str = "sqlite";
    type Db = Sqlite;
    type Conn = SqliteConnection;

    async fn take_turn(&self, class: Class) -> Option<Box<dyn Send + '_>> {
        Some(Box::new(self.group.take_turn(class).await))
    }

    async fn grouped<T: Send + 'static>(
        &self,
        class: Class,
        deadline: Option<Instant>,
        op: Op<SqliteConnection, T>,
        wakes: for<'v> fn(&'v T) -> bool,
    ) -> std::result::Result<Result<T>, Op<SqliteConnection, T>> {
        Ok(self.group.write(class, deadline, op, wakes).await)
    }

    async fn begin(&self, conn: &mut SqliteConnection, deadline: Option<Instant>) -> Result<()> {
        begin_immediate(conn, deadline).await
    }

    fn wake_after_commit(&self) {
        self.group.wake();
    }

    async fn subscribe(&self, _pool: &Pool<Sqlite>) -> Result<watch::Receiver<u64>> {
        Ok(self.group.subscribe())
    }

    /// The process holding `<file>.reconciler.lock` leads; others serving the same file stand
    /// by (and take over when it stops). An in-memory database always leads.
    async fn join_fleet(
        &self,
        _pool: &Pool<Sqlite>,
        installation: &str,
        replica: &str,
    ) -> Result<Option<Lease>> {
        let local = |file| Lease::local(installation, replica, file, self.holds.clone());
        let Some(path) = self.reconciler_lock.clone() else {
            return Ok(Some(local(None)));
        };
        let taken = tokio::task::spawn_blocking(move || {
            let file = open_lock_file(&path)?;
            match file.try_lock() {
                Ok(()) => Ok(Some(file)),
                Err(std::fs::TryLockError::WouldBlock) => Ok(None),
                Err(std::fs::TryLockError::Error(error)) => Err(error),
            }
        })
        .await
        .map_err(|e| io_error(std::io::Error::other(e)))?
        .map_err(io_error)?;
        Ok(taken.map(|file| local(Some(file))))
    }

    /// What this process holds (another process serving the file holds what it holds
    /// unseen).
    async fn cluster_holders(
        &self,
        _pool: &Pool<Sqlite>,
        _installation: &str,
    ) -> Result<std::collections::BTreeMap<String, String>> {
        Ok(self.holds.lock().map(|h| h.clone()).unwrap_or_default())
    }
}

/// `BEGIN IMMEDIATE`. With a deadline, another process's write lock is waited for only until
/// then: SQLite's busy handler is given the time left (and the usual 5 s again once the
/// transaction has begun), so a deadline never leaves a connection blocked in a busy wait
/// behind a cancelled request; a lock still held at the deadline is `Timeout`. A failed begin
/// closes its connection (see `Write` and `Group`), so no connection goes back to the pool
/// with a shortened busy timeout.
pub(crate) fn begin_immediate(
    conn: &mut SqliteConnection,
    deadline: Option<Instant>,
) -> BoxFuture<'_, Result<()>> {
    Box::pin(async move {
        let Some(deadline) = deadline else {
            return Ok(conn.run("BEGIN IMMEDIATE").await?);
        };
        let left = remaining(deadline).unwrap_or(Duration::ZERO);
        set_busy_timeout(conn, left).await?;
        match conn.run("BEGIN IMMEDIATE").await {
            Ok(()) => Ok(set_busy_timeout(conn, BUSY_TIMEOUT).await?),
            Err(error) if is_busy(&error) => Err(StoreError::Timeout),
            Err(error) => Err(error.into()),
        }
    })
}

async fn set_busy_timeout(
    conn: &mut SqliteConnection,
    wait: Duration,
) -> Result<(), DatabaseError> {
    conn.run(&format!(
        "PRAGMA busy_timeout = {}",
        wait.as_millis().max(1)
    ))
    .await
}

/// `SQLITE_BUSY` or one of its extended codes: another connection holds the lock.
fn is_busy(error: &DatabaseError) -> bool {
    error
        .code()
        .and_then(|code| code.parse::<i32>().ok())
        .is_some_and(|code| code & 0xff == 5)
}

// ---- the database file ----

/// Whether a SQLite URL (as `connect` takes it) names a database that keeps nothing once the
/// process ends. Every spelling SQLite and sqlx read as one counts: `:memory:` as the file
/// (`sqlite::memory:`, `sqlite://:memory:`, a plain `:memory:`), a `file:` URI whose path is
/// `:memory:` (`sqlite:file::memory:?cache=shared`), `mode=memory` or `vfs=memdb` in the URL's
/// query or in a `file:` URI's, percent-encoded or not, and an empty file name (SQLite's
/// private temporary database).
pub fn is_in_memory_url(url: &str) -> bool {
    let rest = match url.get(..7) {
        Some(scheme) if scheme.eq_ignore_ascii_case("sqlite:") => {
            // As sqlx reads it: `sqlite://` or `sqlite:`, then the file, then `?` parameters.
            let rest = &url[7..];
            rest.strip_prefix("//").unwrap_or(rest)
        }
        // A plain path is the file name, `?` and all.
        _ => return names_memory(url),
    };
    let (database, params) = match rest.split_once('?') {
        Some((database, params)) => (database, Some(params)),
        None => (rest, None),
    };
    if params.is_some_and(|params| query_names_memory(params, true)) {
        return true;
    }
    if database == ":memory:" {
        return true;
    }
    match String::from_utf8(percent_decoded(database)) {
        Ok(file) => names_memory(&file),
        // sqlx refuses a file name that is not UTF-8: nothing is opened.
        Err(_) => false,
    }
}

/// Whether the file name SQLite is given (it opens with `SQLITE_OPEN_URI`) is in memory.
fn names_memory(file: &str) -> bool {
    if file.is_empty() || file == ":memory:" {
        return true;
    }
    let is_uri = file
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("file:"));
    if !is_uri {
        return false;
    }
    // SQLite's URI: `file:`, an optional `//authority`, the path to `?` or `#`, the query to `#`.
    let uri = &file[5..];
    let uri = uri.split('#').next().unwrap_or_default();
    let (path, query) = match uri.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (uri, None),
    };
    let path = match path.strip_prefix("//") {
        Some(authority_and_path) => match authority_and_path.find('/') {
            Some(slash) => &authority_and_path[slash..],
            None => "",
        },
        None => path,
    };
    let path = percent_decoded(path);
    path.is_empty()
        || path == b":memory:"
        || query.is_some_and(|query| query_names_memory(query, false))
}

/// Whether `mode=memory` or `vfs=memdb` is among `query`'s parameters (percent-decoded; `+` is
/// a space in a URL's form-encoded query, not in a SQLite URI's).
fn query_names_memory(query: &str, plus_is_space: bool) -> bool {
    query.split('&').any(|pair| {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        let decode = |text: &str| {
            let text = if plus_is_space {
                text.replace('+', " ")
            } else {
                text.to_owned()
            };
            percent_decoded(&text)
        };
        let (key, value) = (decode(key), decode(value));
        (key == b"mode" && value == b"memory") || (key == b"vfs" && value == b"memdb")
    })
}

/// `text` with each `%XX` replaced by its byte (a `%` not followed by two hex digits stays).
fn percent_decoded(text: &str) -> Vec<u8> {
    let hex = |b: u8| char::from(b).to_digit(16);
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn is_in_memory(path: &Path) -> bool {
    path.to_str()
        .is_some_and(|p| p == ":memory:" || p.starts_with("file:"))
}

async fn create_parent_dir(options: &SqliteConnectOptions) -> Result<()> {
    let path = options.get_filename();
    match path.parent() {
        Some(parent) if !is_in_memory(path) && !parent.as_os_str().is_empty() => {
            tokio::fs::create_dir_all(parent).await.map_err(io_error)
        }
        _ => Ok(()),
    }
}

fn io_error(error: std::io::Error) -> StoreError {
    StoreError::Database(DatabaseError::io(error))
}

/// The database file on disk; `None` for an in-memory database.
fn database_file(options: &SqliteConnectOptions) -> Option<PathBuf> {
    let path = options.get_filename();
    (!is_in_memory(path)).then(|| path.to_path_buf())
}

/// `<file>.reconciler.lock`, next to the database file: whoever holds it runs the reconciler.
fn reconciler_lock_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".reconciler.lock");
    file.with_file_name(name)
}

/// `<file>.lock`, next to the database file.
fn lock_path(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    file.with_file_name(name)
}

/// Opens a lock file for reading and writing, creating it with mode 0600 (its content is
/// never written).
fn open_lock_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
}

/// Opens (creating it, mode 0600) and exclusively locks `path`, waiting on a blocking thread
/// while another process holds it. The lock lasts until the returned file is closed.
async fn lock_exclusively(path: PathBuf) -> Result<std::fs::File> {
    let locked = tokio::task::spawn_blocking(move || {
        let file = open_lock_file(&path)?;
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await
    .map_err(|e| io_error(std::io::Error::other(e)))?;
    locked.map_err(io_error)
}

/// Creates the database file with mode 0600 when it does not exist yet (SQLite then creates
/// its `-wal` and `-shm` files with the same mode); an existing file is left as it is.
fn create_private(path: &Path) -> std::io::Result<()> {
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::is_in_memory_url;

    /// Every spelling of an in-memory (or temporary) database that sqlx and SQLite accept, and
    /// files on disk that only look like one.
    #[test]
    fn every_spelling_of_an_in_memory_database_is_one() {
        let in_memory = [
            "sqlite::memory:",
            "sqlite://:memory:",
            "SQLite::memory:",
            ":memory:",
            "sqlite:file::memory:",
            "sqlite:file::memory:?cache=shared",
            "sqlite://file::memory:?cache=shared",
            "sqlite:file:%3Amemory%3A",
            "sqlite:file:x?mode=memory",
            "sqlite:file:x?mode=memory&cache=shared",
            "sqlite:x.db?mode=memory",
            "sqlite://x.db?cache=shared&mode=memory",
            "sqlite:x.db?mode=%6Demory",
            "sqlite:?mode=memory",
            "sqlite://?mode=memory",
            "sqlite:file:x%3Fmode=memory",
            "sqlite:file:x%3Fmode%3Dmemory%26cache%3Dshared",
            "sqlite:FILE::memory:",
            "sqlite:file:///:memory:?mode=memory",
            "sqlite:file://localhost/x.db?mode=memory",
            "sqlite:x.db?vfs=memdb",
            "sqlite:file:x%3Fvfs=memdb",
            "sqlite:",
            "sqlite://",
            "sqlite:file:",
            "sqlite:file:?cache=shared",
        ];
        for url in in_memory {
            assert!(is_in_memory_url(url), "{url} is in memory");
        }
        let on_disk = [
            "palisade.db",
            "/data/palisade.db",
            "sqlite:palisade.db",
            "sqlite:/data/palisade.db",
            "sqlite:///data/palisade.db",
            "sqlite:/data/memory.db?cache=shared",
            "sqlite:file:/data/palisade.db",
            "sqlite:file:/data/palisade.db?cache=shared",
            "sqlite:file:memory",
            "sqlite:/data/:memory:",
            "x.db?mode=memory",
            "sqlite:x.db?mode=rwc",
        ];
        for url in on_disk {
            assert!(!is_in_memory_url(url), "{url} is on disk");
        }
    }
}
