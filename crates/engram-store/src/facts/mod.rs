//! Facts about end users, scoped to one tenant, agent and user (an [`Owner`]): list,
//! remember (deduplicated by the normalised text, which is the table's unique key),
//! full-text search, update, delete, and the reads of the memory context.
//!
//! Search finds the owner's term of each query word's stem in a word index Engram
//! writes with each fact ([`crate::word_index`]): PostgreSQL's GIN index over
//! `search_terms`, SQLite's FTS5 table `facts_fts`; only that lookup differs between the
//! backends. [`crate::ranking`] ranks what it finds, for both, by the number of distinct
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
//!
//! The statements and their callers live by what they do: [`reads`] (lists and reads by
//! id, and the holes each dialect fills), [`search`] (full-text search, its ranking
//! statements and the memory context), [`remember`] (the write transaction's insert,
//! slot timeline, cap and eviction), [`edits`] (update and deletes) and [`word_terms`]
//! (the upkeep of the word index's terms). [`binds`] binds what their statements share.

mod binds;
mod edits;
mod reads;
mod remember;
mod search;
mod word_terms;

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

pub(crate) use self::{
    binds::{BindFilter, BindOwner, BindOwners},
    edits::ExpiredRow,
    reads::with_filter_test,
    remember::sources,
};
use crate::{
    Result, Tx,
    domain::{
        fact::{Fact, Source, SourceMessage},
        ids::{AgentId, ExternalRef},
        owner::Owner,
    },
};

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
    /// The facts that were current at this time instead of now (see
    /// [`reads`]'s `{filter}`);
    /// `superseded` does not apply then.
    pub as_of: Option<DateTime<Utc>>,
}

impl FactFilter<'_> {
    /// Every current fact: what memory context and recall read.
    pub const CURRENT: FactFilter<'static> = FactFilter { tag: None, superseded: false, as_of: None };

    /// The expiry horizon the reads bind: a fact expiring at or before it is left out.
    /// Now, or `as_of` when that is later: an expired fact is gone whatever time is
    /// asked about, and one that expires before `as_of` was no longer current then.
    pub(crate) fn horizon(&self) -> DateTime<Utc> {
        let now = crate::now();
        self.as_of.map_or(now, |as_of| as_of.max(now))
    }
}

/// A search hit: the fact and the share (0–1] of the query's words it matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub fact: Fact,
    pub relevance: f64,
    /// How rare the query words it matches are: the sum, over them, of one over the number
    /// of the owner's matching facts that hold the word (see [`crate::ranking`]). Full text ranks by
    /// it after the count of words; recall by meaning weighs full-text hits by it.
    pub rarity: f64,
}

#[derive(sqlx::FromRow)]
pub(crate) struct FactRow {
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
pub(crate) use fact_columns;

/// Fact writes inside a write transaction, so that the extraction worker stores facts
/// in the same transaction as its fenced job update, with the same duplicate rule and
/// cap as a manual remember.
impl Tx {
    /// Serialises the writers of one owner until the transaction ends (see
    /// [`Tx::insert_fact`]): PostgreSQL's advisory lock of the owner, unless the
    /// transaction took it when it began ([`Store::begin_owner_change`]); SQLite's
    /// `BEGIN IMMEDIATE` serialises every writer already.
    pub(crate) async fn lock_owner(&mut self, owner: Owner<'_>) -> Result<()> {
        match &mut self.0 {
            crate::Backend::Postgres(tx) => tx.lock_owner(owner).await,
            crate::Backend::Sqlite(_) => Ok(()),
        }
    }
}
