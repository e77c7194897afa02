//! The only place with SQL. One `Store` with two backends: PostgreSQL (production,
//! several replicas) and SQLite (the embedded default, one process).
//!
//! Most statements are written once and run on either backend through [`with_pool!`]:
//! both accept `$1`-style parameters, and the column types are chosen so the same Rust
//! types decode on both (UUIDs, RFC 3339 times, JSON). Where the dialects really differ
//! (full-text search, job claiming, notifications) each backend has its own statement.

use std::{str::FromStr, time::Duration};

use sqlx::{
    PgPool, SqlitePool, Transaction,
    postgres::PgPoolOptions,
    sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous},
};

pub mod agents;
pub mod consent;
pub mod conversations;
pub mod extraction;
pub mod facts;
pub mod job_queue;
pub mod jobs;
pub mod messages;
pub mod rgpd;

/// Runs `$body` with `$pool` bound to whichever backend's pool the store holds; the body
/// is compiled once per backend, so it is type-checked against both.
macro_rules! with_pool {
    ($store:expr, $pool:ident => $body:expr) => {
        match $store {
            $crate::store::Store::Postgres($pool) => $body,
            $crate::store::Store::Sqlite($pool) => $body,
        }
    };
}
pub(crate) use with_pool;

pub type Result<T> = std::result::Result<T, sqlx::Error>;

#[derive(Debug, Clone)]
pub enum Store {
    Postgres(PgPool),
    Sqlite(SqlitePool),
}

/// The two kinds of transaction the store opens, each begun the way its backend needs.
pub(crate) trait Transactions {
    type Db: sqlx::Database;

    /// Opens a write transaction. SQLite needs `BEGIN IMMEDIATE`: a deferred
    /// transaction that reads and then writes fails at once with SQLITE_BUSY instead of
    /// waiting.
    async fn begin_write(&self) -> Result<Transaction<'static, Self::Db>>;

    /// Opens a read transaction whose statements all see one snapshot (PostgreSQL
    /// REPEATABLE READ; a SQLite read transaction is one snapshot in WAL mode).
    async fn begin_snapshot(&self) -> Result<Transaction<'static, Self::Db>>;
}

impl Transactions for PgPool {
    type Db = sqlx::Postgres;
    async fn begin_write(&self) -> Result<Transaction<'static, sqlx::Postgres>> {
        self.begin().await
    }

    async fn begin_snapshot(&self) -> Result<Transaction<'static, sqlx::Postgres>> {
        self.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY").await
    }
}

impl Transactions for SqlitePool {
    type Db = sqlx::Sqlite;
    async fn begin_write(&self) -> Result<Transaction<'static, sqlx::Sqlite>> {
        self.begin_with("BEGIN IMMEDIATE").await
    }

    async fn begin_snapshot(&self) -> Result<Transaction<'static, sqlx::Sqlite>> {
        self.begin().await
    }
}

impl Store {
    /// Connects to `postgres://…` or `sqlite://…` (creating the SQLite file and its
    /// directory when missing).
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<Store> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            let pool = PgPoolOptions::new()
                .max_connections(max_connections)
                .acquire_timeout(Duration::from_secs(5))
                .connect(url)
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to PostgreSQL: {}", redact(&e.to_string(), url)))?;
            Ok(Store::Postgres(pool))
        } else if url.starts_with("sqlite:") {
            let options = SqliteConnectOptions::from_str(url)?
                .create_if_missing(true)
                .journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .busy_timeout(Duration::from_secs(30));
            if let Some(dir) = options.get_filename().parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| anyhow::anyhow!("cannot create directory {}: {e}", dir.display()))?;
            }
            let pool = SqlitePoolOptions::new()
                .max_connections(max_connections.max(2))
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(options)
                .await?;
            Ok(Store::Sqlite(pool))
        } else {
            anyhow::bail!("DATABASE_URL must start with postgres:// or sqlite:")
        }
    }

    pub fn backend(&self) -> &'static str {
        match self {
            Store::Postgres(_) => "postgres",
            Store::Sqlite(_) => "sqlite",
        }
    }

    /// Applies the embedded migrations of this backend.
    pub async fn migrate(&self) -> anyhow::Result<()> {
        match self {
            Store::Postgres(pool) => sqlx::migrate!("migrations/postgres").run(pool).await?,
            Store::Sqlite(pool) => sqlx::migrate!("migrations/sqlite").run(pool).await?,
        }
        Ok(())
    }

    /// True when the database answers and every embedded migration is applied.
    pub async fn ready(&self) -> Result<bool> {
        let expected = match self {
            Store::Postgres(_) => sqlx::migrate!("migrations/postgres").iter().count(),
            Store::Sqlite(_) => sqlx::migrate!("migrations/sqlite").iter().count(),
        };
        let applied: i64 = with_pool!(self, pool => {
            sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations WHERE success").fetch_one(pool).await?
        });
        Ok(usize::try_from(applied).unwrap_or(0) >= expected)
    }

    pub async fn close(&self) {
        with_pool!(self, pool => pool.close().await)
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
    chrono::SubsecRound::trunc_subsecs(chrono::Utc::now(), 6)
}
