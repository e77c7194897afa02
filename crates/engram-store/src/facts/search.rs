//! Full-text search of an owner's facts and the memory context's candidates: the
//! statements that find and rank the query's words, and their callers.

use std::{collections::HashMap, sync::LazyLock};

use chrono::{DateTime, Utc};
use uuid::Uuid;

#[cfg(test)]
use super::reads::READS;
use super::{
    Fact, FactFilter, FactRow, Hit,
    binds::{BindFilter, BindOwner, BindOwners},
    reads::{Dialect, PerDialect},
};
use crate::{
    Result, Store,
    domain::{
        owner::{Owner, OwnerSet},
        search_query::SearchQuery,
    },
    ranking, with_pool, word_index,
};

// Full-text search ranks an owner's facts by the query words they hold, most first, then
// by how rare those words are among the owner's matching facts, then newest. The
// statement that finds the words (`MATCHES`) lists the matching facts with the terms
// they hold, [`crate::ranking`] ranks them, and the best rows are read by id after: two
// round trips. Ranked in SQL, the aggregation was most of a long search's time on both
// backends: SQLite's `GROUP BY`s go through sorters (~2.8 of ~4.5 ms for 3 585 (fact,
// word) pairs), and PostgreSQL takes each word's postings apart to count them, one heap
// visit per (fact, word) pair (5 ms for a 20-word query whose words were all common
// among the owner's 1 000 facts, 1 ms through `MATCHES`).
//
// For a short query PostgreSQL's aggregation is cheap and the second round trip is not
// (a third of a 3-word search's throughput): up to [`SCORED_MAX_WORDS`] words it ranks
// in the statement that finds them (`SCORED`), by the same rule, in one round trip. The
// API tests hold both ways, and both backends, to the same order.

/// The most words a PostgreSQL search ranks in SQL ([`SCORED`]); longer queries go
/// through [`MATCHES`].
const SCORED_MAX_WORDS: usize = 6;

/// PostgreSQL: the owner's facts that filter `$5`–`$8` takes (`{filter}`, see
/// [`super::reads`]) and that hold a word of the query, scored, and the `$9` best of
/// them: `pairs` holds one row per (fact, query word it contains), found through the
/// word index in one lookup per query word, never one test per word per fact; `df` is
/// how many of those facts hold each word; `scored` gives each fact the number of query
/// words it `matched` and their `rarity`, the sum of 1/df over them (an IDF that needs no
/// logarithm; a word is its term after the owner's 16-digit tag, so that with shared
/// memory the facts of every owner read count together), counted in billionths and
/// rounded to a whole number of them, as [`crate::ranking`] counts them; `best` keeps
/// the `$9` first by most words, then rarest words, then newest.
///
/// `$4` is the owner's terms of the query's words, separated by spaces
/// ([`word_index::WordSearch::terms`]); `keys` makes each a single-term `tsquery` of the
/// GIN index `facts_words`, whose postings for it are exactly this owner's facts holding
/// the word. The terms go through a materialised `q` so that the planner cannot count
/// them: a plan made for the bound terms (`unnest` of a constant array knows its length)
/// looked cheaper than the generic one, and PostgreSQL planned the statement again at
/// every run, which took a third of a 3-word search's throughput. `OFFSET 0` keeps the
/// owner's columns out of each word's lookup: left in, the planner also read the owner's
/// whole entry of `facts_owner_id` for every word, to intersect the two.
///
/// Only ids and words go through the scoring: the full rows of the `best` few are read
/// last, by key, so a query whose words are in nearly all of the owner's facts sorts
/// small rows and reads `$9` facts, rather than every matching fact's text and tags
/// before `ORDER BY … LIMIT`.
const SCORED: &str = "WITH q AS MATERIALIZED (SELECT string_to_array($4, ' ') AS terms), \
     keys AS MATERIALIZED (SELECT term, substr(term, 17) AS word, CAST('''' || term || '''' AS tsquery) AS query \
       FROM q, unnest(q.terms) AS term), \
     pairs AS MATERIALIZED (SELECT hits.id AS fact_id, keys.word FROM keys CROSS JOIN LATERAL \
         (SELECT id, tenant_id, agent_id, external_ref, tags, superseded_by, observed_at, valid_until, expires_at \
          FROM facts WHERE array_to_tsvector(string_to_array(search_terms, ' ')) @@ keys.query OFFSET 0) AS hits \
       WHERE hits.tenant_id = $1 AND hits.agent_id = $2 AND hits.external_ref = $3 AND {filter}), \
     df AS (SELECT word, count(*) AS n FROM pairs GROUP BY word), \
     scored AS (SELECT pairs.fact_id, count(*) AS matched, \
         round(sum(CAST(1 AS DOUBLE PRECISION) / df.n) * 1000000000) AS rarity \
       FROM pairs JOIN df ON df.word = pairs.word GROUP BY pairs.fact_id), \
     best AS (SELECT fact_id, matched, rarity FROM scored ORDER BY matched DESC, rarity DESC, fact_id DESC LIMIT $9) ";

/// PostgreSQL: the rows of the `best` matches with their scores, in no order (the owner
/// filter again: every read of `facts` names its owner).
const BEST_ROWS: &str = "SELECT {columns}, matched, rarity / 1000000000 AS rarity \
     FROM best CROSS JOIN facts \
     WHERE facts.id = best.fact_id AND facts.tenant_id = $1 AND facts.agent_id = $2 AND facts.external_ref = $3";

/// PostgreSQL: the `$9` best matches that filter `$5`–`$8` takes: most query words
/// first, then rarest words, then newest.
const SCORED_SEARCH: &str = "{scored}{best_rows} ORDER BY matched DESC, rarity DESC, id DESC";

/// PostgreSQL: the memory context's candidates in one round trip: the `$9` best matches,
/// then the `$9` newest facts, which may repeat a match (the caller drops repeats). Both
/// parts taken by filter `$5`–`$8` (the current facts, at a time or now).
const SCORED_CONTEXT: &str = "{scored}SELECT *, 0 AS part FROM ({best_rows}) AS hits \
     UNION ALL SELECT * FROM (SELECT {columns}, 0, CAST(0 AS DOUBLE PRECISION), 1 FROM facts \
       WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {filter} \
       ORDER BY id DESC LIMIT $9) AS recent \
     ORDER BY part, matched DESC, rarity DESC, id DESC";

/// The owner's facts that filter `$5`–`$8` takes and that hold any word of the query, as
/// one row: their 16-byte ids end to end (`ids`) and their `search_terms` in the same
/// order, one line each (`terms`), from which [`word_index::WordSearch::matches`] tells
/// which query words each holds.
///
/// `$4` is the owner's term of each query word, any of them (see `{matching}` in
/// [`super::reads::Dialect`]): each word's postings among this owner's facts only, each fact found
/// once however many of the words it holds. Each hit's row is read for the owner, tag and
/// currency tests (two owners may share a tag).
const MATCHES: &str = "{matching} \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {filter}";

/// The memory context's candidates: the owner's facts whose ids are in `$4` (the
/// ranked matches, see `{ids}` in [`super::reads::Dialect`]; part 0), unless expired at
/// horizon `$8`, and the `$9` newest facts that filter `$5`–`$8` takes (part 1), which may
/// repeat a match (the caller drops repeats); newest first within a part.
const CONTEXT: &str = "SELECT {columns}, CAST(0 AS BIGINT) AS part FROM {ids_from} \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {ids} \
       AND (expires_at IS NULL OR expires_at > $8) \
     UNION ALL SELECT * FROM (SELECT {columns}, 1 FROM facts \
       WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {filter} \
       ORDER BY id DESC LIMIT $9) AS recent \
     ORDER BY part, id DESC";

/// A row of [`SCORED_SEARCH`]: a fact and its score.
#[derive(sqlx::FromRow)]
struct ScoredRow {
    #[sqlx(flatten)]
    fact: FactRow,
    /// Distinct query words the fact matches.
    matched: i64,
    rarity: f64,
}

/// The share of the query's `total` words that a fact holds.
fn relevance(matched: i64, total: i64) -> f64 {
    // Word counts are tiny: the conversions are exact.
    if total > 0 { matched as f64 / total as f64 } else { 0.0 }
}

/// A row of the memory context's candidates: a fact and which part it belongs to.
#[derive(sqlx::FromRow)]
struct PartRow {
    #[sqlx(flatten)]
    fact: FactRow,
    /// 0: a match of the query; 1: one of the newest facts.
    part: i64,
}

/// The search's statements, filled for one dialect.
struct Searches {
    /// The facts holding any query word ([`MATCHES`]).
    matches: String,
    /// The memory context's rows ([`CONTEXT`]).
    context: String,
    /// PostgreSQL: a short query's search and memory context, ranked in SQL ([`SCORED`]).
    scored: Option<Scored>,
}

/// [`SCORED_SEARCH`] and [`SCORED_CONTEXT`], filled.
struct Scored {
    search: String,
    context: String,
}

impl Searches {
    fn new(dialect: &Dialect, shared: bool) -> Searches {
        let fill = |template: &str| {
            dialect.fill(&template.replace("{scored}", SCORED).replace("{best_rows}", BEST_ROWS), shared)
        };
        Searches {
            matches: fill(MATCHES),
            context: fill(CONTEXT),
            scored: dialect
                .ranks_short_queries
                .then(|| Scored { search: fill(SCORED_SEARCH), context: fill(SCORED_CONTEXT) }),
        }
    }

    #[cfg(test)]
    fn all(&self) -> Vec<&str> {
        let scored = self.scored.iter().flat_map(|scored| [scored.search.as_str(), scored.context.as_str()]);
        [self.matches.as_str(), &self.context].into_iter().chain(scored).collect()
    }
}

static SEARCHES: LazyLock<PerDialect<Searches>> = LazyLock::new(|| PerDialect::new(Searches::new));

impl Store {
    /// The `limit` facts matching most words of `query` (then rarest words, then
    /// newest) that `filter` takes: the facts holding the words, ranked here, then the
    /// rows of the best by id (see [`MATCHES`]); a short query on PostgreSQL in one
    /// statement ([`SCORED`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "search_facts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn search_facts<'o>(
        &self,
        owners: impl Into<OwnerSet<'o>>,
        query: &SearchQuery,
        filter: FactFilter<'_>,
        limit: i64,
    ) -> Result<Vec<Hit>> {
        let owners = owners.into();
        let Some(search) = word_index::WordSearch::new(&self.word_key, owners, query.stems()) else {
            return Ok(Vec::new());
        };
        let words = i64::try_from(search.words()).unwrap_or(i64::MAX);
        if let Some(scored) = self.scored(owners, &search) {
            let rows = self.scored_rows(scored.search.as_str(), owners, &search, filter, limit).await?;
            return rows
                .into_iter()
                .map(|row| {
                    Ok(Hit { relevance: relevance(row.matched, words), rarity: row.rarity, fact: row.fact.try_into()? })
                })
                .collect();
        }
        let ranked = self.rank_matches(&search, owners, filter, limit).await?;
        if ranked.is_empty() {
            return Ok(Vec::new());
        }
        let facts = self.facts_by_id(owners, &ranked.iter().map(|r| r.id).collect::<Vec<_>>()).await?;
        let mut by_id: HashMap<Uuid, Fact> = facts.into_iter().map(|fact| (fact.id, fact)).collect();
        // A fact deleted between the two statements is left out.
        Ok(ranked
            .iter()
            .filter_map(|r| {
                let relevance = relevance(r.matched, words);
                by_id.remove(&r.id).map(|fact| Hit { fact, relevance, rarity: r.rarity() })
            })
            .collect())
    }

    /// PostgreSQL's statements that rank `search` in SQL, when it is short enough.
    fn scored(&self, owners: OwnerSet<'_>, search: &word_index::WordSearch) -> Option<&'static Scored> {
        SEARCHES.of(self, owners).scored.as_ref().filter(|_| search.words() <= SCORED_MAX_WORDS)
    }

    /// Runs `sql`, a statement that ranks `search` in SQL ([`Scored`]), for the `limit`
    /// best of the owners' facts that `filter` takes.
    async fn scored_rows(
        &self,
        sql: &'static str,
        owners: OwnerSet<'_>,
        search: &word_index::WordSearch,
        filter: FactFilter<'_>,
        limit: i64,
    ) -> Result<Vec<ScoredRow>> {
        let rows: Vec<ScoredRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind_owners(owners)
                .bind(search.terms())
                .bind_filter(filter)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        crate::counted(&rows);
        Ok(rows)
    }

    /// The `limit` best matches of `search` among the owners' facts that `filter` takes,
    /// best first (see [`crate::ranking`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "fact_matches", backend = self.backend(), rows = tracing::field::Empty))]
    async fn rank_matches(
        &self,
        search: &word_index::WordSearch,
        owners: OwnerSet<'_>,
        filter: FactFilter<'_>,
        limit: i64,
    ) -> Result<Vec<ranking::Ranked>> {
        let (ids, terms): (Option<Vec<u8>>, Option<String>) = with_pool!(self, pool => {
            sqlx::query_as(SEARCHES.of(self, owners).matches.as_str())
                .bind_owners(owners)
                .bind(self.word_query(search))
                .bind_filter(filter)
                .fetch_one(pool)
                .await?
        });
        let found = search.matches(&ids.unwrap_or_default(), terms.as_deref().unwrap_or_default())?;
        crate::counted(&found);
        Ok(ranking::rank(&found, usize::try_from(limit).unwrap_or(0)))
    }

    /// `search`'s query in this backend's syntax: `$4` of [`MATCHES`].
    fn word_query(&self, search: &word_index::WordSearch) -> String {
        if self.is_embedded() { search.fts5_query() } else { search.tsquery() }
    }

    /// The database's plan for the statement with which [`Store::search_facts`] finds
    /// `query`'s matches (10 hits, no tag), one line per step: SQLite's `EXPLAIN QUERY
    /// PLAN` details; PostgreSQL's `EXPLAIN (ANALYZE, BUFFERS, SETTINGS)`, which runs it,
    /// counts the pages it read and names the planner settings the connection changed.
    /// Tests check with it that search walks indexes rather than tables.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "explain_search", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn explain_search(&self, owner: Owner<'_>, query: &SearchQuery) -> Result<Vec<String>> {
        let (prefix, detail) = self.dialect(("EXPLAIN (ANALYZE, BUFFERS, SETTINGS) ", 0), ("EXPLAIN QUERY PLAN ", 3));
        let search = word_index::WordSearch::new(&self.word_key, owner.into(), query.stems());
        let (statement, param, limit) =
            match search.as_ref().and_then(|search| Some((self.scored(owner.into(), search)?, search))) {
                Some((scored, search)) => (&scored.search, search.terms(), Some(10_i64)),
                None => (
                    &SEARCHES.of(self, owner.into()).matches,
                    search.map(|search| self.word_query(&search)).unwrap_or_default(),
                    None,
                ),
            };
        let sql = format!("{prefix}{statement}");
        with_pool!(self, pool => {
            let query = sqlx::query(sqlx::AssertSqlSafe(sql))
                .bind_owner(owner)
                .bind(param)
                .bind_filter(FactFilter::CURRENT);
            match limit {
                Some(limit) => query.bind(limit),
                None => query,
            }
                .fetch_all(pool)
                .await?
                .iter()
                .map(|row| sqlx::Row::try_get::<String, _>(row, detail))
                .collect()
        })
    }

    /// The memory context's candidates: without `query` the `limit` newest facts; with
    /// it the `limit` best matches, then the `limit` newest (the same fact may appear in
    /// both parts); current at `as_of`, or now. With a query, the facts holding its words
    /// are ranked here, then one statement reads the best and the newest ([`CONTEXT`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "context_facts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn context_facts<'o>(
        &self,
        owners: impl Into<OwnerSet<'o>>,
        query: Option<&SearchQuery>,
        as_of: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<Vec<Fact>> {
        let owners = owners.into();
        let filter = FactFilter { as_of, ..FactFilter::CURRENT };
        let Some(query) = query else {
            return self.list_facts(owners, filter, None, None, limit).await;
        };
        let Some(search) = word_index::WordSearch::new(&self.word_key, owners, query.stems()) else {
            return self.list_facts(owners, filter, None, None, limit).await;
        };
        if let Some(scored) = self.scored(owners, &search) {
            let rows = self.scored_rows(scored.context.as_str(), owners, &search, filter, limit).await?;
            return rows.into_iter().map(|row| Fact::try_from(row.fact)).collect();
        }
        let ranked = self.rank_matches(&search, owners, filter, limit).await?;
        let ids = serde_json::Value::from(ranked.iter().map(|r| r.id.to_string()).collect::<Vec<_>>()).to_string();
        let rows: Vec<PartRow> = with_pool!(self, pool => {
            sqlx::query_as(SEARCHES.of(self, owners).context.as_str())
                .bind_owners(owners)
                .bind(ids)
                .bind_filter(filter)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        crate::counted(&rows);
        let split = rows.iter().position(|row| row.part != 0).unwrap_or(rows.len());
        let mut newest = rows;
        let mut matches: HashMap<Uuid, FactRow> = newest.drain(..split).map(|row| (row.fact.id, row.fact)).collect();
        // The matches in their ranking's order (a fact gone between the statements is
        // left out), then the newest.
        ranked
            .iter()
            .filter_map(|r| matches.remove(&r.id))
            .chain(newest.into_iter().map(|row| row.fact))
            .map(Fact::try_from)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ids::{AgentId, ExternalRef, TenantId};

    /// SQLite's reads of facts by id seek each id rather than build a temporary B-tree of
    /// them (see [`Dialect`]).
    #[tokio::test]
    async fn reading_facts_by_id_builds_no_temporary_b_tree() {
        for sql in [READS.sqlite().by_id.as_str(), SEARCHES.sqlite().context.as_str()] {
            let opcodes = crate::tests::sqlite_opcodes(sql).await;
            assert!(opcodes.iter().any(|op| op == "VFilter"), "reads the ids: {opcodes:?}");
            assert!(!opcodes.iter().any(|op| op == "OpenEphemeral"), "{sql}: {opcodes:?}");
        }
    }

    /// The matches' aggregate keeps every byte of each id on the SQLite Engram links,
    /// zero bytes included, in the order of the terms' aggregate beside it, and the ids
    /// come back as they went in.
    #[tokio::test]
    async fn matches_carry_ids_with_zero_bytes_whole() {
        let store = Store::connect("sqlite::memory:", 1, std::time::Duration::from_secs(5)).await.expect("SQLite");
        let crate::Backend::Sqlite(pool) = &store.backend else { panic!("sqlite::memory: opened {}", store.backend()) };
        let (tenant, agent) = (TenantId::parse("t".into()).unwrap(), AgentId::parse("a".into()).unwrap());
        let user = ExternalRef::parse("caroline".into()).unwrap();
        let owner = Owner::new(&tenant, &agent, &user);
        let ids = [Uuid::nil(), Uuid::from_u128(1 << 64), Uuid::from_u128(u128::MAX), Uuid::now_v7()];
        let values = ids
            .iter()
            .enumerate()
            .map(|(word, id)| {
                format!(
                    "(x'{}', '{}')",
                    id.simple(),
                    word_index::fact_terms(&store.word_key, owner, &format!("w{word}"))
                )
            })
            .collect::<Vec<_>>()
            .join(", ");
        let sql = format!(
            "SELECT CAST(group_concat(column1, '') AS BLOB), group_concat(column2, char(10)) FROM (VALUES {values})"
        );
        let (bytes, terms): (Vec<u8>, String) =
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_one(pool).await.expect("aggregate");
        let stems: Vec<String> = (0..ids.len()).map(|word| format!("w{word}")).collect();
        let found = word_index::WordSearch::new(&store.word_key, owner.into(), stems)
            .expect("words")
            .matches(&bytes, &terms)
            .expect("whole ids");
        assert_eq!(found, ids.iter().enumerate().map(|(word, id)| (*id, 1 << word)).collect::<Vec<_>>());
    }

    #[test]
    fn every_hole_of_the_searches_is_filled() {
        SEARCHES.check(Searches::all);
    }
}
