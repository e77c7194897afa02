//! The reads of an owner's facts, and what the two dialects fill in them: a page of the
//! list and facts by id here; the search's statements ([`super::search`]) and the vectors'
//! (`crate::vectors`) take the same holes, the filter's test above all.

use std::sync::LazyLock;

use uuid::Uuid;

use super::{
    Fact, FactFilter, FactRow,
    binds::{BindFilter, BindOwners},
    fact_columns, facts,
};
use crate::{Result, Store, domain::owner::OwnerSet, with_pool};

// Every statement filters on the owner first: `$1` tenant, `$2` agent, `$3` external ref
// (index `facts_owner_id`), and those reading through a [`FactFilter`] test it as
// `{filter}`, bound `$5`–`$8` ([`BindFilter`]). The remaining binds are listed above each.

/// Which of the owner's facts a [`FactFilter`] takes: tag `$5` (or all when NULL), and
/// current by [`current_test`] with `$6` whether superseded facts are wanted, `$7` the time
/// asked about (or NULL) and `$8` the expiry horizon ([`FactFilter::horizon`]).
const FILTER: &str = "($5 IS NULL OR {has_tag}) AND {current}";

/// The test of a fact being current, for statements that bind whether superseded facts
/// are wanted as `superseded`, the time asked about (or NULL for now) as `as_of` and the
/// expiry horizon ([`FactFilter::horizon`]) as `horizon`. At a time T a fact is current
/// when it was said by then and not yet replaced (observed_at <= T < valid_until); without
/// a time, when it is not superseded (or superseded ones are wanted). Either way, never
/// once expired. Column names are unqualified: every statement using it reads one table
/// with these names (`facts`, or the PostgreSQL search's `hits`).
fn current_test(superseded: &str, as_of: &str, horizon: &str) -> String {
    format!(
        "(CASE WHEN {as_of} IS NULL THEN ({superseded} OR superseded_by IS NULL) \
           ELSE (observed_at <= {as_of} AND (valid_until IS NULL OR valid_until > {as_of})) END) \
         AND (expires_at IS NULL OR expires_at > {horizon})"
    )
}

/// One page, newest first. `$4` cursor id (or NULL), `$5`–`$8` the filter, `$9` limit,
/// `$10` a conversation (its hyphenated id, or NULL) one of the fact's source messages
/// must be in.
const LIST: &str = "SELECT {columns} FROM facts \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND ($4 IS NULL OR id < $4) \
       AND {filter} AND ($10 IS NULL OR {from_conversation}) \
     ORDER BY id DESC LIMIT $9";

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
pub(super) struct Dialect {
    /// [`super::search::MATCHES`]' head: its row, from the facts (as `facts`) holding any of `$4`'s
    /// terms.
    matching: &'static str,
    has_tag: &'static str,
    /// The test that one of the fact's `source_messages` is in conversation `$10`.
    from_conversation: &'static str,
    /// What the fact reads by id select from.
    ids_from: &'static str,
    /// The test that a row of `ids_from` is a fact whose id is in `$4`.
    ids: &'static str,
    /// Whether short queries are ranked in SQL ([`super::search::SCORED`]).
    pub(super) ranks_short_queries: bool,
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

impl Dialect {
    /// `template` with this dialect's holes filled; with `shared`, made a read of an
    /// owner set (the test `agent_id = $2` becomes [`Dialect::shared_agents`]).
    pub(super) fn fill(&self, template: &str, shared: bool) -> String {
        let filled = template
            .replace("{filter}", FILTER)
            .replace("{current}", &current_test("$6", "$7", "$8"))
            .replace("{matching}", self.matching)
            .replace("{columns}", fact_columns!())
            .replace("{has_tag}", self.has_tag)
            .replace("{from_conversation}", self.from_conversation)
            .replace("{ids_from}", self.ids_from)
            .replace("{ids}", self.ids);
        if shared { filled.replace("agent_id = $2", self.shared_agents) } else { filled }
    }
}

/// Statements built once for each dialect, of one owner and of an owner set.
pub(super) struct PerDialect<T> {
    postgres: T,
    sqlite: T,
    postgres_shared: T,
    sqlite_shared: T,
}

impl<T> PerDialect<T> {
    pub(super) fn new(build: impl Fn(&Dialect, bool) -> T) -> PerDialect<T> {
        PerDialect {
            postgres: build(&POSTGRES, false),
            sqlite: build(&SQLITE, false),
            postgres_shared: build(&POSTGRES, true),
            sqlite_shared: build(&SQLITE, true),
        }
    }

    /// The statements of `owners` in `store`'s dialect: one owner's, or an owner set's.
    pub(super) fn of(&self, store: &Store, owners: OwnerSet<'_>) -> &T {
        if owners.shared().is_empty() {
            store.dialect(&self.postgres, &self.sqlite)
        } else {
            store.dialect(&self.postgres_shared, &self.sqlite_shared)
        }
    }

    /// SQLite's statements of one owner, for the tests of their plans.
    #[cfg(test)]
    pub(super) fn sqlite(&self) -> &T {
        &self.sqlite
    }

    /// Checks every statement `all` lists: each hole filled, one owner's reads naming
    /// their agent, and the shared ones testing every agent of the set in each place
    /// the one owner's read names it, only through agents whose memory is on.
    #[cfg(test)]
    pub(super) fn check<'a>(&'a self, all: impl Fn(&'a T) -> Vec<&'a str>) {
        for (single, shared) in [(&self.postgres, &self.postgres_shared), (&self.sqlite, &self.sqlite_shared)] {
            for (one, set) in all(single).into_iter().zip(all(shared)) {
                for sql in [one, set] {
                    assert!(!sql.contains('{') && !sql.contains('}'), "{sql}");
                }
                assert!(one.contains("agent_id = $2"), "one owner's read names its agent: {one}");
                assert!(!set.contains("agent_id = $2"), "{set}");
                assert_eq!(set.matches("AND memory_enabled").count(), one.matches("agent_id = $2").count(), "{set}");
            }
        }
    }
}

/// A page of the list and the reads by id, filled for one dialect.
pub(super) struct Reads {
    list: String,
    pub(super) by_id: String,
}

impl Reads {
    fn new(dialect: &Dialect, shared: bool) -> Reads {
        Reads { list: dialect.fill(LIST, shared), by_id: dialect.fill(BY_ID, shared) }
    }
}

pub(super) static READS: LazyLock<PerDialect<Reads>> = LazyLock::new(|| PerDialect::new(Reads::new));

/// `template` with `{filter}` (the test of a [`FactFilter`], bound `$5`–`$8`) and the
/// dialects' other holes filled for PostgreSQL and for SQLite, in that order, with
/// `shared` for an owner set: the statements of other store modules that read facts
/// through a filter test it as the fact reads do.
pub(crate) fn with_filter_test(template: &str, shared: bool) -> (String, String) {
    (POSTGRES.fill(template, shared), SQLITE.fill(template, shared))
}

/// The owner's facts one of whose source messages is in conversation `$4`, in each
/// dialect (PostgreSQL's, SQLite's).
pub(super) static FROM_CONVERSATION: LazyLock<(String, String)> = LazyLock::new(|| {
    let sql = "SELECT {columns} FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 \
       AND {from_conversation}";
    let (postgres, sqlite) = with_filter_test(sql, false);
    (postgres.replace("$10", "$4"), sqlite.replace("$10", "$4"))
});

impl Store {
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
            sqlx::query_as(READS.of(self, owners).list.as_str())
                .bind_owners(owners)
                .bind(before)
                .bind_filter(filter)
                .bind(limit)
                .bind(source_conversation.as_deref())
                .fetch_all(pool)
                .await?
        });
        crate::counted(&rows);
        facts(rows)
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
            sqlx::query_as(READS.of(self, owners).by_id.as_str())
                .bind_owners(owners)
                .bind(ids)
                .bind(crate::now())
                .fetch_all(pool)
                .await?
        });
        facts(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_hole_of_the_reads_is_filled() {
        READS.check(|reads| vec![&reads.list, &reads.by_id]);
    }
}
