//! Facts about end users, scoped to one tenant, agent and user (an [`Owner`]): list,
//! remember (deduplicated by the normalised text, which is the table's unique key),
//! full-text search, update, delete, and the reads of the memory context.
//!
//! Search is the one place where the backends need different SQL: PostgreSQL compares
//! the lexemes of `to_tsvector('english', q)` with each fact's stored `search` vector;
//! SQLite runs each query term (made by [`SearchQuery::fts5_terms`]) through the
//! `facts_fts` FTS5 index. Both rank by the number of distinct query words a fact
//! matches, then by recency, as the contract says; `relevance` is that number over the
//! number of query words, so it means the same on both.
//!
//! Every statement filters on `tenant_id, agent_id, external_ref` (index
//! `facts_owner_id`), so one agent never reads another's facts and another tenant's
//! fact id is simply not found.

use std::future::Future;

use chrono::{DateTime, Utc};
use sqlx::{Transaction, types::Json};
use uuid::Uuid;

use super::{Result, Store, Transactions, with_pool};
use crate::domain::{
    fact::{Fact, FactChanges, NewFact, Origin, Source},
    ids::{AgentId, ExternalRef},
    memory_context::Gate,
    search_query::SearchQuery,
};

/// Whose facts: every fact belongs to one agent's view of one user in one tenant.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    pub tenant: &'a str,
    pub agent: &'a AgentId,
    pub user: &'a ExternalRef,
}

/// What became of a fact sent to be stored.
#[derive(Debug, Clone, PartialEq)]
pub enum Remembered {
    Created(Fact),
    /// The same fact (by normalised text) was already stored; this is the stored one.
    Existing(Fact),
    /// The owner already holds the maximum number of facts.
    Full,
}

/// Why a fact could not be updated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateError {
    NotFound,
    /// The new text is the same fact as another stored one of this owner.
    Duplicate,
}

/// A search hit: the fact and the share (0–1] of the query's words it matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub fact: Fact,
    pub relevance: f64,
}

#[derive(sqlx::FromRow)]
pub(super) struct FactRow {
    id: Uuid,
    agent_id: String,
    external_ref: String,
    fact: String,
    tags: Json<Vec<String>>,
    score: Option<f64>,
    source: String,
    conversation_id: Option<Uuid>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<FactRow> for Fact {
    type Error = sqlx::Error;
    fn try_from(row: FactRow) -> Result<Fact> {
        let decode = |e: String| sqlx::Error::Decode(e.into());
        Ok(Fact {
            id: row.id,
            agent_id: AgentId::parse(row.agent_id).map_err(decode)?,
            external_ref: ExternalRef::parse(row.external_ref).map_err(decode)?,
            fact: row.fact,
            tags: row.tags.0,
            score: row.score,
            source: Source::parse(&row.source).map_err(decode)?,
            conversation_id: row.conversation_id,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
struct ScoredRow {
    #[sqlx(flatten)]
    fact: FactRow,
    /// Distinct query words the fact matches.
    matched: i64,
    /// Distinct query words.
    total: i64,
}

impl TryFrom<ScoredRow> for Hit {
    type Error = sqlx::Error;
    fn try_from(row: ScoredRow) -> Result<Hit> {
        // Word counts are tiny: the conversion is exact.
        let relevance = if row.total > 0 { row.matched as f64 / row.total as f64 } else { 0.0 };
        Ok(Hit { fact: row.fact.try_into()?, relevance })
    }
}

fn facts(rows: Vec<FactRow>) -> Result<Vec<Fact>> {
    rows.into_iter().map(Fact::try_from).collect()
}

macro_rules! columns {
    () => {
        "id, agent_id, external_ref, fact, tags, score, source, conversation_id, created_at, updated_at"
    };
}
pub(super) use columns as fact_columns;

/// The owner filter; every statement binds the owner as `$1, $2, $3`.
macro_rules! owner {
    () => {
        "tenant_id = $1 AND agent_id = $2 AND external_ref = $3"
    };
}

/// Facts carrying tag `$5` (or all when `$5` is null): JSONB's `?` on PostgreSQL, a
/// scan of the JSON array on SQLite.
macro_rules! has_tag {
    (postgres) => {
        "($5 IS NULL OR tags ? $5)"
    };
    (sqlite) => {
        "($5 IS NULL OR EXISTS (SELECT 1 FROM json_each(facts.tags) WHERE json_each.value = $5))"
    };
}

/// One page, newest first, before cursor id `$4`, with tag `$5`, at most `$6` rows.
macro_rules! list_sql {
    ($dialect:tt) => {
        concat!(
            "SELECT ",
            columns!(),
            " FROM facts WHERE ",
            owner!(),
            " AND ($4 IS NULL OR id < $4) AND ",
            has_tag!($dialect),
            " ORDER BY id DESC LIMIT $6"
        )
    };
}

/// Every fact of the owner with tag `$5`, with `matched` (distinct words of query `$4`
/// it contains) and `total` (distinct words in the query). See the module docs.
macro_rules! scored {
    (postgres) => {
        concat!(
            "SELECT ",
            columns!(),
            ", (SELECT count(*) FROM unnest(q.words) AS w WHERE w = ANY (tsvector_to_array(facts.search))) AS matched, \
             cardinality(q.words)::bigint AS total \
             FROM facts, (SELECT tsvector_to_array(to_tsvector('english', $4)) AS words) AS q WHERE ",
            owner!(),
            " AND ",
            has_tag!(postgres)
        )
    };
    (sqlite) => {
        concat!(
            "SELECT ",
            columns!(),
            ", (SELECT count(*) FROM json_each($4) AS w WHERE EXISTS \
                (SELECT 1 FROM facts_fts WHERE facts_fts MATCH w.value AND facts_fts.rowid = facts.rowid)) AS matched, \
             json_array_length($4) AS total FROM facts WHERE ",
            owner!(),
            " AND ",
            has_tag!(sqlite)
        )
    };
}

/// The `$6` best matches: most query words first, then newest.
macro_rules! search_sql {
    ($dialect:tt) => {
        concat!(
            "SELECT ",
            columns!(),
            ", matched, total FROM (",
            scored!($dialect),
            ") AS scored WHERE matched > 0 ORDER BY matched DESC, id DESC LIMIT $6"
        )
    };
}

/// The memory context's candidates in one round trip: the `$6` best matches, then the
/// `$6` newest facts (which may repeat a match; the caller drops repeats).
macro_rules! context_sql {
    ($dialect:tt) => {
        concat!(
            "SELECT ",
            columns!(),
            ", matched, total, 0 AS part FROM (",
            search_sql!($dialect),
            ") AS hits UNION ALL SELECT ",
            columns!(),
            ", 0, 0, 1 FROM (SELECT ",
            columns!(),
            " FROM facts WHERE ",
            owner!(),
            " ORDER BY id DESC LIMIT $6) AS recent ORDER BY part, matched DESC, id DESC"
        )
    };
}

impl Store {
    /// Picks the statement written for this backend.
    fn dialect(&self, postgres: &'static str, sqlite: &'static str) -> &'static str {
        match self {
            Store::Postgres(_) => postgres,
            Store::Sqlite(_) => sqlite,
        }
    }

    /// The search parameter `$4`: the raw text for PostgreSQL's parser, the JSON array
    /// of quoted terms for FTS5.
    fn search_param(&self, query: &SearchQuery) -> String {
        match self {
            Store::Postgres(_) => query.text().to_owned(),
            Store::Sqlite(_) => serde_json::Value::from(query.fts5_terms()).to_string(),
        }
    }

    /// One page of the owner's facts, newest first, older than `before` (keyset).
    pub async fn list_facts(
        &self,
        owner: Owner<'_>,
        tag: Option<&str>,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Fact>> {
        let sql = self.dialect(list_sql!(postgres), list_sql!(sqlite));
        let rows: Vec<FactRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(owner.tenant)
                .bind(owner.agent.as_str())
                .bind(owner.user.as_str())
                .bind(before)
                .bind(tag)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        facts(rows)
    }

    /// Stores a manual fact unless the same one is already there, refusing it when the
    /// owner already holds `cap` facts. The cap is exact: writers of one owner are
    /// serialised (see [`FactWrites::insert_fact`]).
    pub async fn remember_fact(&self, owner: Owner<'_>, fact: &NewFact, cap: i64) -> Result<Remembered> {
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let outcome = tx.insert_fact(owner, fact, Origin::Manual, Some(cap)).await?;
            tx.commit().await?;
            Ok(outcome)
        })
    }

    /// The `limit` facts matching most words of `query` (then newest), with tag `tag`.
    pub async fn search_facts(
        &self,
        owner: Owner<'_>,
        query: &SearchQuery,
        tag: Option<&str>,
        limit: i64,
    ) -> Result<Vec<Hit>> {
        let sql = self.dialect(search_sql!(postgres), search_sql!(sqlite));
        let rows: Vec<ScoredRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(owner.tenant)
                .bind(owner.agent.as_str())
                .bind(owner.user.as_str())
                .bind(self.search_param(query))
                .bind(tag)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(Hit::try_from).collect()
    }

    /// Applies `changes` to one fact; `updated_at` is set even when nothing differs.
    pub async fn update_fact(
        &self,
        owner: Owner<'_>,
        id: Uuid,
        changes: &FactChanges,
    ) -> Result<std::result::Result<Fact, UpdateError>> {
        let sql = concat!(
            "UPDATE facts SET fact = COALESCE($5, fact), normalized = COALESCE($6, normalized), \
             tags = COALESCE($7, tags), score = CASE WHEN $8 THEN $9 ELSE score END, updated_at = $10 WHERE ",
            owner!(),
            " AND id = $4 RETURNING ",
            columns!()
        );
        let text = changes.text.as_ref();
        let result: Result<Option<FactRow>> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(owner.tenant)
                .bind(owner.agent.as_str())
                .bind(owner.user.as_str())
                .bind(id)
                .bind(text.map(|t| t.text()))
                .bind(text.map(|t| t.normalized()))
                .bind(changes.tags.as_ref().map(Json))
                .bind(changes.score.is_some())
                .bind(changes.score.flatten())
                .bind(super::now())
                .fetch_optional(pool)
                .await
        });
        match result {
            Ok(Some(row)) => Ok(Ok(row.try_into()?)),
            Ok(None) => Ok(Err(UpdateError::NotFound)),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(Err(UpdateError::Duplicate)),
            Err(e) => Err(e),
        }
    }

    /// Returns whether the fact existed.
    pub async fn delete_fact(&self, owner: Owner<'_>, id: Uuid) -> Result<bool> {
        let sql = concat!("DELETE FROM facts WHERE ", owner!(), " AND id = $4");
        let deleted = with_pool!(self, pool => {
            sqlx::query(sql)
                .bind(owner.tenant)
                .bind(owner.agent.as_str())
                .bind(owner.user.as_str())
                .bind(id)
                .execute(pool)
                .await?
                .rows_affected()
        });
        Ok(deleted > 0)
    }

    /// Deletes every fact of the owner; returns how many there were.
    pub async fn delete_facts(&self, owner: Owner<'_>) -> Result<u64> {
        let sql = concat!("DELETE FROM facts WHERE ", owner!());
        Ok(with_pool!(self, pool => {
            sqlx::query(sql)
                .bind(owner.tenant)
                .bind(owner.agent.as_str())
                .bind(owner.user.as_str())
                .execute(pool)
                .await?
                .rows_affected()
        }))
    }

    /// The agent's memory switch and the user's consent in one round trip (the memory
    /// context is read at every conversation start).
    pub async fn memory_gate(&self, owner: Owner<'_>) -> Result<Gate> {
        let sql = "SELECT \
             (SELECT memory_enabled FROM agent_configs WHERE tenant_id = $1 AND agent_id = $2) AS memory_enabled, \
             (SELECT max_injected_facts FROM agent_configs WHERE tenant_id = $1 AND agent_id = $2) AS max_facts, \
             (SELECT ai_consent FROM user_consents WHERE tenant_id = $1 AND external_ref = $3) AS consent";
        let (memory_enabled, max_facts, consent): (Option<bool>, Option<i32>, Option<bool>) = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(owner.tenant)
                .bind(owner.agent.as_str())
                .bind(owner.user.as_str())
                .fetch_one(pool)
                .await?
        });
        Ok(Gate { agent: memory_enabled.zip(max_facts), consent })
    }

    /// The memory context's candidates, in one query: without `query` the `limit`
    /// newest facts; with it the `limit` best matches, then the `limit` newest (the
    /// same fact may appear in both parts).
    pub async fn context_facts(&self, owner: Owner<'_>, query: Option<&SearchQuery>, limit: i64) -> Result<Vec<Fact>> {
        let Some(query) = query else {
            return self.list_facts(owner, None, None, limit).await;
        };
        let sql = self.dialect(context_sql!(postgres), context_sql!(sqlite));
        let rows: Vec<ScoredRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(owner.tenant)
                .bind(owner.agent.as_str())
                .bind(owner.user.as_str())
                .bind(self.search_param(query))
                .bind(None::<&str>)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(|row| Fact::try_from(row.fact)).collect()
    }
}

/// Fact writes inside a caller's write transaction (opened with
/// [`Transactions::begin_write`]), so that the extraction worker can store facts in the
/// same transaction as its fenced job update, with the same duplicate rule and cap.
pub trait FactWrites {
    /// Inserts `fact` unless the same fact (by normalised text) is stored for this
    /// owner, in which case the stored one is returned. With a `cap`, refuses (`Full`)
    /// when the owner already holds `cap` facts; a duplicate is still `Existing`.
    ///
    /// Writers of one owner are serialised first (a transaction-scoped advisory lock on
    /// PostgreSQL; SQLite's `BEGIN IMMEDIATE` already serialises every writer), so the
    /// count and the insert see every committed fact: concurrent remembers never go
    /// past the cap, and identical ones resolve to one row.
    fn insert_fact(
        &mut self,
        owner: Owner<'_>,
        fact: &NewFact,
        origin: Origin,
        cap: Option<i64>,
    ) -> impl Future<Output = Result<Remembered>> + Send;

    /// Deletes the owner's oldest facts beyond the newest `keep`; returns how many.
    fn evict_oldest(&mut self, owner: Owner<'_>, keep: i64) -> impl Future<Output = Result<u64>> + Send;
}

/// Serialises the writers of one owner until the transaction ends. Different owners
/// hashing alike only wait for each other.
const PG_OWNER_LOCK: &str = "SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2 || '/' || $3, 0))";

/// One body for both backends' transactions; `$lock` is the owner lock statement, if
/// the backend needs one.
macro_rules! impl_fact_writes {
    ($db:ty, $lock:expr) => {
        impl FactWrites for Transaction<'static, $db> {
            async fn insert_fact(
                &mut self,
                owner: Owner<'_>,
                fact: &NewFact,
                origin: Origin,
                cap: Option<i64>,
            ) -> Result<Remembered> {
                let lock: Option<&'static str> = $lock;
                if let Some(lock) = lock {
                    sqlx::query(lock)
                        .bind(owner.tenant)
                        .bind(owner.agent.as_str())
                        .bind(owner.user.as_str())
                        .execute(&mut **self)
                        .await?;
                }
                let insert = concat!(
                    "INSERT INTO facts (",
                    columns!(),
                    ", tenant_id, normalized) SELECT $4, $2, $3, $5, $7, $8, $9, $10, $11, $11, $1, $6 \
                     WHERE $12 IS NULL OR (SELECT count(*) FROM facts WHERE ",
                    owner!(),
                    ") < $12 ON CONFLICT (tenant_id, agent_id, external_ref, normalized) DO NOTHING RETURNING ",
                    columns!()
                );
                let inserted: Option<FactRow> = sqlx::query_as(insert)
                    .bind(owner.tenant)
                    .bind(owner.agent.as_str())
                    .bind(owner.user.as_str())
                    .bind(Uuid::now_v7())
                    .bind(fact.text.text())
                    .bind(fact.text.normalized())
                    .bind(Json(&fact.tags))
                    .bind(fact.score)
                    .bind(origin.source().as_str())
                    .bind(origin.conversation_id())
                    .bind(super::now())
                    .bind(cap)
                    .fetch_optional(&mut **self)
                    .await?;
                if let Some(row) = inserted {
                    return Ok(Remembered::Created(row.try_into()?));
                }
                let existing = concat!("SELECT ", columns!(), " FROM facts WHERE ", owner!(), " AND normalized = $4");
                let row: Option<FactRow> = sqlx::query_as(existing)
                    .bind(owner.tenant)
                    .bind(owner.agent.as_str())
                    .bind(owner.user.as_str())
                    .bind(fact.text.normalized())
                    .fetch_optional(&mut **self)
                    .await?;
                Ok(match row {
                    Some(row) => Remembered::Existing(row.try_into()?),
                    None => Remembered::Full,
                })
            }

            async fn evict_oldest(&mut self, owner: Owner<'_>, keep: i64) -> Result<u64> {
                let sql = concat!(
                    "DELETE FROM facts WHERE ",
                    owner!(),
                    " AND id <= (SELECT id FROM facts WHERE ",
                    owner!(),
                    " ORDER BY id DESC LIMIT 1 OFFSET $4)"
                );
                let done = sqlx::query(sql)
                    .bind(owner.tenant)
                    .bind(owner.agent.as_str())
                    .bind(owner.user.as_str())
                    .bind(keep)
                    .execute(&mut **self)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}

impl_fact_writes!(sqlx::Postgres, Some(PG_OWNER_LOCK));
impl_fact_writes!(sqlx::Sqlite, None);
