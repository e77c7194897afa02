//! Facts about end users, scoped to one tenant, agent and user (an [`Owner`]): list,
//! remember (deduplicated by the normalised text, which is the table's unique key),
//! full-text search, update, delete, and the reads of the memory context.
//!
//! Search finds the owner's term of each query word's stem in a word index Engram
//! writes with each fact ([`super::word_index`]): PostgreSQL's GIN index over
//! `search_terms`, SQLite's FTS5 table `facts_fts`; only that lookup differs between the
//! backends. [`super::ranking`] ranks what it finds, for both, by the number of distinct
//! query words a fact matches, as the contract says, then by how rare those words are
//! among the owner's facts (so a name in half of them does not beat the one fact holding
//! the rare word), then by recency; `relevance` is the matched number over the number of
//! query words. The cost is one index walk per query word plus the matching facts,
//! never a test of every word against every fact.
//!
//! Every statement filters on `tenant_id, agent_id, external_ref` (index
//! `facts_owner_id`), so one agent never reads another's facts and another tenant's
//! fact id is simply not found.
//!
//! **The cap** (`ENGRAM_MAX_FACTS_PER_USER`) bounds an owner's facts of every source. A
//! manual or agent fact beyond it is refused (409). Extraction makes room by eviction
//! instead, and evicts only extracted facts, oldest (by id, which is time-ordered) first:
//! manual and agent facts are curated (by an operator, or by the agent's model when the
//! user asked it to remember) and no conversation can push them out. The room an
//! extraction has is the cap minus the owner's curated facts; when curated facts alone
//! fill the cap, an extraction stores nothing and evicts nothing.

use std::{collections::HashMap, sync::LazyLock};

use chrono::{DateTime, Utc};
use sqlx::{
    Database, Encode, Type,
    query::{Query, QueryAs},
    types::Json,
};
use uuid::Uuid;

use super::{Result, Store, Tx, ranking, with_pool, with_tx, with_writer, word_index};
use crate::domain::{
    event::{Actor, EventData, EventType, NewEvent},
    fact::{Fact, FactChanges, NewFact, Origin, Source, SourceMessage, stored_precision},
    ids::{AgentId, ExternalRef, TenantId},
    owner::{Owner, OwnerSet},
    search_query::SearchQuery,
    slot::Slot,
};

/// Binds an owner as `$1, $2, $3`, the way every statement about one owner's facts
/// starts.
pub(super) trait BindOwner<'q> {
    fn bind_owner(self, owner: Owner<'q>) -> Self;
}

impl<'q, DB: Database> BindOwner<'q> for Query<'q, DB, <DB as Database>::Arguments>
where
    &'q str: Encode<'q, DB> + Type<DB>,
{
    fn bind_owner(self, owner: Owner<'q>) -> Self {
        self.bind(owner.tenant().as_str()).bind(owner.agent().as_str()).bind(owner.user().as_str())
    }
}

impl<'q, DB: Database, O> BindOwner<'q> for QueryAs<'q, DB, O, <DB as Database>::Arguments>
where
    &'q str: Encode<'q, DB> + Type<DB>,
{
    fn bind_owner(self, owner: Owner<'q>) -> Self {
        self.bind(owner.tenant().as_str()).bind(owner.agent().as_str()).bind(owner.user().as_str())
    }
}

/// Binds an owner set as `$1, $2, $3` for the reads of [`Reads::new`]: `$2` is the
/// agent alone without sharing (the statements test `agent_id = $2`), else a JSON array of
/// every agent of the set (the shared statements test membership, see
/// [`Dialect::shared_agents`]).
pub(super) trait BindOwners<'q> {
    fn bind_owners(self, owners: OwnerSet<'q>) -> Self;
}

/// The agents of a shared read, as the JSON array its `$2` is.
fn agents_json(owners: OwnerSet<'_>) -> String {
    serde_json::Value::from(owners.owners().map(|owner| owner.agent().as_str()).collect::<Vec<_>>()).to_string()
}

impl<'q, DB: Database, O> BindOwners<'q> for QueryAs<'q, DB, O, <DB as Database>::Arguments>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    String: Encode<'q, DB> + Type<DB>,
{
    fn bind_owners(self, owners: OwnerSet<'q>) -> Self {
        let owner = owners.owner();
        let query = self.bind(owner.tenant().as_str());
        let query = if owners.shared().is_empty() {
            query.bind(owner.agent().as_str())
        } else {
            query.bind(agents_json(owners))
        };
        query.bind(owner.user().as_str())
    }
}

/// A new fact as [`INSERT`] stores it, every column computed here (times at the
/// precision both databases keep), so that an event written by the same statement (see
/// [`Tx::insert_unslotted`]) carries the stored fact.
fn new_row(owner: Owner<'_>, fact: &NewFact, origin: Origin, now: DateTime<Utc>, created_at: DateTime<Utc>) -> Fact {
    let created_at = stored_precision(created_at);
    Fact {
        id: Uuid::now_v7(),
        agent_id: owner.agent().clone(),
        external_ref: owner.user().clone(),
        fact: fact.text.text().to_owned(),
        tags: fact.tags.clone(),
        score: fact.score,
        source: origin.source(),
        conversation_id: origin.conversation_id(),
        source_messages: sources(origin, &fact.said_in),
        created_at,
        updated_at: created_at,
        superseded_by: None,
        superseded_at: None,
        observed_at: stored_precision(fact.observed_at.unwrap_or(now)),
        valid_until: None,
        expires_at: fact.expires_at.map(stored_precision),
        recall_count: 0,
        last_recalled_at: None,
    }
}

/// The messages of `origin`'s conversation numbered `said_in`, as a fact stores them;
/// none for a fact of no conversation.
pub(super) fn sources(origin: Origin, said_in: &[i64]) -> Vec<SourceMessage> {
    match origin.conversation_id() {
        Some(conversation_id) => said_in.iter().map(|&seq| SourceMessage { conversation_id, seq }).collect(),
        None => Vec::new(),
    }
}

/// Binds [`INSERT`]'s `$1`–`$18`: the owner, `stored` (from [`new_row`]) with its
/// duplicate key `normalized`, now, the cap and the text's terms of the word index. The
/// statements built on it add their own parameters after these.
fn bind_insert<'q, DB: Database, O>(
    query: QueryAs<'q, DB, O, <DB as Database>::Arguments>,
    owner: Owner<'q>,
    stored: &'q Fact,
    normalized: &'q str,
    now: DateTime<Utc>,
    cap: Option<i64>,
    terms: String,
) -> QueryAs<'q, DB, O, <DB as Database>::Arguments>
where
    &'q str: Encode<'q, DB> + Type<DB>,
    Uuid: Encode<'q, DB> + Type<DB>,
    Json<&'q Vec<String>>: Encode<'q, DB> + Type<DB>,
    Json<&'q Vec<SourceMessage>>: Encode<'q, DB> + Type<DB>,
    Option<f64>: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    Option<Uuid>: Encode<'q, DB> + Type<DB>,
    Option<&'q str>: Encode<'q, DB> + Type<DB>,
    DateTime<Utc>: Encode<'q, DB> + Type<DB>,
    Option<DateTime<Utc>>: Encode<'q, DB> + Type<DB>,
    String: Encode<'q, DB> + Type<DB>,
{
    query
        .bind_owner(owner)
        .bind(stored.id)
        .bind(stored.fact.as_str())
        .bind(normalized)
        .bind(Json(&stored.tags))
        .bind(stored.score)
        .bind::<&'q str>(stored.source.as_str())
        .bind(stored.conversation_id)
        .bind(now)
        .bind(cap)
        .bind(Slot::of(&stored.fact).map(|slot| -> &'q str { slot.as_str() }))
        .bind(stored.observed_at)
        .bind(stored.expires_at)
        .bind(stored.created_at)
        .bind(terms)
        .bind(Json(&stored.source_messages))
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

/// Which of an owner's facts a list or search reads. Expired facts are never read.
#[derive(Debug, Clone, Copy, Default)]
pub struct FactFilter<'a> {
    /// Only facts carrying this tag.
    pub tag: Option<&'a str>,
    /// Superseded facts too (by default only current ones).
    pub superseded: bool,
    /// The facts that were current at this time instead of now (see [`current_test`]);
    /// `superseded` does not apply then.
    pub as_of: Option<DateTime<Utc>>,
}

impl FactFilter<'_> {
    /// Every current fact: what memory context and recall read.
    pub const CURRENT: FactFilter<'static> = FactFilter { tag: None, superseded: false, as_of: None };

    /// The expiry horizon the reads bind: a fact expiring at or before it is left out.
    /// Now, or `as_of` when that is later: an expired fact is gone whatever time is
    /// asked about, and one that expires before `as_of` was no longer current then.
    pub(super) fn horizon(&self) -> DateTime<Utc> {
        let now = super::now();
        self.as_of.map_or(now, |as_of| as_of.max(now))
    }
}

/// The test of a fact being current, for statements that bind whether superseded facts
/// are wanted as `superseded`, the time asked about (or NULL for now) as `as_of` and the
/// expiry horizon ([`FactFilter::horizon`]) as `horizon`. At a time T a fact is current
/// when it was said by then and not yet replaced (observed_at <= T < valid_until); without
/// a time, when it is not superseded (or superseded ones are wanted). Either way, never
/// once expired. Column names are unqualified: every statement using it reads one table
/// with these names (`facts`, or the PostgreSQL search's `hits`).
pub(super) fn current_test(superseded: &str, as_of: &str, horizon: &str) -> String {
    format!(
        "(CASE WHEN {as_of} IS NULL THEN ({superseded} OR superseded_by IS NULL) \
           ELSE (observed_at <= {as_of} AND (valid_until IS NULL OR valid_until > {as_of})) END) \
         AND (expires_at IS NULL OR expires_at > {horizon})"
    )
}

/// A search hit: the fact and the share (0–1] of the query's words it matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub fact: Fact,
    pub relevance: f64,
    /// How rare the query words it matches are: the sum, over them, of one over the number
    /// of the owner's matching facts that hold the word (see [`super::ranking`]). Full text ranks by
    /// it after the count of words; recall by meaning weighs full-text hits by it.
    pub rarity: f64,
}

#[derive(sqlx::FromRow)]
pub(super) struct FactRow {
    id: Uuid,
    agent_id: AgentId,
    external_ref: ExternalRef,
    fact: String,
    tags: Json<Vec<String>>,
    score: Option<f64>,
    source: String,
    conversation_id: Option<Uuid>,
    source_messages: Json<Vec<SourceMessage>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    superseded_by: Option<Uuid>,
    superseded_at: Option<DateTime<Utc>>,
    observed_at: DateTime<Utc>,
    valid_until: Option<DateTime<Utc>>,
    expires_at: Option<DateTime<Utc>>,
    recall_count: i64,
    last_recalled_at: Option<DateTime<Utc>>,
}

impl TryFrom<FactRow> for Fact {
    type Error = sqlx::Error;
    fn try_from(row: FactRow) -> Result<Fact> {
        let decode = |e: String| sqlx::Error::Decode(e.into());
        Ok(Fact {
            id: row.id,
            agent_id: row.agent_id,
            external_ref: row.external_ref,
            fact: row.fact,
            tags: row.tags.0,
            score: row.score,
            source: Source::parse(&row.source).map_err(decode)?,
            conversation_id: row.conversation_id,
            source_messages: row.source_messages.0,
            created_at: row.created_at,
            updated_at: row.updated_at,
            superseded_by: row.superseded_by,
            superseded_at: row.superseded_at,
            observed_at: row.observed_at,
            valid_until: row.valid_until,
            expires_at: row.expires_at,
            recall_count: row.recall_count,
            last_recalled_at: row.last_recalled_at,
        })
    }
}

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

fn facts(rows: Vec<FactRow>) -> Result<Vec<Fact>> {
    rows.into_iter().map(Fact::try_from).collect()
}

/// The columns a [`FactRow`] reads, in its order.
macro_rules! fact_columns {
    () => {
        "id, agent_id, external_ref, fact, tags, score, source, conversation_id, source_messages, created_at, updated_at, \
         superseded_by, superseded_at, observed_at, valid_until, expires_at, recall_count, last_recalled_at"
    };
}
pub(super) use fact_columns;

// Every statement below filters on the owner first: `$1` tenant, `$2` agent, `$3`
// external ref (index `facts_owner_id`). The remaining binds are listed above each.

/// One page, newest first. `$4` cursor id (or NULL), `$5` tag (or NULL), `$6` limit,
/// `$7` whether superseded facts are included, `$8` the time asked about (or NULL), `$9`
/// the expiry horizon (`{current}`, see [`current_test`]), `$10` a conversation (its
/// hyphenated id, or NULL) one of the fact's source messages must be in.
const LIST: &str = "SELECT {columns} FROM facts \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND ($4 IS NULL OR id < $4) \
       AND ($5 IS NULL OR {has_tag}) AND {current} AND ($10 IS NULL OR {from_conversation}) \
     ORDER BY id DESC LIMIT $6";

// Full-text search ranks an owner's facts by the query words they hold, most first, then
// by how rare those words are among the owner's matching facts, then newest. The
// statement that finds the words (`MATCHES`) lists the matching facts with the terms
// they hold, [`super::ranking`] ranks them, and the best rows are read by id after: two
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

/// PostgreSQL: the owner's facts with tag `$5` (or all when NULL) that hold a word of the
/// query, scored, and the `$6` best of them: `pairs` holds one row per (fact, query word
/// it contains), found through the word index in one lookup per query word, never one
/// test per word per fact; `df` is how many of those facts hold each word; `scored` gives
/// each fact the number of query words it `matched` and their `rarity`, the sum of 1/df
/// over them (an IDF that needs no logarithm; a word is its term after the owner's
/// 16-digit tag, so that with shared memory the facts of every owner read count
/// together), counted in billionths and rounded to a
/// whole number of them, as [`super::ranking`] counts them; `best` keeps the `$6` first by
/// most words, then rarest words, then newest.
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
/// small rows and reads `$6` facts, rather than every matching fact's text and tags
/// before `ORDER BY … LIMIT`.
const SCORED: &str = "WITH q AS MATERIALIZED (SELECT string_to_array($4, ' ') AS terms), \
     keys AS MATERIALIZED (SELECT term, substr(term, 17) AS word, CAST('''' || term || '''' AS tsquery) AS query \
       FROM q, unnest(q.terms) AS term), \
     pairs AS MATERIALIZED (SELECT hits.id AS fact_id, keys.word FROM keys CROSS JOIN LATERAL \
         (SELECT id, tenant_id, agent_id, external_ref, tags, superseded_by, observed_at, valid_until, expires_at \
          FROM facts WHERE array_to_tsvector(string_to_array(search_terms, ' ')) @@ keys.query OFFSET 0) AS hits \
       WHERE hits.tenant_id = $1 AND hits.agent_id = $2 AND hits.external_ref = $3 AND ($5 IS NULL OR {has_tag}) \
         AND {current}), \
     df AS (SELECT word, count(*) AS n FROM pairs GROUP BY word), \
     scored AS (SELECT pairs.fact_id, count(*) AS matched, \
         round(sum(CAST(1 AS DOUBLE PRECISION) / df.n) * 1000000000) AS rarity \
       FROM pairs JOIN df ON df.word = pairs.word GROUP BY pairs.fact_id), \
     best AS (SELECT fact_id, matched, rarity FROM scored ORDER BY matched DESC, rarity DESC, fact_id DESC LIMIT $6) ";

/// PostgreSQL: the rows of the `best` matches with their scores, in no order (the owner
/// filter again: every read of `facts` names its owner).
const BEST_ROWS: &str = "SELECT {columns}, matched, rarity / 1000000000 AS rarity \
     FROM best CROSS JOIN facts \
     WHERE facts.id = best.fact_id AND facts.tenant_id = $1 AND facts.agent_id = $2 AND facts.external_ref = $3";

/// PostgreSQL: the `$6` best matches: most query words first, then rarest words, then
/// newest. Superseded facts too when `$7`, the facts current at `$8` when it is not NULL,
/// unexpired at horizon `$9`.
const SCORED_SEARCH: &str = "{scored}{best_rows} ORDER BY matched DESC, rarity DESC, id DESC";

/// PostgreSQL: the memory context's candidates in one round trip: the `$6` best matches
/// (`$5` is NULL: no tag filter), then the `$6` newest facts, which may repeat a match
/// (the caller drops repeats). Both parts current at `$8` (or now), `$7` false.
const SCORED_CONTEXT: &str = "{scored}SELECT *, 0 AS part FROM ({best_rows}) AS hits \
     UNION ALL SELECT * FROM (SELECT {columns}, 0, CAST(0 AS DOUBLE PRECISION), 1 FROM facts \
       WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {current} \
       ORDER BY id DESC LIMIT $6) AS recent \
     ORDER BY part, matched DESC, rarity DESC, id DESC";

/// The owner's facts with tag `$5` (or all when NULL) that hold any word of the query, as
/// one row: their 16-byte ids end to end (`ids`) and their `search_terms` in the same
/// order, one line each (`terms`), from which [`word_index::WordSearch::matches`] tells
/// which query words each holds. Superseded facts are taken when `$6`, the facts current
/// at `$7` when it is not NULL, and only the unexpired at horizon `$8`.
///
/// `$4` is the owner's term of each query word, any of them (see `{matching}` in
/// [`Dialect`]): each word's postings among this owner's facts only, each fact found
/// once however many of the words it holds. Each hit's row is read for the owner, tag and
/// currency tests (two owners may share a tag).
const MATCHES: &str = "{matching} \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND ($5 IS NULL OR {has_tag}) AND {current}";

/// The memory context's candidates: the owner's facts whose ids are in `$4` (the
/// ranked matches, see `{ids}` in [`Dialect`]; part 0) and the `$6` newest facts (part 1),
/// which may repeat a match (the caller drops repeats), both current at `$7` (or now) and
/// unexpired at horizon `$5`; newest first within a part.
const CONTEXT: &str = "SELECT {columns}, CAST(0 AS BIGINT) AS part FROM {ids_from} \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {ids} \
       AND (expires_at IS NULL OR expires_at > $5) \
     UNION ALL SELECT * FROM (SELECT {columns}, 1 FROM facts \
       WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {current} \
       ORDER BY id DESC LIMIT $6) AS recent \
     ORDER BY part, id DESC";

/// The owner's facts whose ids are in `$4` (see `{ids}` in [`Dialect`]), in no order,
/// unless they expired by `$5` (now).
const BY_ID: &str = "SELECT {columns} FROM {ids_from} \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND {ids} \
       AND (expires_at IS NULL OR expires_at > $5)";

/// What the fact reads above leave to the dialect: the word index's lookup, the tag test
/// (JSONB's `?` on PostgreSQL, a scan of the JSON array on SQLite) and the test of an id
/// being in `$4`, a JSON array of hyphenated ids, read as the column stores them (`uuid`
/// on PostgreSQL, 16-byte BLOB on SQLite), so a read of a few facts by id is one
/// statement whatever their number. Each id is given once.
///
/// On SQLite the ids are a table joined to `facts` (`{ids_from}`), not an `IN (…)` test:
/// SQLite answers `IN` with a list or a subquery by building a temporary B-tree of its
/// values at every run (`OpenEphemeral`: a B-tree, a pager and a page-sized buffer
/// allocated and freed), which was ~5 % of a server's CPU on reads in a profile; the join
/// seeks each id in `facts_owner_id` instead.
struct Dialect {
    /// [`MATCHES`]' head: its row, from the facts (as `facts`) holding any of `$4`'s
    /// terms.
    matching: &'static str,
    has_tag: &'static str,
    /// The test that one of the fact's `source_messages` is in conversation `$10`.
    from_conversation: &'static str,
    /// What the fact reads by id select from.
    ids_from: &'static str,
    /// The test that a row of `ids_from` is a fact whose id is in `$4`.
    ids: &'static str,
    /// Whether short queries are ranked in SQL ([`SCORED`]).
    ranks_short_queries: bool,
    /// What replaces the test `agent_id = $2` in a shared read: the agent is one of the
    /// JSON array `$2` whose memory is on (an agent whose memory was switched off, or
    /// whose settings were deleted, shares nothing). Reads without sharing keep the plain
    /// test, and their plans.
    shared_agents: &'static str,
}

/// PostgreSQL's lookup is the GIN index `facts_words` (migration 0020) over the terms as
/// a `tsvector`; `$4` is a `tsquery` of them ([`word_index::WordSearch::tsquery`]). The
/// index answers such a query whole, without rechecking the row's terms, and the
/// bitmap scan visits each matching fact once. When the words are common among the
/// owner's facts the planner reads the owner's facts through `facts_owner_id` instead
/// and tests each one's terms (cheaper then: the owner's facts are capped); kept out of
/// the owner's columns by `OFFSET 0`, the lookup became a scan of the whole table, its
/// estimate being every owner's share of the words. `uuid_send` is an id's 16 bytes.
const POSTGRES: Dialect = Dialect {
    matching: "SELECT string_agg(uuid_send(id), ''::bytea) AS ids, string_agg(search_terms, E'\\n') AS terms \
     FROM (SELECT * FROM facts WHERE array_to_tsvector(string_to_array(search_terms, ' ')) @@ CAST($4 AS tsquery)) \
       AS facts",
    has_tag: "tags ? $5",
    from_conversation: "source_messages @> jsonb_build_array(jsonb_build_object('conversation_id', CAST($10 AS text)))",
    ids_from: "facts",
    ids: "id IN (SELECT CAST(value AS uuid) FROM json_array_elements_text(CAST($4 AS json)))",
    ranks_short_queries: true,
    shared_agents: "agent_id IN (SELECT agent_id FROM agent_configs WHERE tenant_id = $1 AND memory_enabled \
       AND agent_id IN (SELECT json_array_elements_text(CAST($2 AS json))))",
};

/// SQLite's lookup is the FTS5 table `facts_fts` (migration 0019); `$4` is an FTS5 query
/// ([`word_index::WordSearch::fts5_query`]), and each hit's row is read by rowid.
/// `group_concat` copies a BLOB's bytes as they are, zeros included. FTS5 looks each term
/// up in every segment of its index through statements of its own: with `ANALYZE`'s
/// STAT4 samples of its shadow tables, SQLite plans those again at every lookup, which
/// doubled the time of a 20-word search (see [`Store::refresh_statistics`]). FTS5's own
/// `bm25()` would weigh words by their frequency across every owner's facts; both
/// backends count per owner instead.
const SQLITE: Dialect = Dialect {
    matching: "SELECT CAST(group_concat(facts.id, '') AS BLOB) AS ids, \
       group_concat(facts.search_terms, char(10)) AS terms \
     FROM (SELECT facts.* FROM facts_fts CROSS JOIN facts \
           WHERE facts_fts MATCH $4 AND facts.rowid = facts_fts.rowid) AS facts",
    has_tag: "EXISTS (SELECT 1 FROM json_each(facts.tags) WHERE json_each.value = $5)",
    from_conversation: "EXISTS (SELECT 1 FROM json_each(facts.source_messages) \
       WHERE json_extract(json_each.value, '$.conversation_id') = $10)",
    ids_from: "(SELECT unhex(value, '-') AS wanted FROM json_each($4)) AS wanted CROSS JOIN facts",
    ids: "facts.id = wanted.wanted",
    ranks_short_queries: false,
    shared_agents: "agent_id IN (SELECT agent_id FROM agent_configs WHERE tenant_id = $1 AND memory_enabled \
       AND agent_id IN (SELECT value FROM json_each($2)))",
};

/// The fact reads with their holes filled for one dialect, built once.
struct Reads {
    list: String,
    by_id: String,
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

impl Reads {
    /// The reads of one owner's facts, or with `shared` those of an owner set.
    fn new(dialect: &Dialect, shared: bool) -> Reads {
        let fill = |template: &str, current: String| {
            let filled = template
                .replace("{scored}", SCORED)
                .replace("{best_rows}", BEST_ROWS)
                .replace("{matching}", dialect.matching)
                .replace("{columns}", fact_columns!())
                .replace("{has_tag}", dialect.has_tag)
                .replace("{from_conversation}", dialect.from_conversation)
                .replace("{current}", &current)
                .replace("{ids_from}", dialect.ids_from)
                .replace("{ids}", dialect.ids);
            if shared { filled.replace("agent_id = $2", dialect.shared_agents) } else { filled }
        };
        Reads {
            list: fill(LIST, current_test("$7", "$8", "$9")),
            by_id: fill(BY_ID, String::new()),
            matches: fill(MATCHES, current_test("$6", "$7", "$8")),
            context: fill(CONTEXT, current_test("FALSE", "$7", "$5")),
            scored: dialect.ranks_short_queries.then(|| Scored {
                search: fill(SCORED_SEARCH, current_test("$7", "$8", "$9")),
                context: fill(SCORED_CONTEXT, current_test("$7", "$8", "$9")),
            }),
        }
    }

    #[cfg(test)]
    fn all(&self) -> Vec<&str> {
        let scored = self.scored.iter().flat_map(|scored| [scored.search.as_str(), scored.context.as_str()]);
        [self.list.as_str(), &self.by_id, &self.matches, &self.context].into_iter().chain(scored).collect()
    }
}

/// `template` with `{has_tag}` filled for PostgreSQL and for SQLite, in that order: the
/// statements of other store modules that filter facts by tag `$5` test it as the fact
/// reads do.
pub(super) fn with_tag_test(template: &str) -> (String, String) {
    (template.replace("{has_tag}", POSTGRES.has_tag), template.replace("{has_tag}", SQLITE.has_tag))
}

/// The owner's facts one of whose source messages is in conversation `$4`, in each
/// dialect (PostgreSQL's, SQLite's).
static FROM_CONVERSATION: LazyLock<(String, String)> = LazyLock::new(|| {
    let sql = |dialect: &Dialect| {
        concat!(
            "SELECT ",
            fact_columns!(),
            " FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND "
        )
        .to_owned()
            + &dialect.from_conversation.replace("$10", "$4")
    };
    (sql(&POSTGRES), sql(&SQLITE))
});

/// PostgreSQL's and SQLite's statements of one owner's facts (as [`with_tag_test`]
/// returns them) made reads of an owner set: the test `agent_id = $2` becomes the
/// dialect's [`Dialect::shared_agents`], as in the shared fact reads.
pub(super) fn shared_reads((postgres, sqlite): &(String, String)) -> (String, String) {
    (postgres.replace("agent_id = $2", POSTGRES.shared_agents), sqlite.replace("agent_id = $2", SQLITE.shared_agents))
}

static POSTGRES_READS: LazyLock<Reads> = LazyLock::new(|| Reads::new(&POSTGRES, false));
static SQLITE_READS: LazyLock<Reads> = LazyLock::new(|| Reads::new(&SQLITE, false));
static POSTGRES_SHARED_READS: LazyLock<Reads> = LazyLock::new(|| Reads::new(&POSTGRES, true));
static SQLITE_SHARED_READS: LazyLock<Reads> = LazyLock::new(|| Reads::new(&SQLITE, true));

/// `$4` id, `$5` new text (or NULL), `$6` its normalised form, `$7` tags (or NULL),
/// `$8` whether the score changes, `$9` the new score, `$10` now, `$11` the new text's
/// slot (or NULL), `$12` the new text's terms of the word index (or NULL). An
/// edit corrects a fact: it takes the new text's slot, and supersedes nothing itself. An
/// expired fact is not found: it is gone, if not yet swept.
const UPDATE: &str = concat!(
    "UPDATE facts SET fact = COALESCE($5, fact), normalized = COALESCE($6, normalized), \
       slot = CASE WHEN $5 IS NULL THEN slot ELSE $11 END, search_terms = COALESCE($12, search_terms), \
       tags = COALESCE($7, tags), score = CASE WHEN $8 THEN $9 ELSE score END, updated_at = $10 \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND id = $4 \
       AND (expires_at IS NULL OR expires_at > $10) RETURNING ",
    fact_columns!()
);

/// Pages of SQLite's full-text index one [`Store::merge_search_index`] step may write: a
/// bound on how long it holds the write lock (about 1 MB).
const SEARCH_INDEX_MERGE_PAGES: i64 = 256;

/// `$4` id; returns the fact as it was.
pub(super) const DELETE_ONE: &str = concat!(
    "DELETE FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND id = $4 RETURNING ",
    fact_columns!()
);

const DELETE_ALL: &str = "DELETE FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3";

/// Inserts unless the owner already has this fact (by normalised text) or holds the
/// cap. `$4` id, `$5` text, `$6` normalised text, `$7` tags, `$8` score, `$9` source,
/// `$10` conversation id, `$11` now, `$12` cap (or NULL for none), `$13` slot (or NULL),
/// `$14` when it was said, `$15` when it expires (or NULL), `$16` when it was first
/// stored (now, or an imported fact's original time), `$17` its terms of the word index
/// ([`word_index::fact_terms`]), `$18` the messages it was drawn from. The only unique
/// key an insert can meet is the duplicate key (ids are fresh), which PostgreSQL
/// indexes by the text's MD5 and SQLite by the text. Expired facts do not count towards
/// the cap: they are gone, if not yet swept.
const INSERT: &str = concat!(
    "INSERT INTO facts (tenant_id, agent_id, external_ref, id, fact, normalized, tags, score, source, \
       conversation_id, created_at, updated_at, slot, observed_at, expires_at, search_terms, source_messages) \
     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $16, $16, $13, $14, $15, $17, $18 \
     WHERE $12 IS NULL \
        OR (SELECT count(*) FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 \
              AND (expires_at IS NULL OR expires_at > $11)) < $12 \
     ON CONFLICT DO NOTHING RETURNING ",
    fact_columns!()
);

/// [`INSERT`] and the new fact's `fact.added` event in one PostgreSQL statement (see
/// [`Tx::insert_unslotted`]): `$19` the event's place in the transaction, `$20` actor,
/// `$21` actor's job, `$22` the event's data, `$23` the fact as stored (its first
/// version). Returns the fact and the deliveries its event queued, or no row.
static INSERT_WITH_EVENT_PG: LazyLock<String> = LazyLock::new(|| {
    let kind = format!("'{}'", EventType::FactAdded.as_str());
    let ctes = super::events::event_ctes(&[
        ("place", "$19"),
        ("type", kind.as_str()),
        ("now", "$11"),
        ("agent", "$2"),
        ("person", "$3"),
        ("actor", "$20"),
        ("job", "$21"),
        ("data", "$22"),
        ("fact_id", "f.id"),
        ("fact", "$23"),
        ("version", "1"),
        ("stored", "true"),
        ("from", "FROM f"),
    ]);
    format!("WITH f AS ({INSERT}), {ctes} SELECT f.*, (SELECT count(*) FROM delivery) AS deliveries FROM f")
});

/// A row of [`INSERT_WITH_EVENT_PG`].
#[derive(sqlx::FromRow)]
struct InsertedRow {
    #[sqlx(flatten)]
    fact: FactRow,
    deliveries: i64,
}

/// Deletes the owner's expired fact with normalised text `$4` (expired by `$5`, now), so
/// that the same fact said again is stored afresh rather than found as the expired one.
/// Returns it (its `fact.deleted` event). Runs only when an insert met the duplicate key
/// (or the cap), like [`SAME_FACT`], whose owner filter it shares.
const DELETE_EXPIRED_SAME: &str = concat!(
    "DELETE FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND normalized = $4 \
       AND expires_at <= $5 RETURNING ",
    fact_columns!()
);

// A slot's facts form a timeline by `observed_at`: each is current from when it was said
// until the next one was (its `valid_until`), and the one said last is current now. The
// three statements below place fact `$4` (said at `$6`) on that timeline, with `$5` the
// slot and `$7` now; expired facts take no part. Each returns the facts it changed, as
// they now are (their events).

/// The slot's fact said first after `$6`, if any: the one that supersedes `$4`.
const NEXT_IN_SLOT: &str = "SELECT id, observed_at FROM facts \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND slot = $5 AND id <> $4 \
       AND observed_at > $6 AND (expires_at IS NULL OR expires_at > $7) \
     ORDER BY observed_at, id LIMIT 1";

/// Stores `$4` as superseded by `$5`, the slot's fact said next, at `$6` (its
/// `observed_at`), `$7` now.
const SUPERSEDED_BY_NEXT: &str = concat!(
    "UPDATE facts SET superseded_by = $5, valid_until = $6, superseded_at = $7 \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND id = $4 RETURNING ",
    fact_columns!()
);

/// Ends at `$6` the facts of slot `$5` that were still current then (said by `$6`, valid
/// past it): `$4` supersedes them. A fact superseded before keeps when that happened.
const SUPERSEDE: &str = concat!(
    "UPDATE facts SET superseded_by = $4, valid_until = $6, superseded_at = COALESCE(superseded_at, $7) \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND slot = $5 AND id <> $4 \
       AND observed_at <= $6 AND (valid_until IS NULL OR valid_until > $6) \
       AND (expires_at IS NULL OR expires_at > $7) RETURNING ",
    fact_columns!()
);

/// Makes superseded fact `$4`, said again at `$5`, current again from then.
const RESTORE: &str = concat!(
    "UPDATE facts SET superseded_by = NULL, superseded_at = NULL, valid_until = NULL, observed_at = $5 \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND id = $4 RETURNING ",
    fact_columns!()
);

/// The stored fact with normalised text `$4`.
const SAME_FACT: &str = concat!(
    "SELECT ",
    fact_columns!(),
    " FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND normalized = $4"
);

/// Deletes every extracted fact (by the configured extractor or its builtin fallback)
/// older than the owner's `$4`+1-th newest extracted one; curated (manual and agent) facts
/// are never evicted. Returns the evicted facts.
const EVICT: &str = concat!(
    "DELETE FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 \
       AND source IN ('extracted', 'builtin_fallback') \
       AND id <= (SELECT id FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 \
                  AND source IN ('extracted', 'builtin_fallback') ORDER BY id DESC LIMIT 1 OFFSET $4) RETURNING ",
    fact_columns!()
);

/// Deletes up to `$2` facts, of any owner, that expired by `$1`, the longest expired first
/// (index `facts_expiring`); returns them with their tenant (their events). Their vectors
/// and history go with them (`ON DELETE CASCADE`).
const DELETE_EXPIRED: &str = concat!(
    "DELETE FROM facts WHERE id IN (SELECT id FROM facts WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2) \
     RETURNING tenant_id, ",
    fact_columns!()
);

/// A fact the sweeper deleted, with its tenant (for its event).
#[derive(sqlx::FromRow)]
pub(super) struct ExpiredRow {
    tenant_id: String,
    #[sqlx(flatten)]
    fact: FactRow,
}

/// Facts without the word index's terms (stored before migration 0019 on SQLite, 0020 on
/// PostgreSQL), a batch, found through `facts_without_terms`, which holds only them.
const WITHOUT_TERMS: &str =
    "SELECT id, tenant_id, agent_id, external_ref, fact FROM facts WHERE search_terms IS NULL LIMIT 1000";

/// Gives fact `$1` its terms `$2` (SQLite's update trigger indexes them), unless it has
/// some by now: a write of its text since it was read gave it the terms of that text.
const SET_TERMS: &str = "UPDATE facts SET search_terms = $2 WHERE id = $1 AND search_terms IS NULL";

/// The owner's curated (manual and agent) facts.
const COUNT_CURATED: &str = "SELECT count(*) FROM facts \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND source IN ('manual', 'agent')";

impl Store {
    /// The fact reads of `owners` in this store's dialect: one owner's, or an owner set's.
    fn reads(&self, owners: OwnerSet<'_>) -> &'static Reads {
        if owners.shared().is_empty() {
            self.dialect(&*POSTGRES_READS, &*SQLITE_READS)
        } else {
            self.dialect(&*POSTGRES_SHARED_READS, &*SQLITE_SHARED_READS)
        }
    }

    /// One page of the owners' facts, newest first, older than `before` (keyset).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_facts", backend = self.backend(), rows = tracing::field::Empty))]
    /// With `source_conversation`, only the facts drawn (at least in part) from it.
    pub async fn list_facts<'o>(
        &self,
        owners: impl Into<OwnerSet<'o>>,
        filter: FactFilter<'_>,
        source_conversation: Option<Uuid>,
        before: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Fact>> {
        let source_conversation = source_conversation.map(|id| id.hyphenated().to_string());
        let owners = owners.into();
        let rows: Vec<FactRow> = with_pool!(self, pool => {
            sqlx::query_as(self.reads(owners).list.as_str())
                .bind_owners(owners)
                .bind(before)
                .bind(filter.tag)
                .bind(limit)
                .bind(filter.superseded)
                .bind(filter.as_of)
                .bind(filter.horizon())
                .bind(source_conversation.as_deref())
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        facts(rows)
    }

    /// Stores a manual or agent fact unless the same one is already there, refusing it
    /// when the owner already holds `cap` facts. The cap is exact: writers of one owner
    /// are serialised (see [`Tx::insert_fact`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "remember_fact", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn remember_fact(
        &self,
        owner: Owner<'_>,
        fact: &NewFact,
        origin: Origin,
        cap: i64,
        actor: Actor,
    ) -> Result<Remembered> {
        let mut tx = self.begin_owner_change(actor, owner).await?;
        let outcome = tx.insert_fact(owner, fact, origin, Some(cap)).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    /// Imports facts (benchmarks, migrations from another memory store) in one
    /// transaction, with the duplicate rule of [`Tx::insert_fact`] and no cap. Returns
    /// how many were added.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "import_facts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn import_facts(&self, owner: Owner<'_>, facts: &[NewFact], origin: Origin) -> Result<u64> {
        let mut tx = self.begin_owner_change(Actor::Api, owner).await?;
        let mut added = 0;
        for fact in facts {
            if let Remembered::Created(_) = tx.insert_fact(owner, fact, origin, None).await? {
                added += 1;
            }
        }
        tx.commit().await?;
        Ok(added)
    }

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
            let rows: Vec<ScoredRow> = with_pool!(self, pool => {
                sqlx::query_as(scored.search.as_str())
                    .bind_owners(owners)
                    .bind(search.terms())
                    .bind(filter.tag)
                    .bind(limit)
                    .bind(filter.superseded)
                    .bind(filter.as_of)
                    .bind(filter.horizon())
                    .fetch_all(pool)
                    .await?
            });
            super::counted(&rows);
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
        self.reads(owners).scored.as_ref().filter(|_| search.words() <= SCORED_MAX_WORDS)
    }

    /// The `limit` best matches of `search` among the owners' facts that `filter` takes,
    /// best first (see [`super::ranking`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "fact_matches", backend = self.backend(), rows = tracing::field::Empty))]
    async fn rank_matches(
        &self,
        search: &word_index::WordSearch,
        owners: OwnerSet<'_>,
        filter: FactFilter<'_>,
        limit: i64,
    ) -> Result<Vec<ranking::Ranked>> {
        let (ids, terms): (Option<Vec<u8>>, Option<String>) = with_pool!(self, pool => {
            sqlx::query_as(self.reads(owners).matches.as_str())
                .bind_owners(owners)
                .bind(self.word_query(search))
                .bind(filter.tag)
                .bind(filter.superseded)
                .bind(filter.as_of)
                .bind(filter.horizon())
                .fetch_one(pool)
                .await?
        });
        let found = search.matches(&ids.unwrap_or_default(), terms.as_deref().unwrap_or_default())?;
        super::counted(&found);
        Ok(ranking::rank(&found, usize::try_from(limit).unwrap_or(0)))
    }

    /// `search`'s query in this backend's syntax: `$4` of [`MATCHES`].
    fn word_query(&self, search: &word_index::WordSearch) -> String {
        if self.is_embedded() { search.fts5_query() } else { search.tsquery() }
    }

    /// The owners' facts among `ids` (another owner's are not found), in no order.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "facts_by_id", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn facts_by_id<'o>(&self, owners: impl Into<OwnerSet<'o>>, ids: &[Uuid]) -> Result<Vec<Fact>> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let owners = owners.into();
        let ids = serde_json::Value::from(ids.iter().map(Uuid::to_string).collect::<Vec<_>>()).to_string();
        let rows: Vec<FactRow> = with_pool!(self, pool => {
            sqlx::query_as(self.reads(owners).by_id.as_str())
                .bind_owners(owners)
                .bind(ids)
                .bind(super::now())
                .fetch_all(pool)
                .await?
        });
        facts(rows)
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
                    &self.reads(owner.into()).matches,
                    search.map(|search| self.word_query(&search)).unwrap_or_default(),
                    None,
                ),
            };
        let sql = format!("{prefix}{statement}");
        with_pool!(self, pool => {
            let query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind_owner(owner).bind(param).bind(None::<&str>);
            match limit {
                Some(limit) => query.bind(limit),
                None => query,
            }
                .bind(false)
                .bind(None::<DateTime<Utc>>)
                .bind(super::now())
                .fetch_all(pool)
                .await?
                .iter()
                .map(|row| sqlx::Row::try_get::<String, _>(row, detail))
                .collect()
        })
    }

    /// Applies `changes` to one fact; `updated_at` is set even when nothing differs.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "update_fact", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn update_fact(
        &self,
        owner: Owner<'_>,
        id: Uuid,
        changes: &FactChanges,
        actor: Actor,
    ) -> Result<std::result::Result<Fact, UpdateError>> {
        let text = changes.text.as_ref();
        let terms = text.map(|t| word_index::fact_terms(&self.word_key, owner, t.text()));
        let mut tx = self.begin_change(actor).await?;
        // A macro, not a closure: each backend's query is its own type.
        macro_rules! update {
            ($sql:expr) => {
                sqlx::query_as($sql)
                    .bind_owner(owner)
                    .bind(id)
                    .bind(text.map(|t| t.text()))
                    .bind(text.map(|t| t.normalized()))
                    .bind(changes.tags.as_ref().map(Json))
                    .bind(changes.score.is_some())
                    .bind(changes.score.flatten())
                    .bind(super::now())
                    .bind(text.and_then(|t| Slot::of(t.text())).map(Slot::as_str))
                    .bind(terms.as_deref())
            };
        }
        let result: Result<Option<FactRow>> = with_tx!(tx, tx => update!(UPDATE).fetch_optional(&mut **tx).await);
        match result {
            Ok(Some(row)) => {
                let fact: Fact = row.try_into()?;
                tx.record_fact(owner, EventType::FactUpdated, EventData::fact(&fact));
                tx.commit().await?;
                Ok(Ok(fact))
            }
            Ok(None) => Ok(Err(UpdateError::NotFound)),
            Err(sqlx::Error::Database(e)) if e.is_unique_violation() => Ok(Err(UpdateError::Duplicate)),
            Err(e) => Err(e),
        }
    }

    /// Writes the word index's terms of every fact stored before the index existed, a
    /// thousand facts a transaction, so that search finds them again. Once every fact has
    /// its terms (an empty text when every word is a stop word), it reads one empty batch.
    pub(super) async fn index_facts_without_terms(&self) -> Result<()> {
        loop {
            let rows: Vec<(Uuid, String, String, String, String)> =
                with_pool!(self, pool => sqlx::query_as(WITHOUT_TERMS).fetch_all(pool).await?);
            if rows.is_empty() {
                return Ok(());
            }
            let mut tx = self.begin_write().await?;
            for (id, tenant, agent, user, fact) in rows {
                let stored = |e: String| sqlx::Error::Decode(e.into());
                let tenant = TenantId::parse(tenant).map_err(stored)?;
                let (agent, user) = (AgentId::parse(agent).map_err(stored)?, ExternalRef::parse(user).map_err(stored)?);
                let terms = word_index::fact_terms(&self.word_key, Owner::new(&tenant, &agent, &user), &fact);
                with_tx!(tx, tx => sqlx::query(SET_TERMS).bind(id).bind(terms).execute(&mut **tx).await.map(drop)?);
            }
            tx.commit().await?;
        }
    }

    /// The fingerprint of the key the word index was tagged under; `None` before the
    /// first start of a server that keys it.
    async fn word_index_fingerprint(&self) -> Result<Option<String>> {
        let sql = "SELECT fingerprint FROM word_index_key WHERE id = 1";
        Ok(with_pool!(self, pool => sqlx::query_scalar(sql).fetch_optional(pool).await?))
    }

    /// The server, at start: tags the word index again when its terms were written under
    /// another key than this store's, or under none (before 0021). In one transaction
    /// every fact's terms are cleared and the key's fingerprint stored, and
    /// [`Store::index_facts_without_terms`] then writes them again; a start cut short
    /// goes on where the last one stopped.
    pub async fn key_word_index(&self) -> Result<()> {
        let fingerprint = self.word_key.fingerprint();
        let stored = self.word_index_fingerprint().await?;
        if stored.as_deref() == Some(fingerprint.as_str()) {
            return Ok(());
        }
        let mut tx = self.begin_write().await?;
        let cleared = with_tx!(tx, tx => {
            sqlx::query("UPDATE facts SET search_terms = NULL WHERE search_terms IS NOT NULL")
                .execute(&mut **tx)
                .await?
                .rows_affected()
        });
        with_tx!(tx, tx => {
            sqlx::query(
                "INSERT INTO word_index_key (id, fingerprint) VALUES (1, $1) \
                 ON CONFLICT (id) DO UPDATE SET fingerprint = excluded.fingerprint",
            )
            .bind(&fingerprint)
            .execute(&mut **tx)
            .await
            .map(drop)?
        });
        tx.commit().await?;
        if stored.is_some() {
            tracing::warn!(
                facts = cleared,
                "the word index was tagged under another ENGRAM_RECEIPT_KEY: tagging every fact again \
                 (every replica must share the key)"
            );
        } else if cleared > 0 {
            tracing::info!(facts = cleared, "tagging the word index under the server's key");
        }
        self.index_facts_without_terms().await
    }

    /// The command line (import, export, migrate): refuses a key other than the one the
    /// server tagged the index under, whose facts it would tag so that search misses them.
    pub async fn check_word_key(&self) -> anyhow::Result<()> {
        let stored = self.word_index_fingerprint().await?;
        anyhow::ensure!(
            stored.is_none_or(|stored| stored == self.word_key.fingerprint()),
            "ENGRAM_RECEIPT_KEY is not the key the server uses (the word index is tagged under another): \
             set the server's ENGRAM_RECEIPT_KEY, or its data directory"
        );
        Ok(())
    }

    /// SQLite: merges the full-text index a bounded step towards a single segment (FTS5's
    /// `merge` with a negative page count, which merges across levels). Every write
    /// transaction adds a segment, which FTS5 merges only four at a time on its own, so an
    /// index often holds a dozen or more, and a search looks each query word up in each
    /// one: the 20-word search's lookups took 1.9 ms on the 19 segments a bulk load left,
    /// 1.1 ms on one. Once merged, a step finds nothing to do and writes nothing.
    /// PostgreSQL's GIN index has no segments: nothing to do there.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "merge_search_index", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn merge_search_index(&self) -> Result<()> {
        let Some(sql) = self.dialect(None, Some("INSERT INTO facts_fts (facts_fts, rank) VALUES ('merge', $1)")) else {
            return Ok(());
        };
        with_writer!(self, conn => sqlx::query(sql).bind(-SEARCH_INDEX_MERGE_PAGES).execute(conn).await.map(drop))
    }

    /// Returns whether the fact existed.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_fact", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_fact(&self, owner: Owner<'_>, id: Uuid, actor: Actor) -> Result<bool> {
        let mut tx = self.begin_change(actor).await?;
        let deleted = tx.delete_known(owner, id, None).await?;
        tx.commit().await?;
        Ok(deleted > 0)
    }

    /// Deletes every fact of the owner; returns how many there were.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_facts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_facts(&self, owner: Owner<'_>, actor: Actor) -> Result<u64> {
        let mut tx = self.begin_change(actor).await?;
        let deleted =
            with_tx!(tx, tx => sqlx::query(DELETE_ALL).bind_owner(owner).execute(&mut **tx).await?.rows_affected());
        if deleted == 0 {
            // Nothing was there: no change, no event.
            return Ok(0);
        }
        let data = EventData { count: Some(deleted), ..EventData::default() };
        tx.record_fact(owner, EventType::FactsForgotten, data);
        tx.commit().await?;
        Ok(deleted)
    }

    /// Deletes up to `limit` facts, of every tenant, that expired by `now`, in one
    /// transaction that writes a `fact.deleted` event (reason `expired`, actor the
    /// sweeper) for each; returns how many. Two sweepers racing delete each fact once:
    /// only the rows a `DELETE` removed come back.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_expired_facts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_expired_facts(&self, now: DateTime<Utc>, limit: i64) -> Result<u64> {
        let mut tx = self.begin_change(Actor::Sweeper).await?;
        let rows: Vec<ExpiredRow> = with_tx!(tx, tx => {
            sqlx::query_as(DELETE_EXPIRED).bind(now).bind(limit).fetch_all(&mut **tx).await?
        });
        tx.commit_swept(rows, "expired").await
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
            let rows: Vec<ScoredRow> = with_pool!(self, pool => {
                sqlx::query_as(scored.context.as_str())
                    .bind_owners(owners)
                    .bind(search.terms())
                    .bind(None::<&str>)
                    .bind(limit)
                    .bind(false)
                    .bind(filter.as_of)
                    .bind(filter.horizon())
                    .fetch_all(pool)
                    .await?
            });
            super::counted(&rows);
            return rows.into_iter().map(|row| Fact::try_from(row.fact)).collect();
        }
        let ranked = self.rank_matches(&search, owners, filter, limit).await?;
        let ids = serde_json::Value::from(ranked.iter().map(|r| r.id.to_string()).collect::<Vec<_>>()).to_string();
        let rows: Vec<PartRow> = with_pool!(self, pool => {
            sqlx::query_as(self.reads(owners).context.as_str())
                .bind_owners(owners)
                .bind(ids)
                .bind(filter.horizon())
                .bind(limit)
                .bind(filter.as_of)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
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

/// Fact writes inside a write transaction, so that the extraction worker stores facts
/// in the same transaction as its fenced job update, with the same duplicate rule and
/// cap as a manual remember.
impl Tx {
    /// Records a `fact.deleted` event (actor: the transaction's, `reason`) for each fact
    /// the sweeper deleted in this transaction, and commits; returns how many there were.
    /// With none it still commits (no change, no event) rather than leave the rollback to
    /// the drop, which on SQLite a spawned task would run.
    pub(super) async fn commit_swept(mut self, rows: Vec<ExpiredRow>, reason: &'static str) -> Result<u64> {
        let deleted = rows.len() as u64;
        for row in rows {
            let fact: Fact = row.fact.try_into()?;
            let event = NewEvent {
                kind: EventType::FactDeleted,
                agent_id: Some(fact.agent_id.as_str().to_owned()),
                external_ref: Some(fact.external_ref.as_str().to_owned()),
                data: EventData { reason: Some(reason), ..EventData::fact(&fact) },
            };
            self.record(&row.tenant_id, event);
        }
        self.commit().await?;
        Ok(deleted)
    }

    /// Inserts `fact` unless the same fact (by normalised text) is stored for this
    /// owner, in which case the stored one is returned. With a `cap`, refuses (`Full`)
    /// when the owner already holds `cap` facts; a duplicate is still `Existing`. A fact
    /// in a single-valued [`Slot`], new or said again, takes its place on the slot's
    /// timeline by when it was said (see [`Tx::place_in_slot`]): said last, it supersedes
    /// the slot's current fact; said before the current one, it is stored already
    /// superseded by the fact said after it. An expired fact said again is deleted and
    /// stored afresh.
    ///
    /// Writers of one owner are serialised first (a transaction-scoped advisory lock on
    /// PostgreSQL; SQLite's `BEGIN IMMEDIATE` already serialises every writer), so the
    /// count and the insert see every committed fact: concurrent remembers never go
    /// past the cap, and identical ones resolve to one row.
    pub async fn insert_fact(
        &mut self,
        owner: Owner<'_>,
        fact: &NewFact,
        origin: Origin,
        cap: Option<i64>,
    ) -> Result<Remembered> {
        self.lock_owner(owner).await?;
        self.insert_fact_locked(owner, fact, origin, cap, None).await
    }

    /// [`Tx::insert_fact`] once the owner is locked ([`Tx::lock_owner`]: an import locks
    /// each owner of its batch once, not once per fact), of a fact first stored at
    /// `created_at` (an import keeps the original time; `None` is now).
    pub(super) async fn insert_fact_locked(
        &mut self,
        owner: Owner<'_>,
        fact: &NewFact,
        origin: Origin,
        cap: Option<i64>,
        created_at: Option<DateTime<Utc>>,
    ) -> Result<Remembered> {
        let now = super::now();
        let created_at = created_at.unwrap_or(now);
        let observed_at = fact.observed_at.unwrap_or(now);
        let slot = Slot::of(fact.text.text());
        let mut inserted = match slot {
            None => match self.insert_unslotted(owner, fact, origin, cap, now, created_at).await? {
                Some(fact) => return Ok(Remembered::Created(fact)),
                None => None,
            },
            Some(_) => self.insert_row(owner, fact, origin, cap, now, created_at).await?,
        };
        if inserted.is_none() {
            // The duplicate key, or the cap. An expired fact of the same text is gone: it
            // is deleted (only here, so that a fresh insert costs one statement) and the
            // fact stored afresh.
            let expired: Option<FactRow> = with_tx!(self, tx => {
                sqlx::query_as(DELETE_EXPIRED_SAME)
                    .bind_owner(owner)
                    .bind(fact.text.normalized())
                    .bind(now)
                    .fetch_optional(&mut **tx)
                    .await?
            });
            if let Some(row) = expired {
                self.record_deleted(owner, row, Some("expired"))?;
                inserted = self.insert_row(owner, fact, origin, cap, now, created_at).await?;
            }
        }
        let (created, row): (bool, Option<FactRow>) = match inserted {
            Some(row) => (true, Some(row)),
            None => (
                false,
                with_tx!(self, tx => {
                    sqlx::query_as(SAME_FACT)
                        .bind_owner(owner)
                        .bind(fact.text.normalized())
                        .fetch_optional(&mut **tx)
                        .await?
                }),
            ),
        };
        let Some(row) = row else { return Ok(Remembered::Full) };
        let Some(slot) = slot else {
            let fact: Fact = row.try_into()?;
            if created {
                self.record_fact(owner, EventType::FactAdded, EventData::fact(&fact));
                return Ok(Remembered::Created(fact));
            }
            return Ok(Remembered::Existing(fact));
        };
        let row = match row.superseded_by {
            // Said again while superseded: current again from when it was said now, if
            // that is after it was replaced (said again about a time when it was still
            // true, nothing changes). A new row is never superseded yet.
            Some(_) if row.valid_until.is_none_or(|until| observed_at >= until) => {
                let restored: FactRow = with_tx!(self, tx => {
                    sqlx::query_as(RESTORE).bind_owner(owner).bind(row.id).bind(observed_at).fetch_one(&mut **tx).await?
                });
                let placed = self.place_in_slot(owner, restored, slot, observed_at, now).await?;
                let fact: Fact = placed.try_into()?;
                let kind = if fact.superseded_by.is_none() { EventType::FactRestored } else { EventType::FactUpdated };
                self.record_fact(owner, kind, EventData::fact(&fact));
                return Ok(Remembered::Existing(fact));
            }
            Some(_) => return Ok(Remembered::Existing(row.try_into()?)),
            None => row,
        };
        if created {
            let placed = self.place_in_slot(owner, row, slot, observed_at, now).await?;
            let fact: Fact = placed.try_into()?;
            self.record_fact(owner, EventType::FactAdded, EventData::fact(&fact));
            return Ok(Remembered::Created(fact));
        }
        // The slot's current fact said again: the slot's other facts still current when
        // it was said give way to it (an edit may have put a second one there), and its
        // own `observed_at` stays (it was true since then).
        let since = row.observed_at.max(observed_at);
        self.supersede_before(owner, row.id, slot, since, now).await?;
        Ok(Remembered::Existing(row.try_into()?))
    }

    /// Runs [`INSERT`]: the new row, or `None` when the duplicate key or the cap stopped it.
    async fn insert_row(
        &mut self,
        owner: Owner<'_>,
        fact: &NewFact,
        origin: Origin,
        cap: Option<i64>,
        now: DateTime<Utc>,
        created_at: DateTime<Utc>,
    ) -> Result<Option<FactRow>> {
        let stored = new_row(owner, fact, origin, now, created_at);
        let normalized = fact.text.normalized();
        let terms = word_index::fact_terms(&self.2, owner, &stored.fact);
        Ok(with_tx!(self, tx => {
            bind_insert(sqlx::query_as(INSERT), owner, &stored, normalized, now, cap, terms)
                .fetch_optional(&mut **tx)
                .await?
        }))
    }

    /// Inserts a fact that takes no slot with its `fact.added` event, or returns `None`
    /// when the duplicate key or the cap stopped it. On PostgreSQL, when the event may
    /// be written inline ([`Tx::inline_event`]), one statement writes both
    /// ([`INSERT_WITH_EVENT_PG`]; a remember's round trips go from four to three), and
    /// the event carries the fact as that statement stores it ([`new_row`]). Otherwise
    /// the event is recorded for the commit.
    async fn insert_unslotted(
        &mut self,
        owner: Owner<'_>,
        fact: &NewFact,
        origin: Origin,
        cap: Option<i64>,
        now: DateTime<Utc>,
        created_at: DateTime<Utc>,
    ) -> Result<Option<Fact>> {
        if let (Some((place, actor)), super::Backend::Postgres(tx)) = (self.inline_event(), &mut self.0) {
            let stored = new_row(owner, fact, origin, now, created_at);
            let data = EventData::fact(&stored);
            let terms = word_index::fact_terms(&self.2, owner, &stored.fact);
            let row: Option<InsertedRow> = bind_insert(
                sqlx::query_as(INSERT_WITH_EVENT_PG.as_str()),
                owner,
                &stored,
                fact.text.normalized(),
                now,
                cap,
                terms,
            )
            .bind(place)
            .bind(actor.kind())
            .bind(actor.job_id())
            .bind(Json(&data))
            .bind(data.fact.as_ref().map(Json))
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else { return Ok(None) };
            self.wrote_event(EventType::FactAdded, owner.tenant().as_str(), row.deliveries);
            return Ok(Some(row.fact.try_into()?));
        }
        let Some(row) = self.insert_row(owner, fact, origin, cap, now, created_at).await? else { return Ok(None) };
        let fact: Fact = row.try_into()?;
        self.record_fact(owner, EventType::FactAdded, EventData::fact(&fact));
        Ok(Some(fact))
    }

    /// Places `row`, a current fact of `slot` said at `observed_at`, on the slot's
    /// timeline: superseded by the fact said next, if one was, and superseding the facts
    /// still current when it was said. Returns `row` as it now is.
    async fn place_in_slot(
        &mut self,
        owner: Owner<'_>,
        row: FactRow,
        slot: Slot,
        observed_at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<FactRow> {
        let next: Option<(Uuid, DateTime<Utc>)> = with_tx!(self, tx => {
            sqlx::query_as(NEXT_IN_SLOT)
                .bind_owner(owner)
                .bind(row.id)
                .bind(slot.as_str())
                .bind(observed_at)
                .bind(now)
                .fetch_optional(&mut **tx)
                .await?
        });
        let row = match next {
            Some((next, said)) => with_tx!(self, tx => {
                sqlx::query_as(SUPERSEDED_BY_NEXT)
                    .bind_owner(owner)
                    .bind(row.id)
                    .bind(next)
                    .bind(said)
                    .bind(now)
                    .fetch_one(&mut **tx)
                    .await?
            }),
            None => row,
        };
        self.supersede_before(owner, row.id, slot, observed_at, now).await?;
        Ok(row)
    }

    /// Supersedes with fact `id` the facts of `slot` still current at `at` (see
    /// [`SUPERSEDE`]), recording their events.
    async fn supersede_before(
        &mut self,
        owner: Owner<'_>,
        id: Uuid,
        slot: Slot,
        at: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Result<()> {
        let changed: Vec<FactRow> = with_tx!(self, tx => {
            sqlx::query_as(SUPERSEDE)
                .bind_owner(owner)
                .bind(id)
                .bind(slot.as_str())
                .bind(at)
                .bind(now)
                .fetch_all(&mut **tx)
                .await?
        });
        for other in changed {
            let other: Fact = other.try_into()?;
            self.record_fact(owner, EventType::FactSuperseded, EventData::fact(&other));
        }
        Ok(())
    }

    /// Serialises the writers of one owner until the transaction ends (see
    /// [`Tx::insert_fact`]): PostgreSQL's advisory lock of the owner, unless the
    /// transaction took it when it began ([`Store::begin_owner_change`]); SQLite's
    /// `BEGIN IMMEDIATE` serialises every writer already.
    pub(super) async fn lock_owner(&mut self, owner: Owner<'_>) -> Result<()> {
        match &mut self.0 {
            super::Backend::Postgres(tx) => tx.lock_owner(owner).await,
            super::Backend::Sqlite(_) => Ok(()),
        }
    }

    /// How many extracted facts the owner may hold under `cap`: the cap minus their
    /// curated facts (zero or less when curated facts fill it). Locks the owner first, so
    /// the answer holds until the transaction ends.
    pub async fn extracted_room(&mut self, owner: Owner<'_>, cap: i64) -> Result<i64> {
        self.lock_owner(owner).await?;
        let curated: i64 = with_tx!(self, tx => {
            sqlx::query_scalar(COUNT_CURATED)
                .bind(owner.tenant().as_str())
                .bind(owner.agent().as_str())
                .bind(owner.user().as_str())
                .fetch_one(&mut **tx)
                .await?
        });
        Ok(cap - curated)
    }

    /// Deletes the owner's oldest extracted facts beyond the newest `keep` extracted ones
    /// (curated facts are never evicted); returns how many.
    pub async fn evict_oldest(&mut self, owner: Owner<'_>, keep: i64) -> Result<u64> {
        let evicted: Vec<FactRow> = with_tx!(self, tx => {
            sqlx::query_as(EVICT).bind_owner(owner).bind(keep).fetch_all(&mut **tx).await?
        });
        let done = evicted.len() as u64;
        for row in evicted {
            self.record_deleted(owner, row, Some("evicted"))?;
        }
        Ok(done)
    }

    /// Deletes the owner's extracted facts drawn only from `conversation` (every one of
    /// their source messages is in it), each with its `fact.deleted` event (reason
    /// `conversation_deleted`); returns how many. A fact drawn from another conversation
    /// too stays: something else said it.
    pub(super) async fn delete_drawn_only_from(&mut self, owner: Owner<'_>, conversation: Uuid) -> Result<u64> {
        self.lock_owner(owner).await?;
        let sql = self.dialect(&FROM_CONVERSATION.0, &FROM_CONVERSATION.1).as_str();
        let id = conversation.hyphenated().to_string();
        let rows: Vec<FactRow> = with_tx!(self, tx => {
            sqlx::query_as(sql).bind_owner(owner).bind(id.as_str()).fetch_all(&mut **tx).await?
        });
        let mut deleted = 0;
        for row in rows {
            if row.source_messages.0.iter().all(|source| source.conversation_id == conversation) {
                deleted += self.delete_known(owner, row.id, Some("conversation_deleted")).await?;
            }
        }
        Ok(deleted)
    }

    /// Deletes the owner's fact `id`; returns 1 when it was there. `reason` says why, on
    /// its event, when the owner's caller did not ask for it.
    pub async fn delete_known(&mut self, owner: Owner<'_>, id: Uuid, reason: Option<&'static str>) -> Result<u64> {
        let row: Option<FactRow> = with_tx!(self, tx => {
            sqlx::query_as(DELETE_ONE).bind_owner(owner).bind(id).fetch_optional(&mut **tx).await?
        });
        let Some(row) = row else { return Ok(0) };
        self.record_deleted(owner, row, reason)?;
        Ok(1)
    }

    /// Records the `fact.deleted` event of `row`, with the fact as it was.
    fn record_deleted(&mut self, owner: Owner<'_>, row: FactRow, reason: Option<&'static str>) -> Result<()> {
        let fact: Fact = row.try_into()?;
        self.record_fact(owner, EventType::FactDeleted, EventData { reason, ..EventData::fact(&fact) });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SQLite's reads of facts by id seek each id rather than build a temporary B-tree of
    /// them (see [`Dialect`]).
    #[tokio::test]
    async fn reading_facts_by_id_builds_no_temporary_b_tree() {
        let reads = Reads::new(&SQLITE, false);
        for sql in [reads.by_id.as_str(), reads.context.as_str()] {
            let opcodes = super::super::tests::sqlite_opcodes(sql).await;
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
        let super::super::Backend::Sqlite(pool) = &store.backend else {
            panic!("sqlite::memory: opened {}", store.backend())
        };
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

    /// The start's backfill of word-index terms (`Store::migrate`; the API test
    /// `facts_stored_before_the_word_index_are_found_after_the_upgrade` runs it on a
    /// database of the build before, on both backends): it finds the facts without terms
    /// through their own index, never a scan of the table, and never replaces terms a
    /// write of the fact's text gave it since it was read.
    #[tokio::test]
    async fn the_terms_backfill_reads_an_index_and_replaces_no_written_terms() {
        let path = std::env::temp_dir().join(format!("engram-terms-{}.db", Uuid::now_v7().simple()));
        let url = format!("sqlite://{}?mode=rwc", path.display());
        let store = Store::connect(&url, 2, std::time::Duration::from_secs(5)).await.expect("SQLite");
        store.migrate().await.expect("the start's migrations");
        let super::super::Backend::Sqlite(pool) = &store.backend else { panic!("{url} opened SQLite") };
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {WITHOUT_TERMS}")))
                .fetch_all(pool)
                .await
                .expect("the plan");
        assert!(plan.iter().any(|step| step.3.contains("USING INDEX facts_without_terms")), "{plan:?}");

        let (tenant, agent) = (TenantId::parse("t".into()).unwrap(), AgentId::parse("a".into()).unwrap());
        let user = ExternalRef::parse("caroline".into()).unwrap();
        let owner = Owner::new(&tenant, &agent, &user);
        let fact = crate::domain::fact::FactInput { fact: "Caroline drinks green tea".into(), ..Default::default() }
            .validate(super::super::now())
            .unwrap();
        store.import_facts(owner, &[fact], Origin::Manual).await.unwrap();
        let id: Uuid = sqlx::query_scalar("SELECT id FROM facts").fetch_one(pool).await.unwrap();
        let set = sqlx::query(SET_TERMS).bind(id).bind("stale").execute(pool).await.unwrap();
        assert_eq!(set.rows_affected(), 0, "terms already written are not replaced");
        let query = SearchQuery::parse("tea").unwrap();
        assert_eq!(store.search_facts(owner, &query, FactFilter::CURRENT, 10).await.unwrap().len(), 1);
        store.close().await;
        for suffix in ["", "-wal", "-shm"] {
            let _ = std::fs::remove_file(format!("{}{suffix}", path.display()));
        }
    }

    #[test]
    fn every_hole_of_the_reads_is_filled() {
        for reads in [Reads::new(&POSTGRES, false), Reads::new(&SQLITE, false)] {
            for sql in reads.all() {
                assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
                assert!(sql.contains("agent_id = $2"), "one owner's read names its agent: {sql}");
            }
        }
    }

    /// A shared read tests every agent of its set, in each place a read of one owner
    /// names its agent, and only through agents whose memory is on.
    #[test]
    fn shared_reads_name_no_single_agent() {
        for (dialect, single) in [(&POSTGRES, &*POSTGRES_READS), (&SQLITE, &*SQLITE_READS)] {
            let shared = Reads::new(dialect, true);
            for (sql, one) in shared.all().into_iter().zip(single.all()) {
                assert!(!sql.contains("agent_id = $2"), "{sql}");
                assert_eq!(sql.matches("AND memory_enabled").count(), one.matches("agent_id = $2").count(), "{sql}");
            }
        }
    }
}
