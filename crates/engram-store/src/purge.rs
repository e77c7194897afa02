//! After an erasure has committed, its rows are gone from every query, but their old
//! versions may still sit in the database's pages: the purge removes them, and dates the
//! receipts it covered (`erasure_receipts.purged_at`).
//!
//! - SQLite: every connection runs with `secure_delete` (deleted cells are zeroed) and
//!   the full-text index with FTS5 `secure-delete`, so the main file holds nothing once
//!   the WAL's pages are copied into it; a `TRUNCATE` checkpoint, in line with the
//!   writers, does that and empties the WAL, whose frames hold the old pages. A reader
//!   on an older snapshot holds it back, and the purge is tried again later.
//! - PostgreSQL: a `VACUUM` of the tables an erasure deletes from removes the dead row
//!   versions from their pages and indexes, once no session holds a snapshot from
//!   before the erasure committed (it could still see them, and VACUUM would keep them);
//!   then the word index, whose keys a vacuum keeps, is rebuilt. PostgreSQL does not
//!   zero the space they leave: docs/api.md says what remains.

use std::{sync::atomic::Ordering, time::Duration};

use sqlx::Connection;
use uuid::Uuid;

use super::{Backend, Result, Store, with_pool, with_tx};

/// How long the `TRUNCATE` checkpoint waits for readers on older snapshots; every writer
/// waits behind it as long (see `Writer::checkpoint_truncate`). Reads last milliseconds;
/// a snapshot held longer (an export streamed to a slow client) only delays the purge to
/// a later try.
const TRUNCATE_READERS_WAIT: Duration = Duration::from_millis(250);

/// Most receipts one purge dates: the rest stay owed and the next purge takes them.
const RECEIPTS_PER_PURGE: i64 = 1000;

/// The tables an erasure deletes from, directly or by cascade (`Store::erase_user`).
const ERASED_TABLES: &str = "VACUUM user_consents, conversations, messages, idempotency_keys, facts, \
     fact_vectors, fact_versions, jobs, working_memories, events, webhook_deliveries, webhook_attempts, import_ids";

/// The indexes a vacuum leaves holding erased words, rebuilt after it. A GIN index never
/// drops a key, only its postings: once the erased facts are vacuumed, the word index
/// (`facts_words`) still holds each of the person's terms (their owner's tag and a stem)
/// as a key with no fact, in a live page. `CONCURRENTLY` builds the new index beside the
/// old one without blocking writes, and the old file is dropped.
const REBUILT_INDEXES: &str = "REINDEX INDEX CONCURRENTLY facts_words";

/// How long the vacuum may run: its own connection is not held to the requests' statement
/// timeout, as a vacuum of large tables reads their indexes whole.
const VACUUM_TIMEOUT: Duration = Duration::from_secs(600);

impl Store {
    /// Notes that an erasure committed: the next [`Store::purge_erasures`] has work.
    pub(super) fn owe_purge(&self) {
        self.purge_owed.store(true, Ordering::Release);
    }

    /// Purges the old versions of every erasure committed so far (see the module doc)
    /// and dates their receipts. True when done, or when nothing was owed; false when a
    /// reader held it back, and it stays owed: the purge worker (`worker::purge`) tries
    /// again.
    pub async fn purge_erasures(&self) -> Result<bool> {
        let _purging = self.checkpointing.lock().await;
        // Cleared before the receipts are read: an erasure that commits meanwhile sets it again.
        if !self.purge_owed.swap(false, Ordering::AcqRel) {
            return Ok(true);
        }
        let purged = self.purge_owed_receipts().await;
        if !matches!(purged, Ok(true)) {
            self.owe_purge();
        }
        purged
    }

    async fn purge_owed_receipts(&self) -> Result<bool> {
        let taken = self.purge_round.lock().map_err(|_| poisoned())?.take();
        let round = match taken {
            Some(round) => round,
            None => {
                let sql = "SELECT id FROM erasure_receipts WHERE purged_at IS NULL ORDER BY id LIMIT $1";
                // Uses erasure_receipts_unpurged. Every receipt read here has committed.
                let receipts: Vec<Uuid> =
                    with_pool!(self, pool => sqlx::query_scalar(sql).bind(RECEIPTS_PER_PURGE).fetch_all(pool).await?);
                if receipts.is_empty() {
                    return Ok(true);
                }
                Round { receipts, horizon: self.horizon().await? }
            }
        };
        let done = match (&self.backend, &self.writer, round.horizon) {
            (Backend::Postgres(pool), _, Some(horizon)) => vacuum_after(pool, horizon).await?,
            (Backend::Sqlite(_), Some(_), _) => self.truncate_wal().await?,
            _ => return Err(sqlx::Error::PoolClosed),
        };
        if !done {
            *self.purge_round.lock().map_err(|_| poisoned())? = Some(round);
            return Ok(false);
        }
        let now = super::now();
        let mut tx = self.begin_write().await?;
        for id in &round.receipts {
            with_tx!(tx, tx => {
                sqlx::query("UPDATE erasure_receipts SET purged_at = $2 WHERE id = $1 AND purged_at IS NULL")
                    .bind(id)
                    .bind(now)
                    .execute(&mut **tx)
                    .await
                    .map(drop)?
            });
        }
        tx.commit().await?;
        // Erasures that committed after the round began, or past its limit, are looked
        // for once more.
        self.owe_purge();
        Ok(true)
    }

    /// SQLite: copies every committed page into the main file and empties the WAL, in
    /// line with the writers; false when a reader on an older snapshot held it back past
    /// [`TRUNCATE_READERS_WAIT`].
    pub(super) async fn truncate_wal(&self) -> Result<bool> {
        let Some(writer) = &self.writer else { return Ok(true) };
        Ok(matches!(writer.checkpoint_truncate(TRUNCATE_READERS_WAIT).await?, (0, _, _)))
    }

    /// PostgreSQL: the next transaction id to be given out. Every erasure read as owed
    /// committed with a lower one; a snapshot whose oldest running transaction is at or
    /// past it sees them all. `None` on SQLite.
    async fn horizon(&self) -> Result<Option<i64>> {
        let Backend::Postgres(pool) = &self.backend else { return Ok(None) };
        let sql = "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint";
        Ok(Some(sqlx::query_scalar(sql).fetch_one(pool).await?))
    }
}

/// The receipts a purge covers, read when it was first tried, and the horizon the
/// readers must pass: kept while readers hold it back, so that steady short transactions,
/// always some running, never postpone it for ever.
#[derive(Debug)]
pub(super) struct Round {
    receipts: Vec<Uuid>,
    horizon: Option<i64>,
}

fn poisoned() -> sqlx::Error {
    sqlx::Error::Protocol("the purge's state was poisoned by a panic".into())
}

/// PostgreSQL: vacuums the erased tables, unless a session of this database still holds
/// a snapshot older than `horizon` ([`Store::horizon`]): it may see the erased rows, and
/// VACUUM keeps every version a snapshot may see. False when one does. (Autovacuum's
/// own snapshot holds nothing back; sessions of other roles are seen only with
/// `pg_read_all_stats`.)
async fn vacuum_after(pool: &sqlx::PgPool, horizon: i64) -> Result<bool> {
    let older: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() \
           AND backend_type <> 'autovacuum worker' \
           AND backend_xmin IS NOT NULL AND age(backend_xmin) > age($1::text::xid8::xid)",
    )
    .bind(horizon)
    .fetch_one(pool)
    .await?;
    if older > 0 {
        return Ok(false);
    }
    let options =
        (*pool.connect_options()).clone().options([("statement_timeout", VACUUM_TIMEOUT.as_millis().to_string())]);
    let mut conn = sqlx::PgConnection::connect_with(&options).await?;
    let mut purged = sqlx::raw_sql(ERASED_TABLES).execute(&mut conn).await.map(drop);
    if purged.is_ok() {
        purged = sqlx::raw_sql(REBUILT_INDEXES).execute(&mut conn).await.map(drop);
    }
    conn.close().await?;
    purged.map(|()| true)
}
