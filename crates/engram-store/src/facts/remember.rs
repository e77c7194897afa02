//! Remembering facts: the write transaction's insert (deduplicated, under the cap), the
//! slot timeline it places a fact on (what it supersedes, and what supersedes it), and
//! the eviction that makes an extraction's room.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use sqlx::{Database, Encode, Type, query::QueryAs, types::Json};
use uuid::Uuid;

use super::{FactRow, Remembered, binds::BindOwner, fact_columns};
use crate::{
    Result, Store, Tx,
    domain::{
        event::{Actor, EventData, EventType},
        fact::{Fact, NewFact, Origin, SourceMessage, stored_precision},
        owner::Owner,
        slot::Slot,
    },
    with_tx, word_index,
};

/// A fact to insert, and what its row is computed from: the owner, where it came from,
/// the cap (`None`: none), now and when it was first stored (now, or an imported fact's
/// original time).
#[derive(Clone, Copy)]
struct Insertion<'a> {
    owner: Owner<'a>,
    fact: &'a NewFact,
    origin: Origin,
    cap: Option<i64>,
    now: DateTime<Utc>,
    created_at: DateTime<Utc>,
}

/// The new fact as [`INSERT`] stores it, every column computed here (times at the
/// precision both databases keep), so that an event written by the same statement (see
/// [`Tx::insert_unslotted`]) carries the stored fact; and its terms of the word index
/// under `key`.
fn new_row(insertion: Insertion<'_>, key: &word_index::WordKey) -> (Fact, String) {
    let Insertion { owner, fact, origin, now, .. } = insertion;
    let created_at = stored_precision(insertion.created_at);
    let row = Fact {
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
    };
    let terms = word_index::fact_terms(key, owner, &row.fact);
    (row, terms)
}

/// The messages of `origin`'s conversation numbered `said_in`, as a fact stores them;
/// none for a fact of no conversation.
pub(crate) fn sources(origin: Origin, said_in: &[i64]) -> Vec<SourceMessage> {
    match origin.conversation_id() {
        Some(conversation_id) => said_in.iter().map(|&seq| SourceMessage { conversation_id, seq }).collect(),
        None => Vec::new(),
    }
}

/// Binds [`INSERT`]'s `$1`–`$18`: the insertion's owner, `stored` and `terms` (from
/// [`new_row`]) with the duplicate key, now and the cap. The statements built on it add
/// their own parameters after these.
fn bind_insert<'q, DB: Database, O>(
    query: QueryAs<'q, DB, O, <DB as Database>::Arguments>,
    insertion: Insertion<'q>,
    stored: &'q Fact,
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
    bool: Encode<'q, DB> + Type<DB>,
{
    query
        .bind_owner(insertion.owner)
        .bind(stored.id)
        .bind(stored.fact.as_str())
        .bind(insertion.fact.text.normalized())
        .bind(Json(&stored.tags))
        .bind(stored.score)
        .bind::<&'q str>(stored.source.as_str())
        .bind(stored.conversation_id)
        .bind(insertion.now)
        .bind(insertion.cap)
        .bind(Slot::of(&stored.fact).map(|slot| -> &'q str { slot.as_str() }))
        .bind(stored.observed_at)
        .bind(stored.expires_at)
        .bind(stored.created_at)
        .bind(terms)
        .bind(Json(&stored.source_messages))
}

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
    let ctes = crate::events::event_ctes(&[
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

/// The owner's curated (manual and agent) facts.
const COUNT_CURATED: &str = "SELECT count(*) FROM facts \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND source IN ('manual', 'agent')";

impl Store {
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
}

/// Fact writes inside a write transaction, so that the extraction worker stores facts
/// in the same transaction as its fenced job update, with the same duplicate rule and
/// cap as a manual remember.
impl Tx {
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
    pub(crate) async fn insert_fact_locked(
        &mut self,
        owner: Owner<'_>,
        fact: &NewFact,
        origin: Origin,
        cap: Option<i64>,
        created_at: Option<DateTime<Utc>>,
    ) -> Result<Remembered> {
        let now = crate::now();
        let insertion = Insertion { owner, fact, origin, cap, now, created_at: created_at.unwrap_or(now) };
        let observed_at = fact.observed_at.unwrap_or(now);
        let slot = Slot::of(fact.text.text());
        let mut inserted = match slot {
            None => match self.insert_unslotted(insertion).await? {
                Some(fact) => return Ok(Remembered::Created(fact)),
                None => None,
            },
            Some(_) => self.insert_row(insertion).await?,
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
                inserted = self.insert_row(insertion).await?;
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
    async fn insert_row(&mut self, insertion: Insertion<'_>) -> Result<Option<FactRow>> {
        let (stored, terms) = new_row(insertion, &self.2);
        Ok(with_tx!(self, tx => {
            bind_insert(sqlx::query_as(INSERT), insertion, &stored, terms).fetch_optional(&mut **tx).await?
        }))
    }

    /// Inserts a fact that takes no slot with its `fact.added` event, or returns `None`
    /// when the duplicate key or the cap stopped it. On PostgreSQL, when the event may
    /// be written inline ([`Tx::inline_event`]), one statement writes both
    /// ([`INSERT_WITH_EVENT_PG`]; a remember's round trips go from four to three), and
    /// the event carries the fact as that statement stores it ([`new_row`]). Otherwise
    /// the event is recorded for the commit.
    async fn insert_unslotted(&mut self, insertion: Insertion<'_>) -> Result<Option<Fact>> {
        let owner = insertion.owner;
        if let (Some((place, actor)), crate::Backend::Postgres(tx)) = (self.inline_event(), &mut self.0) {
            let (stored, terms) = new_row(insertion, &self.2);
            let data = EventData::fact(&stored);
            let row: Option<InsertedRow> =
                bind_insert(sqlx::query_as(INSERT_WITH_EVENT_PG.as_str()), insertion, &stored, terms)
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
        let Some(row) = self.insert_row(insertion).await? else { return Ok(None) };
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
}
