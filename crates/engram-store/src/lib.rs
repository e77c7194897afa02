//! The only place with SQL. One opaque [`Store`] over two backends: PostgreSQL
//! (production, several replicas) and SQLite (the embedded default, one process).
//! Nothing outside this crate can tell which one it holds; callers see methods that
//! take typed ids ([`TenantId`](crate::domain::ids::TenantId), `AgentId`, …) and
//! return domain types.
//!
//! Each statement is a whole SQL string (a `const` or a local), its binds listed in
//! order above it, written once where both dialects accept it (both take `$1`-style
//! parameters, and the column types decode to the same Rust types: UUIDs, RFC 3339
//! times, JSON). Two mechanisms, and only these, reach the backend:
//!
//! 1. **`with_pool!(self, pool => …)`** and **`with_tx!(tx, tx => …)`** run one body with
//!    the backend's pool or open transaction, and **`with_writer!(self, conn => …)`** one
//!    write statement of its own. The body is compiled once per backend, so it is
//!    type-checked against both. Reads go to the pool; writes never do (on SQLite they
//!    would race the write connection for the file lock).
//! 2. **`dialect(postgres, sqlite)`** picks what was written for each backend where the
//!    dialects really differ: full-text search, the job claim, the owner lock, the
//!    job wake-up.
//!
//! Transactions are opened only by [`Store::begin_write`] (SQLite: `BEGIN IMMEDIATE`, so a
//! writer waits for the lock instead of failing) and [`Store::begin_snapshot`]; clippy
//! refuses `Pool::begin` anywhere else (`clippy.toml`).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

use std::{str::FromStr, sync::Arc, time::Duration};

use sqlx::{
    PgPool, SqlitePool,
    postgres::{PgConnectOptions, PgPoolOptions},
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};

pub mod admin;
pub mod agents;
pub mod consent;
pub mod conversations;
pub mod event_waiters;
pub mod events;
pub mod facts;
pub mod forgetting;
pub mod gdpr;
pub mod import;
pub mod jobs;
pub mod messages;
mod pg_tx;
pub mod policy;
mod purge;
mod ranking;
pub mod summaries;
pub mod usage;
pub mod vectors;
pub mod webhooks;
mod word_index;
pub mod working_memory;
mod writer;

use pg_tx::PgTx;
use writer::SqliteTx;

use domain::owner::Owner;
/// The domain crate, under the name the server's layers know it by.
use engram_domain as domain;

/// One value per backend: a store's pool, or an open transaction. Private to `store/`,
/// so nothing else can tell the backends apart.
#[derive(Debug, Clone)]
enum Backend<P, S> {
    Postgres(P),
    Sqlite(S),
}

impl<P, S> Backend<P, S> {
    /// Picks what was written for this backend (the second mechanism in the module docs).
    fn pick<T>(&self, postgres: T, sqlite: T) -> T {
        match self {
            Backend::Postgres(_) => postgres,
            Backend::Sqlite(_) => sqlite,
        }
    }
}

/// Runs `$body` with `$pool` bound to the store's pool; the body is compiled once per
/// backend, so it is type-checked against both (the first mechanism in the module docs).
macro_rules! with_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match &$store.backend {
            $crate::Backend::Postgres($pool) => $body,
            $crate::Backend::Sqlite($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

/// One write statement of its own (housekeeping, a lease, an import's progress): on
/// PostgreSQL `$conn` is the pool (the statement is its own transaction, one round trip);
/// on SQLite it is the write connection, in line with every other writer. A pooled
/// SQLite connection would meet the writer in SQLite's busy handler, which polls the
/// lock with growing pauses and loses it to the writer's next group for as long as
/// writes keep coming: under the contract test's load such writes waited the whole busy
/// timeout and failed with "database is locked".
macro_rules! with_writer {
    ($store:expr, $conn:ident => $body:expr) => {
        match &$store.backend {
            $crate::Backend::Postgres($conn) => $body,
            $crate::Backend::Sqlite(_) => {
                let mut tx = $store.begin_write().await?;
                let out = $crate::with_tx!(tx, open => {
                    let $conn = &mut **open;
                    $body
                });
                tx.commit().await?;
                out
            }
        }
    };
}
pub(crate) use with_writer;

/// [`with_pool!`] for an open [`Tx`]: `$tx` is bound to the backend's open transaction
/// (`&mut`), which derefs to its connection, so statements run on `&mut **$tx`.
macro_rules! with_tx {
    ($open:expr, $tx:ident => $body:expr) => {
        match &mut $open.0 {
            $crate::Backend::Postgres($tx) => $body,
            $crate::Backend::Sqlite($tx) => $body,
        }
    };
}
pub(crate) use with_tx;

pub type Result<T> = std::result::Result<T, sqlx::Error>;

/// Puts the number of rows a read returned on its `statement` span (shown with
/// `RUST_LOG=engram::store=debug`; a no-op when the span is off).
fn counted<T>(rows: &[T]) {
    tracing::Span::current().record("rows", rows.len());
}

/// The longest a caller waits for a PostgreSQL connection before the store answers
/// "unavailable": under the 3 s in which a client should learn that the database is
/// down.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// A pooled PostgreSQL connection idle at least this long is pinged before use, as the
/// server (or a proxy) may have closed it meanwhile; one used more recently is not. sqlx
/// pings every connection when it goes back to the pool, and by default again when it
/// is taken: a third round trip for a one-statement request, and on a busy server the
/// connection was pinged microseconds before.
const PING_IDLE_AFTER: Duration = Duration::from_secs(1);

/// The longest a caller waits for the SQLite write lock (or a connection): the file
/// cannot be down, only busy with other writers, who each hold it for milliseconds;
/// past this the answer is "unavailable, retry".
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// SQLite's WAL as a checkpoint left it: the frames it holds and how many of them are
/// copied into the main file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wal {
    frames: i64,
    copied: i64,
}

impl Wal {
    /// Nothing was committed since `before` and every frame is copied: the next
    /// checkpoint has nothing to do until a write comes. (A write grows the WAL, or
    /// starts it over from its first frame, and either changes the figures.)
    pub fn unchanged_since(self, before: Option<Wal>) -> bool {
        before == Some(self) && self.copied == self.frames
    }
}

/// The database: PostgreSQL or the embedded SQLite file, chosen by the URL at start.
#[derive(Debug, Clone)]
pub struct Store {
    backend: Backend<PgPool, SqlitePool>,
    /// SQLite's one connection for write transactions (`Some` exactly when the backend
    /// is SQLite; PostgreSQL's writers lock rows, not the database). Write transactions
    /// queue for it in order instead of racing for the file lock in SQLite's busy
    /// handler, which sleeps and retries with growing pauses (long tails, lost
    /// throughput); see [`writer`] for what else it saves. Writes of one statement
    /// queue for it too ([`with_writer!`]).
    writer: Option<Arc<writer::Writer>>,
    /// The feed's long-polling readers in this process, by tenant: each commit that wrote
    /// events wakes its tenants' readers (other replicas' readers poll).
    event_waiters: Arc<event_waiters::EventWaiters>,
    /// Signalled after every commit of this process that queued webhook deliveries (and
    /// by a manual redelivery): the senders look at once instead of at their next poll.
    deliveries_queued: Arc<tokio::sync::Notify>,
    /// Whether a webhook subscription may exist (see [`Store::note_subscriptions`]).
    subscriptions: Arc<std::sync::atomic::AtomicBool>,
    /// An erasure committed since the last purge, so the pages may still hold the erased
    /// rows' old versions (see [`Store::purge_erasures`]). True at start, so that
    /// receipts a stopped process left undated are found.
    purge_owed: Arc<std::sync::atomic::AtomicBool>,
    /// The purge held back by readers, to try again (see [`purge::Round`]).
    purge_round: Arc<std::sync::Mutex<Option<purge::Round>>>,
    /// The key of the word index's owner tags ([`Store::with_word_key`]).
    word_key: Arc<word_index::WordKey>,
    /// Taken by each checkpoint and purge: the background checkpoint and a purge's never
    /// meet, as SQLite answers the second "busy" at once.
    checkpointing: Arc<tokio::sync::Mutex<()>>,
}

/// An open transaction, begun the way its backend needs by [`Store::begin_write`] or
/// [`Store::begin_snapshot`]: the only ways the store opens one (`Pool::begin` is a
/// disallowed method in `clippy.toml`), so a write can never start as a deferred SQLite
/// transaction that fails with SQLITE_BUSY instead of waiting. Dropped without
/// [`Tx::commit`], it rolls back.
///
/// The second field is the transaction's outbox ([`events::Outbox`]): the events of the
/// changes made in it, written by [`Tx::commit`] just before the commit itself.
///
/// The third is the key of the word index's owner tags, for the facts it writes.
pub struct Tx(Backend<PgTx, SqliteTx>, events::Outbox, Arc<word_index::WordKey>);

impl Tx {
    /// Writes the outbox's events, then commits; readers waiting for events are woken
    /// after the commit.
    pub async fn commit(mut self) -> Result<()> {
        let written = self.flush_events().await?;
        let Tx(tx, outbox, _) = self;
        match tx {
            Backend::Postgres(tx) => tx.commit().await?,
            Backend::Sqlite(tx) => tx.commit(written.ended).await?,
        }
        outbox.committed(written);
        Ok(())
    }

    /// Undoes the transaction's writes and returns once what it read is committed. A
    /// replay or a conflict found inside SQLite's group commit may be another writer's row
    /// of the same group: answered before the group's `COMMIT`, a read right after it would
    /// not find the row, and a failed group would make the answer untrue. PostgreSQL reads
    /// only what is committed, so dropping is enough there.
    pub async fn roll_back(self) -> Result<()> {
        let Tx(tx, _, _) = self;
        match tx {
            Backend::Postgres(tx) => drop(tx),
            Backend::Sqlite(tx) => tx.roll_back().await?,
        }
        Ok(())
    }

    /// Picks the statement written for this transaction's backend.
    fn dialect<T>(&self, postgres: T, sqlite: T) -> T {
        self.0.pick(postgres, sqlite)
    }

    /// How a statement may end the transaction's part of its group (`COMMIT`, or the
    /// release of its savepoint): SQLite writes, whose ends are statements of their own
    /// (see [`writer`]), not sqlx's.
    fn statement_ending(&self) -> Option<writer::Ending> {
        match &self.0 {
            Backend::Sqlite(tx) => tx.ending(),
            Backend::Postgres(_) => None,
        }
    }

    /// Tells idle workers of every replica that a job was queued. PostgreSQL delivers
    /// the NOTIFY only at commit, so no worker looks before the job is visible; SQLite
    /// has one process, whose workers are woken in-process after commit instead.
    async fn wake_workers(&mut self) -> Result<()> {
        if let Some(sql) = self.dialect(Some("SELECT pg_notify('engram_jobs', '')"), None) {
            with_tx!(self, tx => sqlx::query(sql).execute(&mut **tx).await.map(drop))?;
        }
        Ok(())
    }
}

/// The PostgreSQL channel that announces queued jobs (the NOTIFY above names it too).
const JOBS_CHANNEL: &str = "engram_jobs";

/// Wake-ups from every replica that queued a job (PostgreSQL LISTEN).
pub struct JobNotifications(sqlx::postgres::PgListener);

impl JobNotifications {
    /// Waits for the next notification; an error means the connection was lost.
    pub async fn recv(&mut self) -> Result<()> {
        self.0.recv().await.map(drop)
    }
}

impl Store {
    /// Connects to `postgres://…` or `sqlite://…` (creating the SQLite file and its
    /// directory when missing). A connection or a busy database is waited for a few
    /// seconds at most, so a dead database is a quick 503 rather than a hang;
    /// PostgreSQL statements stop after `statement_timeout`.
    pub async fn connect(url: &str, max_connections: u32, statement_timeout: Duration) -> anyhow::Result<Store> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let millis = statement_timeout.as_millis().to_string();
            let options = PgConnectOptions::from_str(url)
                .map_err(|e| anyhow::anyhow!("invalid DATABASE_URL: {}", redact(&e.to_string(), url)))?
                .options([
                    ("statement_timeout", millis.as_str()),
                    // A transaction left open by a stuck client must not hold its locks.
                    ("idle_in_transaction_session_timeout", "60000"),
                    // Every statement here reads or writes a few rows by index, in well under
                    // a millisecond; compiling one costs far more. PostgreSQL compiles when a
                    // plan's estimate passes `jit_above_cost`, and a search's estimate grows
                    // with the table (it cannot size a word it has not seen): at a million
                    // facts each search compiled for 15 ms to run for 0.5.
                    ("jit", "off"),
                ]);
            let pool = PgPoolOptions::new()
                // One beyond the size asked for: a server's job listener (`job_notifications`)
                // holds a pooled connection for its life. Without it a pool of one served
                // nothing else.
                .max_connections(max_connections + 1)
                .acquire_timeout(ACQUIRE_TIMEOUT)
                .test_before_acquire(false)
                .before_acquire(|conn, meta| {
                    Box::pin(async move {
                        if meta.idle_for >= PING_IDLE_AFTER {
                            sqlx::Connection::ping(conn).await?;
                        }
                        Ok(true)
                    })
                })
                .connect_with(options)
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to PostgreSQL: {}", redact(&e.to_string(), url)))?;
            Ok(Store::new(Backend::Postgres(pool), None))
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                // Deleted rows are overwritten with zeros rather than left in free space:
                // an erasure must leave none of the person's words in the file.
                .pragma("secure_delete", "ON")
                // The WAL is checkpointed in the background (`Store::checkpoint_wal`); SQLite's
                // own checkpoint, in the commit that grows the WAL past this many pages
                // (40 MiB), is only the backstop.
                .pragma("wal_autocheckpoint", "10000")
                .busy_timeout(SQLITE_BUSY_TIMEOUT);
            if let Some(dir) = options.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("cannot create directory {}: {e}", dir.display()))?;
            }
            // An in-process connection cannot be lost: sqlx's default ping before each use
            // (see `PING_IDLE_AFTER`) would buy nothing.
            let pool = SqlitePoolOptions::new()
                .max_connections(max_connections.max(2))
                .acquire_timeout(SQLITE_BUSY_TIMEOUT)
                .test_before_acquire(false)
                .connect_with(options.clone())
                .await?;
            let writer = writer::Writer::connect(&options, SQLITE_BUSY_TIMEOUT).await?;
            Ok(Store::new(Backend::Sqlite(pool), Some(Arc::new(writer))))
        } else {
            anyhow::bail!("DATABASE_URL must start with postgres:// or sqlite:")
        }
    }

    fn new(backend: Backend<PgPool, SqlitePool>, writer: Option<Arc<writer::Writer>>) -> Store {
        Store {
            backend,
            writer,
            event_waiters: Arc::default(),
            deliveries_queued: Arc::default(),
            subscriptions: Arc::default(),
            purge_owed: Arc::new(true.into()),
            purge_round: Arc::default(),
            word_key: Arc::new(word_index::WordKey::derive(&[])),
            checkpointing: Arc::default(),
        }
    }

    /// Tags the word index under a key derived from `secret` (the receipt key), which
    /// every process writing to this database must share (see
    /// [`Store::key_word_index`]). A store opened without one (tests, benchmarks on
    /// their own database) tags under an empty key.
    pub fn with_word_key(mut self, secret: &[u8]) -> Store {
        self.word_key = Arc::new(word_index::WordKey::derive(secret));
        self
    }

    pub fn backend(&self) -> &'static str {
        self.dialect("postgres", "sqlite")
    }

    /// True for the embedded SQLite database (one process, no replicas).
    pub fn is_embedded(&self) -> bool {
        self.dialect(false, true)
    }

    /// Picks what was written for this store's backend.
    fn dialect<T>(&self, postgres: T, sqlite: T) -> T {
        self.backend.pick(postgres, sqlite)
    }

    /// Opens a write transaction. SQLite needs `BEGIN IMMEDIATE`: a deferred
    /// transaction that reads and then writes fails at once with SQLITE_BUSY instead of
    /// waiting.
    pub async fn begin_write(&self) -> Result<Tx> {
        self.begin_write_locking(None).await
    }

    /// [`Store::begin_write`], and with `owner` the transaction serialises the writers of
    /// that owner's memory (see [`Tx::lock_owner`]): on PostgreSQL its advisory lock is
    /// taken in the same round trip as the `BEGIN`; SQLite's `BEGIN IMMEDIATE` already
    /// serialises every writer.
    async fn begin_write_locking(&self, owner: Option<Owner<'_>>) -> Result<Tx> {
        Ok(match (&self.backend, &self.writer) {
            (Backend::Postgres(pool), _) => {
                Tx(Backend::Postgres(PgTx::begin(pool, "BEGIN", owner).await?), self.outbox(), self.word_key.clone())
            }
            (Backend::Sqlite(_), Some(writer)) => {
                Tx(Backend::Sqlite(SqliteTx::Write(writer.begin().await?)), self.outbox(), self.word_key.clone())
            }
            (Backend::Sqlite(_), None) => return Err(sqlx::Error::PoolClosed),
        })
    }

    /// Opens a read transaction whose statements all see one snapshot (PostgreSQL
    /// REPEATABLE READ; a SQLite read transaction is one snapshot in WAL mode).
    #[allow(clippy::disallowed_methods)] // SQLite's snapshot, the one transaction sqlx begins
    pub async fn begin_snapshot(&self) -> Result<Tx> {
        let tx = match &self.backend {
            Backend::Postgres(pool) => {
                Backend::Postgres(PgTx::begin(pool, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", None).await?)
            }
            Backend::Sqlite(pool) => Backend::Sqlite(SqliteTx::Snapshot(pool.begin().await?)),
        };
        Ok(Tx(tx, self.outbox(), self.word_key.clone()))
    }

    /// Subscribes to job wake-ups from every replica; `None` on SQLite, whose only
    /// process wakes its workers in memory.
    pub async fn job_notifications(&self) -> Result<Option<JobNotifications>> {
        let Backend::Postgres(pool) = &self.backend else { return Ok(None) };
        let mut listener = sqlx::postgres::PgListener::connect_with(pool).await?;
        listener.listen(JOBS_CHANNEL).await?;
        Ok(Some(JobNotifications(listener)))
    }

    /// Applies the embedded migrations of this backend.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        let migrator = self.dialect(sqlx::migrate!("migrations/postgres"), sqlx::migrate!("migrations/sqlite"));
        with_pool!(self, pool => migrator.run(pool).await)?;
        self.index_facts_without_terms().await?;
        self.note_subscriptions().await?;
        Ok(())
    }

    /// True when the database answers and every embedded migration is applied.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "ready", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn ready(&self) -> Result<bool> {
        let migrator = self.dialect(sqlx::migrate!("migrations/postgres"), sqlx::migrate!("migrations/sqlite"));
        let expected = migrator.iter().count();
        let applied: i64 = with_pool!(self, pool => {
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success").fetch_one(pool).await?
        });
        Ok(usize::try_from(applied).unwrap_or(0) >= expected)
    }

    /// Gives the query planner, after a bulk import, the statistics the server would have
    /// by then. PostgreSQL's autovacuum gathers them by itself in production, so the
    /// benchmarks and tests that load data gather them at once (`ANALYZE`). SQLite:
    /// nothing, as Engram never gathers them there, and `ANALYZE` would make a database
    /// the server never runs with: its STAT4 samples (the bundled SQLite has STAT4) make
    /// SQLite plan again, at every run, each statement binding a sampled index's column,
    /// FTS5's own lookup of a term in each segment of its index among them, which doubled
    /// the time of a 20-word search.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "refresh_statistics", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn refresh_statistics(&self) -> Result<()> {
        match &self.backend {
            Backend::Postgres(pool) => sqlx::query("ANALYZE").execute(pool).await.map(drop),
            Backend::Sqlite(_) => Ok(()),
        }
    }

    /// SQLite: copies the WAL's committed pages into the main file without waiting for
    /// or blocking anyone (a passive checkpoint), on a reader connection; the WAL starts
    /// over once every page is copied. Left to SQLite, the checkpoint runs inside the
    /// commit that fills the WAL, and every writer queued behind it waits (see
    /// `worker::checkpoint`). Nothing to do on PostgreSQL.
    /// Returns the WAL's state after it (`None` on PostgreSQL), from which the
    /// checkpointer tells a busy database from an idle one ([`Wal::unchanged_since`]).
    pub async fn checkpoint_wal(&self) -> Result<Option<Wal>> {
        let Backend::Sqlite(pool) = &self.backend else { return Ok(None) };
        let _checkpointing = self.checkpointing.lock().await;
        let (_busy, frames, copied): (i64, i64, i64) =
            sqlx::query_as("PRAGMA wal_checkpoint(PASSIVE)").fetch_one(pool).await?;
        Ok(Some(Wal { frames, copied }))
    }

    pub async fn close(&self) {
        with_pool!(self, pool => pool.close().await);
        if let Some(writer) = &self.writer {
            writer.close().await;
        }
    }
}

/// Keeps a connection URL's password out of an error message.
fn redact(message: &str, url: &str) -> String {
    match url.split_once("://").and_then(|(_, rest)| rest.split_once('@')).map(|(creds, _)| creds) {
        Some(creds) if !creds.is_empty() => message.replace(creds, "***"),
        _ => message.to_owned(),
    }
}

/// The current time at the precision both databases keep (PostgreSQL stores
/// microseconds), so a value returned before and after a round trip is the same.
pub fn now() -> chrono::DateTime<chrono::Utc> {
    crate::domain::fact::stored_precision(chrono::Utc::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A store on an in-memory SQLite with every migration.
    async fn in_memory() -> Store {
        let store = Store::connect("sqlite::memory:", 1, Duration::from_secs(5)).await.expect("in-memory SQLite");
        store.migrate().await.expect("migrations");
        store
    }

    /// The opcodes SQLite compiles `sql` to, on an in-memory store with every migration:
    /// tests read them to hold a hot statement to a plan (no temporary B-tree, say).
    pub(super) async fn sqlite_opcodes(sql: &str) -> Vec<String> {
        let store = in_memory().await;
        let Backend::Sqlite(pool) = &store.backend else { panic!("sqlite::memory: opened {}", store.backend()) };
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!("EXPLAIN {sql}"))).fetch_all(pool).await.expect("explain");
        rows.iter().map(|row| sqlx::Row::try_get::<String, _>(row, "opcode").expect("opcode")).collect()
    }

    /// The steps of SQLite's `EXPLAIN QUERY PLAN` of `sql` (their details: `SEARCH t USING
    /// INDEX i (a=? AND b>?)`…), on an in-memory store with every migration.
    pub(super) async fn sqlite_plan(sql: &str) -> Vec<String> {
        let store = in_memory().await;
        let Backend::Sqlite(pool) = &store.backend else { panic!("sqlite::memory: opened {}", store.backend()) };
        let rows: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                .fetch_all(pool)
                .await
                .expect("explain");
        rows.into_iter().map(|(_, _, _, detail)| detail).collect()
    }

    /// One number means one change of the schema in both dialects (migrations/README.md):
    /// the two folders hold the same file names.
    #[test]
    fn both_dialects_share_their_migrations() {
        let names = |dialect: &str| {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations").join(dialect);
            let mut names: Vec<String> = std::fs::read_dir(dir)
                .expect("migrations folder")
                .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
                .filter(|name| name.ends_with(".sql"))
                .collect();
            names.sort();
            names
        };
        let (postgres, sqlite) = (names("postgres"), names("sqlite"));
        assert!(postgres.len() >= 8, "{postgres:?}");
        assert_eq!(postgres, sqlite);
    }

    /// The flags of `.cargo/config.toml` reached the bundled SQLite: no page cache shared
    /// by every connection behind one mutex, no allocation statistics behind another.
    #[tokio::test]
    async fn a_checkpoint_tells_a_wal_with_new_commits_from_an_idle_one() {
        let path = std::env::temp_dir().join(format!("engram-wal-{}.db", uuid::Uuid::now_v7()));
        let url = format!("sqlite://{}", path.display());
        let store = Store::connect(&url, 2, Duration::from_secs(5)).await.expect("SQLite file");
        let start = store.checkpoint_wal().await.expect("checkpoint");
        let mut tx = store.begin_write().await.expect("begin");
        with_tx!(tx, tx => sqlx::query("CREATE TABLE t (x)").execute(&mut **tx).await.map(drop).expect("write"));
        tx.commit().await.expect("commit");
        let written = store.checkpoint_wal().await.expect("checkpoint").expect("a WAL");
        assert!(!written.unchanged_since(start), "a commit since: {start:?} -> {written:?}");
        let idle = store.checkpoint_wal().await.expect("checkpoint").expect("a WAL");
        assert!(idle.unchanged_since(Some(written)), "nothing since: {written:?} -> {idle:?}");
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    /// A store on a new SQLite file with one table, `t (x)`, and the file's path.
    async fn store_with_a_table() -> (Store, std::path::PathBuf) {
        let path = std::env::temp_dir().join(format!("engram-group-{}.db", uuid::Uuid::now_v7()));
        let store = Store::connect(&format!("sqlite://{}", path.display()), 2, Duration::from_secs(5))
            .await
            .expect("SQLite file");
        let mut tx = store.begin_write().await.expect("begin");
        with_tx!(tx, tx => sqlx::query("CREATE TABLE t (x)").execute(&mut **tx).await.map(drop).expect("create"));
        tx.commit().await.expect("commit");
        (store, path)
    }

    async fn insert(tx: &mut Tx, x: i64) {
        with_tx!(tx, tx => sqlx::query("INSERT INTO t VALUES (?)").bind(x).execute(&mut **tx).await.map(drop))
            .expect("insert");
    }

    /// What another connection sees committed in `t`.
    async fn committed(store: &Store) -> Vec<i64> {
        let Backend::Sqlite(pool) = &store.backend else { panic!("a SQLite store") };
        sqlx::query_scalar("SELECT x FROM t ORDER BY x").fetch_all(pool).await.expect("read")
    }

    async fn remove(store: Store, path: std::path::PathBuf) {
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    /// A first writer that has inserted 1 and holds the write connection.
    async fn first_holding_one(store: &Store) -> Tx {
        let mut first = store.begin_write().await.expect("begin");
        insert(&mut first, 1).await;
        first
    }

    /// Starts a writer that inserts `x` and commits once `go` fires (or at once).
    fn writer(
        store: &Store,
        x: i64,
        go: Option<tokio::sync::oneshot::Receiver<()>>,
    ) -> tokio::task::JoinHandle<Result<()>> {
        let store = store.clone();
        tokio::spawn(async move {
            let mut tx = store.begin_write().await?;
            insert(&mut tx, x).await;
            if let Some(go) = go {
                let _ = go.await;
            }
            tx.commit().await
        })
    }

    /// A first writer that inserts 1 and commits (the task returned first) while a second
    /// one, in line behind it, inserts 2 and holds the connection until `go` fires.
    async fn a_group_of_two(
        store: &Store,
    ) -> (tokio::task::JoinHandle<Result<()>>, tokio::task::JoinHandle<Result<()>>, tokio::sync::oneshot::Sender<()>)
    {
        let first = first_holding_one(store).await;
        let (go, wait) = tokio::sync::oneshot::channel();
        let second = writer(store, 2, Some(wait));
        tokio::time::sleep(Duration::from_millis(100)).await;
        (tokio::spawn(first.commit()), second, go)
    }

    /// A writer that finishes while another waits in line does not commit alone: its
    /// commit returns, and its row is seen, only when the group it leaves open for the
    /// next writer commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writers_in_line_commit_as_one_group() {
        let (store, path) = store_with_a_table().await;
        let (first, second, go) = a_group_of_two(&store).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(!first.is_finished(), "the first writer's commit waits for its group");
        assert_eq!(committed(&store).await, Vec::<i64>::new(), "nothing is committed before the group");
        go.send(()).expect("the second writer waits");
        first.await.expect("first").expect("the first writer's commit");
        second.await.expect("second").expect("the second writer's commit");
        assert_eq!(committed(&store).await, [1, 2]);
        remove(store, path).await;
    }

    /// A writer that fails inside a group takes its own changes with it and nobody
    /// else's: the writers before and after it in the group commit.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_that_fails_in_a_group_takes_only_its_own_changes() {
        let (store, path) = store_with_a_table().await;
        let first = first_holding_one(&store).await;
        let failing = tokio::spawn({
            let store = store.clone();
            async move {
                let mut tx = store.begin_write().await.expect("begin");
                insert(&mut tx, 2).await;
                // Dropped without its commit, as a request whose next statement failed.
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let third = writer(&store, 3, None);
        tokio::time::sleep(Duration::from_millis(100)).await;
        first.commit().await.expect("the first writer's commit");
        failing.await.expect("the failing writer");
        third.await.expect("third").expect("the third writer's commit");
        assert_eq!(committed(&store).await, [1, 3]);
        remove(store, path).await;
    }

    /// A writer whose request is cancelled after its part, while it waits for the group,
    /// is committed with the group, and the write lock is free after it.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_writer_cancelled_while_its_group_ends_is_committed_with_it() {
        let (store, path) = store_with_a_table().await;
        let (first, second, go) = a_group_of_two(&store).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        first.abort();
        go.send(()).expect("the second writer waits");
        second.await.expect("second").expect("the second writer's commit");
        assert_eq!(committed(&store).await, [1, 2]);
        let next = tokio::time::timeout(Duration::from_secs(2), writer(&store, 3, None)).await;
        assert!(matches!(next, Ok(Ok(Ok(())))), "a writer after them: {next:?}");
        assert_eq!(committed(&store).await, [1, 2, 3]);
        remove(store, path).await;
    }

    /// A write of its own and the `TRUNCATE` checkpoint after an erasure wait in line
    /// with the writers and take their turn in order, before a writer who came after
    /// them. From a pooled connection they polled SQLite's file lock in its busy handler
    /// and lost it to every writer in line, as the lock passes from one to the next
    /// within a group: under steady writes they waited the whole busy timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn writes_of_their_own_and_the_erasure_checkpoint_wait_in_line() {
        let (store, path) = store_with_a_table().await;
        let first = first_holding_one(&store).await;
        let alone = tokio::spawn({
            let store = store.clone();
            async move {
                let deleted: Result<u64> = async {
                    Ok(with_writer!(store, conn => sqlx::query("DELETE FROM t WHERE x = 1").execute(conn).await?.rows_affected()))
                }
                .await;
                deleted
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let truncate = tokio::spawn({
            let store = store.clone();
            async move { store.truncate_wal().await }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        // The last writer holds the file until `go` fires.
        let (go, wait) = tokio::sync::oneshot::channel();
        let last = writer(&store, 2, Some(wait));
        tokio::time::sleep(Duration::from_millis(100)).await;
        let first = tokio::spawn(first.commit());
        let alone = tokio::time::timeout(Duration::from_secs(3), alone).await;
        let truncated = tokio::time::timeout(Duration::from_secs(3), truncate).await;
        go.send(()).expect("the last writer waits");
        first.await.expect("first").expect("the first writer's commit");
        last.await.expect("last").expect("the last writer's commit");
        assert!(matches!(alone, Ok(Ok(Ok(1)))), "the write of its own, before the last writer: {alone:?}");
        assert!(matches!(truncated, Ok(Ok(Ok(true)))), "the checkpoint, before the last writer: {truncated:?}");
        assert_eq!(committed(&store).await, [2]);
        remove(store, path).await;
    }

    /// A reader on an older snapshot holds the truncation after an erasure back: it
    /// gives up after its short wait, and a later try empties the WAL once the reader is
    /// gone (the receipts' side is `tests/api/erasure_files.rs`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_truncation_held_back_by_a_reader_succeeds_once_it_is_gone() {
        let (store, path) = store_with_a_table().await;
        let wal = || std::fs::metadata(format!("{}-wal", path.display())).map(|m| m.len()).unwrap_or(0);
        let mut reader = store.begin_snapshot().await.expect("snapshot");
        let seen: i64 = with_tx!(reader, tx => sqlx::query_scalar("SELECT count(*) FROM t").fetch_one(&mut **tx).await)
            .expect("read");
        assert_eq!(seen, 0);
        writer(&store, 1, None).await.expect("writer").expect("commit");
        let held = store.truncate_wal().await;
        assert!(matches!(held, Ok(false)), "held back by the reader: {held:?}");
        assert!(wal() > 0, "the WAL still holds the write");
        drop(reader);
        let done = store.truncate_wal().await;
        assert!(matches!(done, Ok(true)), "the later try: {done:?}");
        assert_eq!(wal(), 0, "the WAL is emptied");
        remove(store, path).await;
    }

    #[tokio::test]
    async fn sqlite_is_built_with_the_flags_of_cargo_config() {
        let store = Store::connect("sqlite::memory:", 2, Duration::from_secs(5)).await.expect("in-memory SQLite");
        let Backend::Sqlite(pool) = &store.backend else { panic!("sqlite::memory: opened {}", store.backend()) };
        let options: Vec<String> =
            sqlx::query_scalar("PRAGMA compile_options").fetch_all(pool).await.expect("compile options");
        assert!(options.iter().any(|o| o == "DEFAULT_MEMSTATUS=0"), "{options:?}");
        assert!(!options.iter().any(|o| o == "ENABLE_MEMORY_MANAGEMENT"), "{options:?}");
        assert!(options.iter().any(|o| o == "ENABLE_QPSG"), "{options:?}");
    }
}
