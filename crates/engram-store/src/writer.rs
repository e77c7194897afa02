//! SQLite's write transactions, on the store's one write connection.
//!
//! SQLite lets one transaction write at a time, and every statement on a connection is a
//! hop to that connection's own thread and back; while a transaction writes, every other
//! writer waits for those hops. So a write transaction here costs as few as it can:
//! - the connection is held for the life of the store behind a queue (a fair mutex),
//!   not taken from a pool: a pool pings each connection it takes back, a hop more
//!   between one writer and the next;
//! - the transaction's last event is written in the same round trip as its end (see
//!   [`SqliteTx::commit`] and [`super::events`]), so a change's event adds no hop;
//! - its page cache stays warm: a SQLite connection drops its whole cache when it finds
//!   the file changed by another connection, so writes spread over several connections
//!   read every page they touch again (`pread` was a tenth of the writers' time in
//!   `perf`).
//!
//! **Group commit.** A commit writes every page the transaction changed to the WAL, and
//! with events, versions and the full-text index a remember changes about twenty; the
//! writer's thread spent its time in `pwrite`, not in SQLite. Writers that queue while
//! one writes share one SQLite transaction: each writes inside a savepoint of its own
//! (`SAVEPOINT member`; a failed or abandoned writer rolls back to it, and only its
//! changes go), and the group commits once, when the line has come round: its pages
//! that several writers touched (the tables' last leaves, the index segments) go to the
//! WAL once. A writer's `commit` returns after the group's `COMMIT`, so nothing is
//! acknowledged before it is in the file; when the group's commit fails every writer in
//! it gets the error. A writer alone in line commits at once, as before.
//!
//! `BEGIN`, `COMMIT` and `ROLLBACK` are plain statements here, not sqlx's transaction
//! (which commits with a round trip of its own). A transaction dropped before its commit
//! is rolled back (to its savepoint) by a task spawned at the drop, or by the next
//! writer, whichever takes the connection first; until then nobody else writes on it.
//! The statements that end a group run in spawned tasks, which a cancelled request
//! cannot stop halfway.

use std::{
    ops::{Deref, DerefMut},
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use sqlx::{Connection, SqliteConnection, Transaction, sqlite::SqliteConnectOptions};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard, watch};

use super::Result;

/// The write connection, the writers in line for it, and the group open on it.
#[derive(Debug)]
pub(super) struct Writer {
    /// `None` once the store is closed.
    line: Line,
    state: Arc<State>,
    /// The longest a writer waits for its turn before the answer is "unavailable".
    wait: Duration,
}

/// The queue for the write connection.
type Line = Arc<Mutex<Option<Slot>>>;

/// What the writers share besides the connection.
#[derive(Debug, Default)]
struct State {
    /// A writer's savepoint was begun and neither released nor rolled back yet: set by
    /// [`Writer::begin`], cleared by a release or a rollback.
    open: AtomicBool,
    /// Writers waiting for their turn in [`Writer::begin`]: while any are, a writer
    /// done with its part leaves the group open for them.
    queued: AtomicUsize,
}

/// The write connection and the group transaction open on it.
#[derive(Debug)]
struct Slot {
    conn: SqliteConnection,
    /// The open group (`BEGIN IMMEDIATE` sent), if any.
    group: Option<Arc<Group>>,
    /// Writers of the open group that released their savepoint and wait for its end.
    waiting: usize,
}

/// One group commit: how it ended, for the writers waiting on it (`None` until then;
/// the error's message when it failed).
#[derive(Debug)]
struct Group(watch::Sender<Option<std::result::Result<(), Arc<str>>>>);

impl Group {
    fn new() -> Arc<Group> {
        Arc::new(Group(watch::Sender::new(None)))
    }

    fn end(&self, outcome: std::result::Result<(), Arc<str>>) {
        self.0.send_replace(Some(outcome));
    }

    /// What a writer of the group waits on (see [`group_end`]).
    fn outcome(&self) -> Outcome {
        self.0.subscribe()
    }
}

/// A group's end as its writers see it.
type Outcome = watch::Receiver<Option<std::result::Result<(), Arc<str>>>>;

/// Waits for a group's end; a group dropped without one (the store closed) failed.
async fn group_end(mut outcome: Outcome) -> Result<()> {
    let message = match outcome.wait_for(Option::is_some).await.as_deref() {
        Ok(Some(Ok(()))) => return Ok(()),
        Ok(Some(Err(message))) => message.clone(),
        Ok(None) | Err(_) => Arc::from("the store closed"),
    };
    // Unavailable (503): the writer may retry; nothing of it was kept.
    Err(sqlx::Error::Io(std::io::Error::other(format!("the group commit failed: {message}"))))
}

impl Slot {
    /// Rolls back a writer's savepoint left open by a writer dropped before its commit.
    /// SQLite rolls the whole transaction back by itself after some failures (the
    /// savepoint is gone then): the group ends. Another error stops the next writer from
    /// beginning inside the abandoned savepoint.
    async fn rollback_if_open(&mut self, state: &State) -> Result<()> {
        if !state.open.swap(false, Ordering::AcqRel) {
            return Ok(());
        }
        match sqlx::query("ROLLBACK TO member; RELEASE member").execute(&mut self.conn).await {
            Ok(_) => Ok(()),
            Err(sqlx::Error::Database(e)) if e.message().contains("no such savepoint") => {
                let _ = self.end_group().await;
                Ok(())
            }
            Err(e) => {
                state.open.store(true, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Commits the open group and tells its writers; a failed commit is rolled back and
    /// each of them gets the error.
    async fn end_group(&mut self) -> Result<()> {
        let Some(group) = self.group.take() else { return Ok(()) };
        self.waiting = 0;
        match sqlx::query("COMMIT").execute(&mut self.conn).await {
            Ok(_) => {
                group.end(Ok(()));
                Ok(())
            }
            Err(error) => {
                // "No transaction is active" when SQLite rolled back already.
                let _ = sqlx::query("ROLLBACK").execute(&mut self.conn).await;
                group.end(Err(Arc::from(error.to_string())));
                Err(error)
            }
        }
    }

    /// Ends the group that is open on the connection when no writer's part is.
    async fn settle(&mut self, state: &State) -> Result<()> {
        self.rollback_if_open(state).await?;
        self.end_group().await
    }
}

/// How a writer's last statement ends its part: with the group's `COMMIT` when it is
/// the only writer in the group and nobody waits for a turn, else by releasing its
/// savepoint into the group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Ending {
    Commit,
    Release,
}

impl Ending {
    pub(super) fn sql(self) -> &'static str {
        match self {
            Ending::Commit => "COMMIT",
            Ending::Release => "RELEASE member",
        }
    }
}

/// Counts a writer in line while it waits for its turn.
struct InLine<'a>(&'a AtomicUsize);

impl<'a> InLine<'a> {
    fn enter(queued: &'a AtomicUsize) -> InLine<'a> {
        queued.fetch_add(1, Ordering::AcqRel);
        InLine(queued)
    }
}

impl Drop for InLine<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Writer {
    pub(super) async fn connect(options: &SqliteConnectOptions, wait: Duration) -> Result<Writer> {
        let conn = SqliteConnection::connect_with(options).await?;
        let slot = Slot { conn, group: None, waiting: 0 };
        Ok(Writer { line: Arc::new(Mutex::new(Some(slot))), state: Arc::default(), wait })
    }

    /// Waits for the connection (first come, first served; `PoolTimedOut` past the
    /// wait) and begins the writer's savepoint in the open group, or in a new one
    /// (`BEGIN IMMEDIATE`).
    pub(super) async fn begin(&self) -> Result<WriteTx> {
        let mut slot = {
            let _in_line = InLine::enter(&self.state.queued);
            self.turn().await?
        };
        slot.rollback_if_open(&self.state).await?;
        // Open (and the group noted) before the statement is sent: a begin cancelled
        // while it waits for the file (a request past its limit) still begins once the
        // file is free, on the connection's thread, and the next writer must roll that
        // back.
        self.state.open.store(true, Ordering::Release);
        let sql = if slot.group.is_some() {
            "SAVEPOINT member"
        } else {
            slot.group = Some(Group::new());
            "BEGIN IMMEDIATE; SAVEPOINT member"
        };
        if let Err(error) = sqlx::query(sql).execute(&mut slot.conn).await {
            // Nothing of this writer began; a group it was beginning ends (a `BEGIN`
            // that failed leaves nothing to commit, and the end says so to nobody).
            self.state.open.store(false, Ordering::Release);
            if slot.waiting == 0 {
                let _ = slot.end_group().await;
            }
            return Err(error);
        }
        Ok(WriteTx { slot, state: self.state.clone(), line: self.line.clone() })
    }

    /// Waits for the connection, first come, first served: `PoolTimedOut` past the
    /// wait, `PoolClosed` once the store is closed.
    async fn turn(&self) -> Result<OwnedMappedMutexGuard<Option<Slot>, Slot>> {
        let guard = tokio::time::timeout(self.wait, self.line.clone().lock_owned())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?;
        OwnedMutexGuard::try_map(guard, Option::as_mut).map_err(|_| sqlx::Error::PoolClosed)
    }

    /// Runs a `TRUNCATE` checkpoint on the write connection at its turn in line, between
    /// groups (the open one commits first). No writer of the store can begin meanwhile,
    /// so the checkpoint, which takes the file's write lock, does not race one for it in
    /// SQLite's busy handler (from a pooled connection it lost that race for the whole
    /// busy timeout under the contract test's load, and the erasure waiting on it ran
    /// past the client's 10 s). It waits only for readers on older snapshots, and for
    /// them at most `readers`, as every writer waits behind it: past that, SQLite's row
    /// says busy. Returns that row: (busy, WAL frames, frames copied).
    pub(super) async fn checkpoint_truncate(&self, readers: Duration) -> Result<(i64, i64, i64)> {
        let mut slot = self.turn().await?;
        slot.settle(&self.state).await?;
        let busy_timeout = |wait: Duration| sqlx::AssertSqlSafe(format!("PRAGMA busy_timeout = {}", wait.as_millis()));
        sqlx::query(busy_timeout(readers)).execute(&mut slot.conn).await?;
        let checkpoint = sqlx::query_as("PRAGMA wal_checkpoint(TRUNCATE)").fetch_one(&mut slot.conn).await;
        sqlx::query(busy_timeout(self.wait)).execute(&mut slot.conn).await?;
        checkpoint
    }

    /// Waits for the writer in progress, ends the open group (rolling back a part left
    /// open), and closes the connection: writers after this get `PoolClosed`.
    pub(super) async fn close(&self) {
        let mut line = self.line.lock().await;
        if let Some(mut slot) = line.take() {
            let _ = slot.settle(&self.state).await;
            let _ = slot.conn.close().await;
        }
    }
}

/// An open write transaction (a writer's savepoint in its group), holding the write
/// connection until its part ends.
pub struct WriteTx {
    slot: OwnedMappedMutexGuard<Option<Slot>, Slot>,
    state: Arc<State>,
    line: Line,
}

impl WriteTx {
    /// How the transaction's last statement may end its part (see [`Ending`]).
    pub(super) fn ending(&self) -> Ending {
        if self.slot.waiting == 0 && self.state.queued.load(Ordering::Acquire) == 0 {
            Ending::Commit
        } else {
            Ending::Release
        }
    }

    /// Ends the writer's part, unless its last statement did (`ended`), and returns once
    /// its group has committed: at once when the part ended with the `COMMIT`, else when
    /// the line has come round (see [`end_group_at_turn`]).
    async fn commit(mut self, ended: Option<Ending>) -> Result<()> {
        let ending = match ended {
            Some(ending) => ending,
            None => {
                let ending = self.ending();
                sqlx::query(ending.sql()).execute(&mut self.slot.conn).await?;
                ending
            }
        };
        self.state.open.store(false, Ordering::Release);
        let Some(group) = self.slot.group.clone() else {
            return Err(sqlx::Error::Protocol("a SQLite writer ended outside a group".into()));
        };
        if ending == Ending::Commit {
            self.slot.group = None;
            self.slot.waiting = 0;
            group.end(Ok(()));
            return Ok(());
        }
        self.slot.waiting += 1;
        let outcome = group.outcome();
        // The group ends in a task of its own, so that a writer cancelled while it waits
        // (its request gone) still leaves it to end.
        tokio::spawn(end_group_at_turn(self.line.clone(), self.state.clone(), group));
        drop(self);
        group_end(outcome).await
    }
}

impl WriteTx {
    /// Undoes the writer's part and returns once its group has committed: what it read
    /// may be another writer's of the same group, not yet in the file.
    async fn roll_back(mut self) -> Result<()> {
        sqlx::query("ROLLBACK TO member").execute(&mut self.slot.conn).await?;
        self.commit(None).await
    }
}

/// Queues behind the writers in line when `group`'s writer released its part, and ends
/// the group when its turn comes, unless the group ended first (another of its writers'
/// turn came earlier). So a group is the writers that were in line when its first one
/// finished, and every writer in it waits for the others at most once round the line.
async fn end_group_at_turn(line: Line, state: Arc<State>, group: Arc<Group>) {
    let mut outcome = group.outcome();
    let mut guard = tokio::select! {
        biased;
        _ = outcome.wait_for(Option::is_some) => return,
        guard = line.lock_owned() => guard,
    };
    let Some(slot) = guard.as_mut() else { return };
    // Still open on the connection means not ended: every end takes the group out of
    // the slot first.
    if slot.group.as_ref().is_some_and(|open| Arc::ptr_eq(open, &group))
        && let Err(error) = slot.settle(&state).await
    {
        tracing::warn!(%error, "committing a group of SQLite writes failed");
    }
}

impl Drop for WriteTx {
    /// Dropped before its commit (an error, or a cancelled request): a task rolls back
    /// to its savepoint at once, and ends the group when nobody else is in line, so the
    /// write lock is not held until the next writer comes. It queues for the connection
    /// like a writer; whoever comes first rolls back.
    fn drop(&mut self) {
        if !self.state.open.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (line, state) = (self.line.clone(), self.state.clone());
        runtime.spawn(async move {
            let mut guard = line.lock().await;
            let Some(slot) = guard.as_mut() else { return };
            let ended = match slot.rollback_if_open(&state).await {
                Ok(()) if state.queued.load(Ordering::Acquire) == 0 => slot.end_group().await,
                other => other,
            };
            if let Err(error) = ended {
                tracing::warn!(%error, "rolling back an abandoned SQLite write failed");
            }
        });
    }
}

/// A SQLite transaction: a write on the write connection, or a read snapshot on a
/// pooled reader (sqlx's own transaction, rolled back by sqlx when dropped).
pub enum SqliteTx {
    Write(WriteTx),
    Snapshot(Transaction<'static, sqlx::Sqlite>),
}

impl SqliteTx {
    /// Commits; `ended` when the transaction's last statement ended the writer's part
    /// (only a write's last event does).
    pub(super) async fn commit(self, ended: Option<Ending>) -> Result<()> {
        match self {
            SqliteTx::Write(tx) => tx.commit(ended).await,
            SqliteTx::Snapshot(tx) => tx.commit().await,
        }
    }

    /// Undoes a write's changes, returning once what it read is committed (see
    /// [`super::Tx::roll_back`]); a snapshot is simply rolled back.
    pub(super) async fn roll_back(self) -> Result<()> {
        match self {
            SqliteTx::Write(tx) => tx.roll_back().await,
            SqliteTx::Snapshot(tx) => tx.rollback().await,
        }
    }

    /// How a write's last statement may end its part; `None` for a snapshot.
    pub(super) fn ending(&self) -> Option<Ending> {
        match self {
            SqliteTx::Write(tx) => Some(tx.ending()),
            SqliteTx::Snapshot(_) => None,
        }
    }
}

impl Deref for SqliteTx {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        match self {
            SqliteTx::Write(tx) => &tx.slot.conn,
            SqliteTx::Snapshot(tx) => tx,
        }
    }
}

impl DerefMut for SqliteTx {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match self {
            SqliteTx::Write(tx) => &mut tx.slot.conn,
            SqliteTx::Snapshot(tx) => tx,
        }
    }
}
