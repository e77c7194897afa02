//! SQLite's write transactions, on the store's one write connection.
//!
//! SQLite lets one transaction write at a time, and every statement on a connection is a
//! hop to that connection's own thread and back; while a transaction writes, every other
//! writer waits for those hops. So a write transaction here costs as few as it can:
//! - the connection is held for the life of the store behind a queue (a fair mutex),
//!   not taken from a pool: a pool pings each connection it takes back, a hop more
//!   between one writer and the next;
//! - the transaction's last event is written in the same round trip as the `COMMIT`
//!   (see [`SqliteTx::commit`] and [`super::events`]), so a change's event adds no hop;
//! - its page cache stays warm: a SQLite connection drops its whole cache when it finds
//!   the file changed by another connection, so writes spread over several connections
//!   read every page they touch again (`pread` was a tenth of the writers' time in
//!   `perf`).
//!
//! `BEGIN`, `COMMIT` and `ROLLBACK` are plain statements here, not sqlx's transaction
//! (which commits with a round trip of its own). A transaction dropped before its commit
//! is rolled back by a task spawned at the drop, or by the next writer, whichever takes
//! the connection first; until then nobody else writes on it.

use std::{
    ops::{Deref, DerefMut},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use sqlx::{Connection, SqliteConnection, Transaction, sqlite::SqliteConnectOptions};
use tokio::sync::{Mutex, OwnedMappedMutexGuard, OwnedMutexGuard};

use super::Result;

/// The write connection and whether a transaction is open on it.
#[derive(Debug)]
pub(super) struct Writer {
    /// `None` once the store is closed.
    conn: Arc<Mutex<Option<SqliteConnection>>>,
    /// A transaction was begun and neither committed nor rolled back yet: set by
    /// [`Writer::begin`], cleared by a commit or a rollback.
    open: Arc<AtomicBool>,
    /// The longest a writer waits for its turn before the answer is "unavailable".
    wait: Duration,
}

impl Writer {
    pub(super) async fn connect(options: &SqliteConnectOptions, wait: Duration) -> Result<Writer> {
        let conn = SqliteConnection::connect_with(options).await?;
        Ok(Writer { conn: Arc::new(Mutex::new(Some(conn))), open: Arc::default(), wait })
    }

    /// Waits for the connection (first come, first served; `PoolTimedOut` past the
    /// wait) and begins an immediate transaction on it.
    pub(super) async fn begin(&self) -> Result<WriteTx> {
        let guard = tokio::time::timeout(self.wait, self.conn.clone().lock_owned())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?;
        let mut conn = OwnedMutexGuard::try_map(guard, Option::as_mut).map_err(|_| sqlx::Error::PoolClosed)?;
        rollback_if_open(&mut conn, &self.open).await?;
        // Open before `BEGIN` is sent: a begin cancelled while it waits for the file (a
        // request past its limit) still begins once the file is free, on the connection's
        // thread, and the next writer must roll that back.
        self.open.store(true, Ordering::Release);
        sqlx::query("BEGIN IMMEDIATE").execute(&mut *conn).await?;
        Ok(WriteTx { conn, open: self.open.clone(), writer: self.conn.clone() })
    }

    /// Waits for the writer in progress, rolls back anything left open, and closes the
    /// connection: writers after this get `PoolClosed`.
    pub(super) async fn close(&self) {
        let mut slot = self.conn.lock().await;
        if let Some(mut conn) = slot.take() {
            let _ = rollback_if_open(&mut conn, &self.open).await;
            let _ = conn.close().await;
        }
    }
}

/// Rolls back a transaction left open by a writer dropped before its commit. An error
/// other than "none is open" (SQLite rolls back by itself after some failures) stops
/// the next writer from beginning inside it.
async fn rollback_if_open(conn: &mut SqliteConnection, open: &AtomicBool) -> Result<()> {
    if open.swap(false, Ordering::AcqRel) {
        match sqlx::query("ROLLBACK").execute(&mut *conn).await {
            Ok(_) => {}
            Err(sqlx::Error::Database(e)) if e.message().contains("no transaction is active") => {}
            Err(e) => {
                open.store(true, Ordering::Release);
                return Err(e);
            }
        }
    }
    Ok(())
}

/// An open write transaction, holding the write connection until it ends.
pub struct WriteTx {
    conn: OwnedMappedMutexGuard<Option<SqliteConnection>, SqliteConnection>,
    open: Arc<AtomicBool>,
    writer: Arc<Mutex<Option<SqliteConnection>>>,
}

impl WriteTx {
    /// Commits, unless the last statement already did (`committed`).
    async fn commit(mut self, committed: bool) -> Result<()> {
        if !committed {
            sqlx::query("COMMIT").execute(&mut *self.conn).await?;
        }
        self.open.store(false, Ordering::Release);
        Ok(())
    }
}

impl Drop for WriteTx {
    /// Dropped before its commit (an error, or a cancelled request): a task rolls back
    /// at once, so the write lock is not held until the next writer comes. It queues for
    /// the connection like a writer; whoever comes first rolls back.
    fn drop(&mut self) {
        if !self.open.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (writer, open) = (self.writer.clone(), self.open.clone());
        runtime.spawn(async move {
            if let Some(conn) = writer.lock().await.as_mut()
                && let Err(error) = rollback_if_open(conn, &open).await
            {
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
    /// Commits; `committed` when the transaction's last statement ended with `COMMIT`
    /// (only a write's last event does).
    pub(super) async fn commit(self, committed: bool) -> Result<()> {
        match self {
            SqliteTx::Write(tx) => tx.commit(committed).await,
            SqliteTx::Snapshot(tx) => tx.commit().await,
        }
    }

    /// Whether the last statement may carry the `COMMIT`.
    pub(super) fn is_write(&self) -> bool {
        matches!(self, SqliteTx::Write(_))
    }
}

impl Deref for SqliteTx {
    type Target = SqliteConnection;
    fn deref(&self) -> &SqliteConnection {
        match self {
            SqliteTx::Write(tx) => &tx.conn,
            SqliteTx::Snapshot(tx) => tx,
        }
    }
}

impl DerefMut for SqliteTx {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        match self {
            SqliteTx::Write(tx) => &mut tx.conn,
            SqliteTx::Snapshot(tx) => tx,
        }
    }
}
