//! The PostgreSQL backend, for several replicas sharing one database. Every write is one
//! transaction (READ COMMITTED); policy writes and the other writes of a boundary's contents
//! first lock the boundary's row exclusively (`SELECT ... FOR UPDATE`), resource writes (the
//! guarded creates and plan moves) in a shared lock (`FOR SHARE`), so a check and its write
//! cannot interleave with a policy change of that boundary while creates of one boundary run
//! side by side. A change's `seq` follows commit order relative to every policy change of its
//! boundary (two resource writes of one boundary may commit in either order). A create whose
//! guard already allowed it at the boundary's policies' version is one statement, its own
//! transaction, under the same shared lock (`resources::create_in_one_statement`). Committed changes wake every replica's
//! reconciler through LISTEN/NOTIFY; an advisory lock elects the one that runs.
//!
//! Nothing in the database serialises writes of different boundaries, but a process's pool
//! does: its connections are few (`POOL_SIZE`) and handed out first come first served. So
//! writes take turns for a connection fairly between boundaries (`turns`): at most
//! `WRITE_TURNS` at once, at most `WRITE_TURNS_PER_BOUNDARY` of them one boundary's (or the
//! installation's own), which leaves connections for the reads, `/readyz`'s ping and the
//! change listener, and for other boundaries while one boundary's writes wait for its lock.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use sqlx::postgres::{
    PgConnectOptions, PgConnection, PgListener, PgPool, PgPoolOptions, PgRow, Postgres,
};
use sqlx::{Connection, Pool};
use tokio::sync::watch;

use crate::error::{db, migrate};
use crate::sql::{by, impl_conn, remaining, Arg::Text, Conn, DbResult};
use crate::sql_store::{SqlBackend, SqlStore};
use crate::turns::{Class, FairTurns};
use crate::{DatabaseError, Lease, Result, StoreError};

impl_conn!(
    PgConnection,
    PgRow,
    Postgres,
    lock_boundary: "SELECT name FROM boundaries WHERE name = $1 FOR UPDATE",
    // Resource writes: against policy changes, not against each other (the unique index
    // decides between two creates of one name, a row lock between two edits of one resource).
    share: " FOR SHARE",
    lock_row: " FOR UPDATE",
    // Held until the transaction ends; the key is "palisade" in ASCII.
    lock_database: Some("SELECT pg_advisory_xact_lock(8097872805151990885)"),
);

/// The pool's connections (sqlx's default, said here because the turns below count on it).
const POOL_SIZE: u32 = 10;

/// Write transactions of this process at once: the pool less the change listener's connection
/// (held for good) and two for reads.
const WRITE_TURNS: usize = 7;

/// Write transactions of one boundary at once (or of the installation's own writes): as many
/// as the uploads one boundary may have under way, and three fewer than `WRITE_TURNS`.
const WRITE_TURNS_PER_BOUNDARY: usize = 4;

/// How long an operation waits for a connection (the pool's default is 30 s): with the server
/// down, calls fail within this time instead of hanging. 2 s is the bound SPEC 2.4 gives
/// for reading the policies before a plan path answers 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// The LISTEN/NOTIFY channel of changes the reconciler acts on.
const CHANNEL: &str = "palisade_reconcile";

/// The SQLSTATE of a lock wait the server gave up (`lock_timeout`).
const LOCK_NOT_AVAILABLE: &str = "55P03";

/// The store on a PostgreSQL database.
pub type PostgresStore = SqlStore<PostgresBackend>;

/// What is PostgreSQL's own in `PostgresStore`: the turns of this process's writes.
#[derive(Debug)]
pub struct PostgresBackend {
    turns: FairTurns<Class>,
}

impl PostgresStore {
    /// Opens `postgres://...` (or `postgresql://...`) and applies the migrations.
    pub async fn connect(url: &str) -> Result<Self> {
        let options: PgConnectOptions = url.parse().map_err(db)?;
        let pool = PgPoolOptions::new()
            .max_connections(POOL_SIZE)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(db)?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(migrate)?;
        let turns = FairTurns::new(WRITE_TURNS, WRITE_TURNS_PER_BOUNDARY, 1);
        Ok(SqlStore::new(pool, PostgresBackend { turns }))
    }
}

#[async_trait]
impl SqlBackend for PostgresBackend {
    const BEGIN_READ: &'static str = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY";
    const NAME: &'static str = "postgres";
    type Db = Postgres;
    type Conn = PgConnection;

    async fn take_turn(&self, class: Class) -> Option<Box<dyn Send + '_>> {
        Some(Box::new(self.turns.turn(class, false).await))
    }

    /// `BEGIN`. With a deadline, the server is told to give up waiting for a lock (the
    /// boundary's row) at the deadline, so that a guarded write stuck behind a policy change
    /// neither outlives its request on the server nor keeps its connection from the pool.
    /// Only lock waits are limited: never the commit.
    async fn begin(&self, conn: &mut PgConnection, deadline: Option<Instant>) -> Result<()> {
        by(deadline, async {
            conn.run("BEGIN").await?;
            if let Some(deadline) = deadline {
                let left = format!("{}ms", remaining(deadline)?.as_millis().max(1));
                let limit = "SELECT set_config('lock_timeout', $1, true)";
                conn.execute(limit, &[Text(&left)]).await?;
            }
            Ok(())
        })
        .await
    }

    const ONE_STATEMENT_CREATE: Option<&'static str> = Some(CHANNEL);

    fn gave_up_waiting(error: &DatabaseError) -> bool {
        error.code() == Some(LOCK_NOT_AVAILABLE)
    }

    /// PostgreSQL delivers the notification to every listening replica when, and only if,
    /// the transaction commits.
    async fn wake_in_transaction(conn: &mut PgConnection) -> DbResult<()> {
        conn.execute("SELECT pg_notify($1, '')", &[Text(CHANNEL)])
            .await
            .map(drop)
    }

    async fn subscribe(&self, pool: &PgPool) -> Result<watch::Receiver<u64>> {
        let (changes, receiver) = watch::channel(0);
        tokio::spawn(listen(pool.clone(), changes));
        Ok(receiver)
    }

    /// A connection of the lease's own, named after the replica, holding the installation's
    /// key shared: released when the lease is dropped or its connection is lost.
    async fn join_fleet(
        &self,
        pool: &Pool<Postgres>,
        installation: &str,
        replica: &str,
    ) -> Result<Option<Lease>> {
        let options = pool
            .connect_options()
            .as_ref()
            .clone()
            .application_name(&application_name(replica));
        let key = crate::lease::installation_key(installation);
        let join = async {
            let mut connection = PgConnection::connect_with(&options).await?;
            // The lease's lifetime (`lease::LEASE_LIFETIME`): the server ends this session once
            // it has been idle that long, and with it every lock it holds. PostgreSQL 14 and
            // later.
            let lifetime = format!("{}ms", crate::lease::LEASE_LIFETIME.as_millis());
            let limited: Option<String> = sqlx::query_scalar(
                "SELECT set_config('idle_session_timeout', $1, false) \
                 WHERE current_setting('server_version_num')::int >= 140000",
            )
            .bind(lifetime)
            .fetch_optional(&mut connection)
            .await?;
            if limited.is_none() {
                tracing::warn!(
                    "PostgreSQL before 14: a lease's session is not ended when it goes idle, so a \
                     replica cut off from the database keeps its clusters until the server's TCP \
                     keepalive gives up on it"
                );
            }
            // The member's key as `Lease::members` reads it back: the name as the server keeps
            // it.
            let (joined, me): (bool, String) = sqlx::query_as(
                "SELECT pg_try_advisory_lock_shared(hashtextextended($1, 0)), \
                        current_setting('application_name') || '#' || pg_backend_pid()::text",
            )
            .bind(key)
            .fetch_one(&mut connection)
            .await?;
            Ok::<_, sqlx::Error>((joined, me, connection))
        };
        let (joined, me, connection) = tokio::time::timeout(crate::lease::JOIN_TIMEOUT, join)
            .await
            .map_err(|_| StoreError::Timeout)?
            .map_err(db)?;
        Ok(joined.then(|| Lease::on(installation, me, connection)))
    }

    /// The sessions holding each cluster's lock, by their `application_name`.
    async fn cluster_holders(
        &self,
        pool: &Pool<Postgres>,
        installation: &str,
    ) -> Result<BTreeMap<String, String>> {
        let query = format!(
            "SELECT c.name, a.application_name FROM clusters c \
             JOIN pg_locks l ON {}($1 || c.name, 0) \
             JOIN pg_stat_activity a ON a.pid = l.pid",
            crate::lease::GRANTED_ADVISORY_LOCK_ON
        );
        let rows: Vec<(String, String)> = sqlx::query_as(&query)
            // Every cluster's key is this prefix and its name (`lease::cluster_key`).
            .bind(crate::lease::cluster_key(installation, ""))
            .fetch_all(pool)
            .await
            .map_err(db)?;
        Ok(rows.into_iter().collect())
    }
}

/// A replica's name as PostgreSQL keeps it (`application_name`: at most 63 bytes).
fn application_name(replica: &str) -> String {
    let mut end = replica.len().min(63);
    while !replica.is_char_boundary(end) {
        end -= 1;
    }
    replica[..end].to_owned()
}

/// Forwards notifications to `changes` until every receiver is gone; each (re)connection
/// also bumps it, since changes may have been missed while the connection was down.
async fn listen(pool: PgPool, changes: watch::Sender<u64>) {
    let bump = |changes: &watch::Sender<u64>| changes.send_modify(|n| *n = n.wrapping_add(1));
    loop {
        let connected = async {
            let mut listener = PgListener::connect_with(&pool).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        };
        let mut listener = tokio::select! {
            () = changes.closed() => return,
            connected = connected => match connected {
                Ok(listener) => listener,
                Err(error) => {
                    tracing::warn!(%error, "cannot listen for changes; retrying in 1 s");
                    tokio::select! {
                        () = changes.closed() => return,
                        () = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    }
                }
            },
        };
        bump(&changes);
        loop {
            let received = tokio::select! {
                () = changes.closed() => return,
                received = listener.try_recv() => received,
            };
            match received {
                Ok(Some(_)) => bump(&changes),
                // The connection was lost; the next call reconnects.
                Ok(None) => bump(&changes),
                Err(error) => {
                    tracing::warn!(%error, "lost the change listener; reconnecting");
                    break;
                }
            }
        }
    }
}
