//! Group commit on SQLite: resource writes that queue for the one writer run one after
//! another in one transaction, each in a savepoint of its own, and share its `COMMIT`, so the
//! commit's `fsync` is paid once per group instead of once per write.
//!
//! What a write sees and what it is told do not change: it runs alone on the writer's
//! connection (the group runs its writes in the order they took their turn), it sees what
//! the writes before it in the group wrote (as it would have once they had committed), a
//! write that fails is rolled back to its savepoint and leaves the others alone, and no
//! write is answered before the `COMMIT` that holds it has ended: if that `COMMIT` fails,
//! every write of the group is answered with its error and nothing of the group is written.
//!
//! Each write runs in a task of its own, so a request dropped half-way (its client gone)
//! never leaves the shared transaction in the middle of a write. A write still waiting for
//! its turn at its deadline is answered `Timeout` and skipped; once it has begun, its
//! outcome is the answer (a write that ends past its deadline is rolled back as `Timeout`,
//! as every write is). The last write in the queue commits the group, or the 64th; a
//! write outside the group (`SqlBackend::take_turn`) commits an open group first.
//!
//! Writes take turns at the writer fairly between boundaries (`turns`): round-robin between
//! the boundaries that wait, a boundary's resource writes queued one after another forming
//! one turn (up to 64), so a boundary that queues many writes delays another's by one turn.
//! Resource writes of several boundaries whose turns follow each other still share a group.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{Sqlite, SqliteConnection};
use sqlx::Pool;
use tokio::sync::{watch, Mutex, MutexGuard};

use crate::error::db;
use crate::sql::{remaining, Conn};
use crate::turns::{Class, FairTurns, Ticket};
use crate::{DatabaseError, Result, StoreError};

/// How many writes one `COMMIT` holds at most.
const MAX_GROUP: usize = 64;

/// A write's work on a connection inside a transaction (on SQLite, the writer's, in a group).
pub(crate) type Op<C, T> = Box<dyn for<'c> FnOnce(&'c mut C) -> BoxFuture<'c, Result<T>> + Send>;

/// How a write begins the transaction of a new group (`BEGIN IMMEDIATE`, waiting for another
/// process's lock only until the deadline).
pub(crate) type Begin =
    for<'c> fn(&'c mut SqliteConnection, Option<Instant>) -> BoxFuture<'c, Result<()>>;

/// The writer: whose turn it is, and the group whose transaction is open, if any.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    pool: Pool<Sqlite>,
    begin: Begin,
    /// Whose turn it is: one at a time, fairly between boundaries.
    turns: FairTurns<Class>,
    /// The open group, locked by the write whose turn it is.
    turn: Mutex<Option<Group>>,
    /// Grouped writes waiting for the turn: while there are any, the one that has it leaves
    /// the group open for them.
    queued: AtomicUsize,
    /// Bumped after each commit the reconciler must hear of (`Store::subscribe`).
    changes: watch::Sender<u64>,
    /// Groups committed so far.
    commits: AtomicUsize,
}

/// The writer's turn, as a write outside the groups holds it (no group is open meanwhile).
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    // Dropped first: the next turn finds the group unlocked.
    group: MutexGuard<'a, Option<Group>>,
    _ticket: Ticket<'a, Class>,
}

impl Turn<'_> {
    /// The open group, if any.
    fn group(&mut self) -> &mut Option<Group> {
        &mut self.group
    }
}

/// An open transaction and the writes it holds.
#[derive(Debug)]
pub(crate) struct Group {
    conn: PoolConnection<Sqlite>,
    writes: usize,
    wake: bool,
    committed: bool,
    /// The outcome of the group's `COMMIT`, once it has ended.
    outcome: watch::Sender<Option<Result<(), DatabaseError>>>,
}

/// Where a grouped write is: queued (its request may still give up on it), running, or given
/// up (it will not run).
const QUEUED: u8 = 0;
const RUNNING: u8 = 1;
const GIVEN_UP: u8 = 2;

impl GroupCommit {
    pub(crate) fn new(pool: Pool<Sqlite>, begin: Begin) -> Arc<Self> {
        Arc::new(GroupCommit {
            pool,
            begin,
            turns: FairTurns::new(1, 1, MAX_GROUP),
            turn: Mutex::new(None),
            queued: AtomicUsize::new(0),
            changes: watch::Sender::new(0),
            commits: AtomicUsize::new(0),
        })
    }

    /// The writer's turn for a write of its own of `class`: commits an open group first (in a
    /// task of its own, so that the group's writes get their answer even if this caller is
    /// dropped).
    pub(crate) async fn take_turn(self: &Arc<Self>, class: Class) -> Turn<'_> {
        let mut turn = self.lock(class, false).await;
        if let Some(group) = turn.group().take() {
            let this = Arc::clone(self);
            // A failed join leaves the group to `Group::drop`, which answers its writes.
            let _ = tokio::spawn(async move { this.commit(group).await }).await;
        }
        turn
    }

    /// Waits for a turn of `class`, then locks the group (which only the turn's holder does).
    async fn lock(&self, class: Class, grouped: bool) -> Turn<'_> {
        let ticket = self.turns.turn(class, grouped).await;
        Turn {
            group: self.turn.lock().await,
            _ticket: ticket,
        }
    }

    /// Wakes the reconciler (after a commit it must hear of).
    pub(crate) fn wake(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Runs `op`, a write of `class`, in the current group (or a new one) and answers once the
    /// group's `COMMIT` has ended. `wakes` says whether a result, once committed, wakes the
    /// reconciler.
    pub(crate) async fn write<T: Send + 'static>(
        self: &Arc<Self>,
        class: Class,
        deadline: Option<Instant>,
        op: Op<SqliteConnection, T>,
        wakes: for<'v> fn(&'v T) -> bool,
    ) -> Result<T> {
        let state = Arc::new(AtomicU8::new(QUEUED));
        let task =
            tokio::spawn(Arc::clone(self).run(class, Arc::clone(&state), deadline, op, wakes));
        let ended = |joined: std::result::Result<Result<T>, tokio::task::JoinError>| {
            joined.unwrap_or_else(|e| {
                Err(StoreError::Database(DatabaseError::other(format!(
                    "the write's task ended abnormally: {e}"
                ))))
            })
        };
        let Some(deadline) = deadline else {
            return ended(task.await);
        };
        let mut task = task;
        tokio::select! {
            joined = &mut task => ended(joined),
            () = tokio::time::sleep_until(deadline.into()) => {
                match state.compare_exchange(QUEUED, GIVEN_UP, Ordering::SeqCst, Ordering::SeqCst) {
                    Ok(_) => Err(StoreError::Timeout),
                    // It has begun: its outcome is the answer.
                    Err(_) => ended(task.await),
                }
            }
        }
    }

    async fn run<T: Send + 'static>(
        self: Arc<Self>,
        class: Class,
        state: Arc<AtomicU8>,
        deadline: Option<Instant>,
        op: Op<SqliteConnection, T>,
        wakes: for<'v> fn(&'v T) -> bool,
    ) -> Result<T> {
        self.queued.fetch_add(1, Ordering::SeqCst);
        let mut held = self.lock(class, true).await;
        self.queued.fetch_sub(1, Ordering::SeqCst);
        let turn = held.group();

        let begun = state
            .compare_exchange(QUEUED, RUNNING, Ordering::SeqCst, Ordering::SeqCst)
            .is_ok();
        let result = match (begun, deadline.map(remaining)) {
            (false, _) | (true, Some(Err(_))) => Err(StoreError::Timeout),
            (true, _) => self.run_in_group(turn, deadline, op).await,
        };

        // Whatever happened, the group is committed by the last write in the queue.
        let outcome = turn.as_mut().map(|group| {
            group.writes += 1;
            group.wake |= result.as_ref().is_ok_and(wakes);
            group.outcome.subscribe()
        });
        let last = self.queued.load(Ordering::SeqCst) == 0;
        if let Some(group) = turn.take_if(|group| last || group.writes >= MAX_GROUP) {
            self.commit(group).await;
        }
        drop(held);

        let Some(mut outcome) = outcome else {
            // No group is open: this write failed before it could begin one.
            return result;
        };
        let committed = match outcome.wait_for(Option::is_some).await {
            Ok(ended) => ended.clone().unwrap_or_else(|| Err(abandoned())),
            Err(_) => Err(abandoned()),
        };
        match committed {
            Ok(()) => result,
            Err(error) => Err(StoreError::Database(error)),
        }
    }

    /// Runs `op` in a savepoint of the open group, opening one first if none is. A failed
    /// savepoint statement leaves the transaction in a state nobody knows: the group is
    /// rolled back and every write of it answered with that error.
    async fn run_in_group<T>(
        &self,
        turn: &mut Option<Group>,
        deadline: Option<Instant>,
        op: Op<SqliteConnection, T>,
    ) -> Result<T> {
        if turn.is_none() {
            let mut conn = self.pool.acquire().await.map_err(db)?;
            (self.begin)(&mut conn, deadline).await?;
            *turn = Some(Group {
                conn,
                writes: 0,
                wake: false,
                committed: false,
                outcome: watch::Sender::new(None),
            });
        }
        let Some(group) = turn.as_mut() else {
            return Err(StoreError::Database(abandoned()));
        };
        if let Err(error) = group.conn.run("SAVEPOINT palisade_write").await {
            return Err(Self::abort(turn, error));
        }
        let result = op(&mut group.conn).await;
        let result = match (result, deadline) {
            (Ok(value), Some(deadline)) => remaining(deadline).map(|_| value),
            (result, _) => result,
        };
        let ended = match &result {
            Ok(_) => group.conn.run("RELEASE palisade_write").await,
            Err(_) => match group.conn.run("ROLLBACK TO palisade_write").await {
                Ok(()) => group.conn.run("RELEASE palisade_write").await,
                Err(error) => Err(error),
            },
        };
        match ended {
            Ok(()) => result,
            Err(error) => Err(Self::abort(turn, error)),
        }
    }

    /// Rolls the open group back and answers its writes with `error`.
    fn abort(turn: &mut Option<Group>, error: DatabaseError) -> StoreError {
        if let Some(group) = turn.take() {
            group.outcome.send_replace(Some(Err(error.clone())));
            // Dropping the group closes its connection, which rolls the transaction back.
            drop(group);
        }
        StoreError::Database(error)
    }

    async fn commit(&self, mut group: Group) {
        let committed = group.conn.run("COMMIT").await;
        if committed.is_ok() {
            self.commits.fetch_add(1, Ordering::SeqCst);
            // The connection may go back to the pool.
            group.committed = true;
            if group.wake {
                self.wake();
            }
        }
        group.outcome.send_replace(Some(committed));
    }
}

impl Drop for Group {
    /// A group dropped without a successful `COMMIT` closes its connection (rolling its
    /// transaction back) and answers writes still waiting with an error.
    fn drop(&mut self) {
        if !self.committed {
            self.conn.close_on_drop();
        }
        self.outcome.send_if_modified(|outcome| match outcome {
            Some(_) => false,
            None => {
                *outcome = Some(Err(abandoned()));
                true
            }
        });
    }
}

fn abandoned() -> DatabaseError {
    DatabaseError::other("the write's transaction ended before it was committed")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic, reason = "a test fails loudly")]
mod tests {
    use std::time::Duration;

    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    use super::*;
    use crate::sql::Arg::Int;

    async fn writer() -> (Arc<GroupCommit>, Pool<Sqlite>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteConnectOptions::new()
            .filename(dir.path().join("t.db"))
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
        let pool = SqlitePoolOptions::new()
            .connect_with(options)
            .await
            .unwrap();
        sqlx::query("CREATE TABLE t (x INTEGER PRIMARY KEY)")
            .execute(&pool)
            .await
            .unwrap();
        (
            GroupCommit::new(pool.clone(), crate::sqlite::begin_immediate),
            pool,
            dir,
        )
    }

    /// Inserts `x`, after sleeping `pause` in the transaction; fails after the insert when
    /// `fail`.
    fn insert(x: i64, pause: Duration, fail: bool) -> Op<SqliteConnection, i64> {
        Box::new(move |c| {
            Box::pin(async move {
                tokio::time::sleep(pause).await;
                c.execute("INSERT INTO t (x) VALUES ($1)", &[Int(x)])
                    .await?;
                if fail {
                    return Err(StoreError::Conflict(format!("{x} refused")));
                }
                Ok(x)
            })
        })
    }

    async fn rows(pool: &Pool<Sqlite>) -> Vec<i64> {
        sqlx::query_scalar("SELECT x FROM t ORDER BY x")
            .fetch_all(pool)
            .await
            .unwrap()
    }

    /// Writes queued behind a slow one share its commit; a write that fails is rolled back
    /// alone; a write still queued at its deadline is skipped as `Timeout`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn queued_writes_share_one_commit() {
        let (group, pool, _dir) = writer().await;
        let slow = tokio::spawn({
            let group = group.clone();
            async move {
                group
                    .write(
                        None,
                        None,
                        insert(0, Duration::from_millis(300), false),
                        |_| false,
                    )
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut queued = Vec::new();
        for x in 1..=40 {
            let group = group.clone();
            let deadline = (x == 20).then(|| Instant::now() + Duration::from_millis(100));
            queued.push(tokio::spawn(async move {
                group
                    .write(None, deadline, insert(x, Duration::ZERO, x == 10), |_| {
                        false
                    })
                    .await
            }));
        }
        assert_eq!(slow.await.unwrap().unwrap(), 0);
        for (x, task) in (1..=40).zip(queued) {
            match (x, task.await.unwrap()) {
                (10, Err(StoreError::Conflict(why))) => assert_eq!(why, "10 refused"),
                (20, Err(StoreError::Timeout)) => {}
                (x, Ok(y)) => assert_eq!(x, y),
                (x, other) => panic!("write {x}: {other:?}"),
            }
        }
        let expected: Vec<i64> = (0..=40).filter(|x| *x != 10 && *x != 20).collect();
        assert_eq!(rows(&pool).await, expected);
        // The slow write's group held every write queued behind it.
        assert_eq!(group.commits.load(Ordering::SeqCst), 1);
    }

    /// A request dropped while its write waits or runs leaves the other writes whole: every
    /// write answered `Ok` is stored, every one answered with an error is not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn dropped_requests_lose_nothing() {
        let (group, pool, _dir) = writer().await;
        let mut tasks = Vec::new();
        for x in 0..200 {
            let group = group.clone();
            let pause = Duration::from_micros((x % 7) * 300);
            tasks.push(tokio::spawn(async move {
                group
                    .write(None, None, insert(x as i64, pause, x % 13 == 0), |_| false)
                    .await
            }));
        }
        // Drop every third request at some point while the writes run.
        for (i, task) in tasks.iter().enumerate() {
            if i % 3 == 0 {
                task.abort();
            }
            if i % 20 == 0 {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        let mut answered_ok = Vec::new();
        let mut answered_err = Vec::new();
        for (x, task) in (0..200i64).zip(tasks) {
            match task.await {
                Ok(Ok(y)) => answered_ok.push(y),
                Ok(Err(_)) => answered_err.push(x),
                Err(_) => {} // dropped: either outcome is right
            }
        }
        let stored = rows(&pool).await;
        for x in &answered_ok {
            assert!(stored.contains(x), "{x} answered Ok but not stored");
        }
        for x in &answered_err {
            assert!(!stored.contains(x), "{x} answered with an error but stored");
        }
        assert!(
            stored.iter().all(|x| x % 13 != 0),
            "a failed write was stored"
        );
        assert!(answered_ok.len() > 100, "{answered_ok:?}");
        // The writer still works.
        assert_eq!(
            group
                .write(None, None, insert(1000, Duration::ZERO, false), |_| false)
                .await
                .unwrap(),
            1000
        );
    }
}
