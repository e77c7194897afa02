//! The extraction job's reads and its one fenced write.

use sqlx::types::Json;
use uuid::Uuid;

use crate::domain::{
    event::{Actor, EventData, EventType},
    extracted::{Candidate, Revision},
    fact::{Fact, NewFact, Origin, Source, SourceMessage, merge_sources},
    message::Message,
    owner::Owner,
    policy::Policy,
};
use crate::{
    Result, Store, Tx,
    facts::{BindOwner, FactRow, Remembered, fact_columns, sources},
    jobs::queue::ClaimedJob,
    messages::{MessageRow, message_columns},
    policy::{POLICY_SQL, PolicyRow},
    usage::JobCost,
    with_pool, with_tx,
};

/// Everything the extraction needs, read when the job starts.
#[derive(Debug)]
pub struct ExtractionInput {
    pub policy: Policy,
    /// The conversation's own `memory` flag (false: opted out since the job was queued).
    pub conversation_memory: bool,
    /// The job's segment, then the context before it, oldest first.
    pub messages: Vec<Message>,
}

/// Messages before a segment that are read again, as context for its new ones: about ten
/// exchanges, so that "there", "she" or "the new job" in the segment finds what it names
/// when that was said a few turns earlier (a rolling segment of three user turns is about
/// six messages, and would otherwise often start mid-topic). The extractors store only
/// what the segment's own user lines say (the builtin reads only them; an LLM's facts
/// must be grounded in them), so the context never makes a fact twice; it costs prompt
/// tokens only.
const CONTEXT_MESSAGES: i64 = 20;

/// The most messages one extraction reads: its memory cost is bounded whatever the
/// thread's length. When more are new, the newest are read (what the person said most
/// recently wins); the older ones are passed over, and docs/behaviour.md says so.
const MAX_EXTRACTION_MESSAGES: i64 = 200;

impl Store {
    /// `None` when the conversation no longer exists. Reads at most
    /// [`MAX_EXTRACTION_MESSAGES`]: the newest up to the job's `through_seq`, starting
    /// [`CONTEXT_MESSAGES`] before its segment (its `from_seq`, fixed when it was queued,
    /// so a retry reads what the first attempt read).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "extraction_input", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn extraction_input(&self, job: &ClaimedJob) -> Result<Option<ExtractionInput>> {
        let memory_sql = "SELECT memory FROM conversations WHERE id = $1 AND tenant_id = $2";
        // Uses the UNIQUE (conversation_id, seq) index.
        let messages_sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq <= $3 AND seq > $4 \
             ORDER BY seq DESC LIMIT $5"
        );
        let owner = job.owner();
        let (conversation_memory, policy, messages): (bool, PolicyRow, Vec<MessageRow>) = with_pool!(self, pool => {
            let found: Option<bool> =
                sqlx::query_scalar(memory_sql).bind(job.conversation_id).bind(job.tenant_id.as_str()).fetch_optional(pool).await?;
            let Some(memory) = found else { return Ok(None) };
            let policy = sqlx::query_as(POLICY_SQL)
                .bind_owner(owner)
                .fetch_one(pool)
                .await?;
            let messages = sqlx::query_as(messages_sql)
                .bind(job.conversation_id)
                .bind(job.tenant_id.as_str())
                .bind(job.through_seq)
                .bind(job.from_seq - CONTEXT_MESSAGES)
                .bind(MAX_EXTRACTION_MESSAGES)
                .fetch_all(pool)
                .await?;
            (memory, policy, messages)
        });
        Ok(Some(ExtractionInput {
            policy: policy.into(),
            conversation_memory,
            // Read newest first to keep the newest; handed over oldest first.
            messages: messages.into_iter().rev().map(Message::try_from).collect::<Result<_>>()?,
        }))
    }

    /// Stores what the job found in one transaction that first marks the job succeeded
    /// (with the reason it fell back, if it did),
    /// fenced by its lease: a job cancelled (consent refused, erasure) or re-leased since it
    /// was claimed stores nothing and this returns `None`; so does every part of it or none.
    ///
    /// In order: `revisions` (a deletion, or a replacement: the new fact supersedes the one
    /// it replaces, whatever room there is), then the `candidates` in the order given
    /// (the best first) while there is room under `max_facts` beside the manual facts. A
    /// candidate that repeats a stored fact refreshes it instead (see [`REFRESH`]); one
    /// that is the same text as a stored fact is skipped by the unique key; a new one is
    /// stored with its vector of `model`, when it has one. The oldest extracted facts
    /// beyond the room are evicted; manual facts never are (see the facts store's module
    /// docs). Revisions name facts the extractor was shown, all of the job's owner, and
    /// every statement is scoped to that owner too: a fact deleted meanwhile is passed
    /// over (its replacement is stored as a new fact).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "store_extracted_facts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn store_extracted_facts(
        &self,
        job: &ClaimedJob,
        found: &Found<'_>,
        max_facts: i64,
    ) -> Result<Option<Stored>> {
        let now = crate::now();
        let owner = job.owner();
        let origin = match found.fallback {
            None => Origin::Extracted { conversation_id: job.conversation_id },
            Some(_) => Origin::Fallback { conversation_id: job.conversation_id },
        };
        let mut tx = self.begin_change(Actor::Extraction(job.id)).await?;
        let fenced = with_tx!(tx, tx => {
            sqlx::query(
                "UPDATE jobs SET status = 'succeeded', lease_token = NULL, locked_until = NULL, last_error = $4, \
                 updated_at = $3 WHERE id = $1 AND lease_token = $2 AND status = 'running'",
            )
            .bind(job.id)
            .bind(job.lease_token)
            .bind(now)
            .bind(found.fallback.map(|reason| format!("{FELL_BACK}{reason}")))
            .execute(&mut **tx)
            .await?
            .rows_affected()
        });
        if fenced != 1 {
            // Dropping the transaction rolls it back.
            return Ok(None);
        }
        tx.record_job_cost(job, &found.cost, now).await?;
        let room = tx.extracted_room(owner, max_facts).await?;
        let mut stored = Stored::default();
        for revision in found.revisions {
            match revision {
                Revision::Delete { id } => stored.deleted += tx.delete_known(owner, *id, Some("revised")).await?,
                Revision::Replace { id, by } => {
                    let (created, new) = match tx.insert_fact(owner, by, origin, None).await? {
                        Remembered::Created(fact) => (true, fact),
                        Remembered::Existing(fact) => {
                            (false, tx.add_sources(owner, fact, &sources(origin, &by.said_in)).await?)
                        }
                        Remembered::Full => continue,
                    };
                    stored.added += u64::from(created);
                    stored.replaced += tx.replace(owner, *id, &new, now).await?;
                }
            }
        }
        for candidate in found.candidates {
            if i64::try_from(stored.added).unwrap_or(i64::MAX) >= room {
                break;
            }
            let said_in = sources(origin, &candidate.fact.said_in);
            if let Some(id) = candidate.repeats
                && tx.refresh(owner, id, &candidate.fact, &said_in, job.conversation_id, now).await?
            {
                stored.refreshed += 1;
                continue;
            }
            match tx.insert_fact(owner, &candidate.fact, origin, None).await? {
                Remembered::Created(fact) => {
                    stored.added += 1;
                    if let (Some(model), Some(values)) = (found.model, &candidate.vector) {
                        tx.store_vector(fact.id, &fact.fact, model, values).await?;
                    }
                }
                Remembered::Existing(fact) => {
                    tx.add_sources(owner, fact, &said_in).await?;
                }
                Remembered::Full => {}
            }
        }
        if stored.added > 0 {
            tx.evict_oldest(owner, room).await?;
        }
        with_tx!(tx, tx => {
            sqlx::query("UPDATE jobs SET facts_added = $2 WHERE id = $1")
                .bind(job.id)
                .bind(i64::try_from(stored.added).unwrap_or(i64::MAX))
                .execute(&mut **tx)
                .await?;
            sqlx::query(
                "UPDATE conversations SET extracted_through_seq = $3 \
                 WHERE id = $1 AND tenant_id = $2 AND extracted_through_seq < $3",
            )
            .bind(job.conversation_id)
            .bind(job.tenant_id.as_str())
            .bind(job.through_seq)
            .execute(&mut **tx)
            .await?;
        });
        tx.record_fact(
            owner,
            EventType::JobSucceeded,
            EventData {
                job_id: Some(job.id),
                job_kind: Some(job.kind.clone()),
                conversation_id: Some(job.conversation_id),
                count: Some(stored.added),
                ..EventData::default()
            },
        );
        tx.commit().await?;
        Ok(Some(stored))
    }
}

/// What an extraction job found, to store (see [`Store::store_extracted_facts`]).
#[derive(Debug, Default)]
pub struct Found<'a> {
    /// New facts, best first.
    pub candidates: &'a [Candidate],
    /// Changes to the owner's stored facts.
    pub revisions: &'a [Revision],
    /// The model of the candidates' vectors.
    pub model: Option<&'a str>,
    /// Why the LLM extractor gave up, when these are the builtin rules' facts instead:
    /// they are stored as `builtin_fallback`, and the succeeded job keeps the reason in
    /// its `last_error` (see [`FELL_BACK`]), where admins look for what went wrong.
    pub fallback: Option<&'a str>,
    /// What the job cost (see [`Tx::record_job_cost`]).
    pub cost: JobCost,
}

/// How the `last_error` of a job that fell back begins; the LLM's error follows.
const FELL_BACK: &str = "stored the builtin extractor's facts; the LLM extractor gave up: ";

/// What storing an extraction did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    /// New facts (including replacements).
    pub added: u64,
    /// Stored facts said again in other words, refreshed.
    pub refreshed: u64,
    /// Stored facts superseded by their replacement.
    pub replaced: u64,
    pub deleted: u64,
}

/// Refreshes fact `$4` said again in other words: its score becomes the higher of the
/// two (`$5`), `updated_at` now (`$6`), and an extracted fact's conversation becomes the
/// latest that stated it (`$7`; a curated fact keeps its provenance, and an extracted one
/// its extractor: the first to find it). Its text is
/// unchanged, so its vector stays current (see [`TOUCH_VECTOR`]). Only a current fact,
/// not expired.
const REFRESH: &str = concat!(
    "UPDATE facts SET score = CASE WHEN score IS NULL OR score < $5 THEN $5 ELSE score END, \
       updated_at = $6, conversation_id = CASE WHEN source IN ('extracted', 'builtin_fallback') THEN $7 ELSE conversation_id END \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND id = $4 AND superseded_by IS NULL \
       AND (expires_at IS NULL OR expires_at > $6) RETURNING ",
    fact_columns!()
);

/// Sets the messages fact `$4` was drawn from to `$5`.
const SET_SOURCES: &str = "UPDATE facts SET source_messages = $5 \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND id = $4";

/// Moves the vector of fact `$1` along with its `updated_at` (to `$2`), when it was current:
/// refreshing a fact changes no word of it.
const TOUCH_VECTOR: &str = "UPDATE fact_vectors SET fact_updated_at = $2 \
     WHERE fact_id = $1 AND fact_updated_at = (SELECT updated_at FROM facts WHERE id = $1)";

/// Makes fact `$5` current and supersedes fact `$4` with it (`$6` now, `$7` when `$5` was
/// said, which ends `$4`), unless they are one fact (the replacement said nothing new) or
/// `$4` is superseded already.
const REPLACE: &str = concat!(
    "UPDATE facts SET \
       superseded_by = CASE WHEN id = $5 THEN NULL ELSE $5 END, \
       superseded_at = CASE WHEN id = $5 THEN NULL ELSE $6 END, \
       valid_until = CASE WHEN id = $5 THEN NULL ELSE $7 END \
     WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 \
       AND (id = $5 OR (id = $4 AND superseded_by IS NULL)) RETURNING ",
    fact_columns!()
);

/// The extraction's writes to facts it found again or changed.
impl Tx {
    /// Refreshes `id` with `fact`, drawn from the messages `said_in` (see [`REFRESH`] and
    /// [`Tx::add_sources`]); `false` when it is no longer a current fact of the owner.
    async fn refresh(
        &mut self,
        owner: Owner<'_>,
        id: Uuid,
        fact: &NewFact,
        said_in: &[SourceMessage],
        conversation_id: Uuid,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<bool> {
        let refreshed: Option<FactRow> = with_tx!(self, tx => {
            sqlx::query(TOUCH_VECTOR).bind(id).bind(now).execute(&mut **tx).await?;
            sqlx::query_as(REFRESH)
                .bind_owner(owner)
                .bind(id)
                .bind(fact.score.unwrap_or(0.0))
                .bind(now)
                .bind(conversation_id)
                .fetch_optional(&mut **tx)
                .await?
        });
        let Some(row) = refreshed else { return Ok(false) };
        let fact = self.add_sources(owner, row.try_into()?, said_in).await?;
        self.record_fact(owner, EventType::FactUpdated, EventData::fact(&fact));
        Ok(true)
    }

    /// Adds `added` to the messages an extracted `fact` was drawn from, when it was found
    /// again (see [`merge_sources`]), so that it is found from every conversation that
    /// said it; returns it as it now is. A curated fact keeps none: it was not drawn from
    /// a conversation, whatever repeats it.
    async fn add_sources(&mut self, owner: Owner<'_>, fact: Fact, added: &[SourceMessage]) -> Result<Fact> {
        if matches!(fact.source, Source::Manual | Source::Agent) {
            return Ok(fact);
        }
        let merged = merge_sources(&fact.source_messages, added);
        if merged == fact.source_messages {
            return Ok(fact);
        }
        with_tx!(self, tx => {
            sqlx::query(SET_SOURCES).bind_owner(owner).bind(fact.id).bind(Json(&merged)).execute(&mut **tx).await?;
        });
        Ok(Fact { source_messages: merged, ..fact })
    }

    /// Supersedes `old` with `new` (see [`REPLACE`]); returns 1 when `old` was superseded.
    async fn replace(
        &mut self,
        owner: Owner<'_>,
        old: Uuid,
        new: &Fact,
        now: chrono::DateTime<chrono::Utc>,
    ) -> Result<u64> {
        let changed: Vec<FactRow> = with_tx!(self, tx => {
            sqlx::query_as(REPLACE)
                .bind_owner(owner)
                .bind(old)
                .bind(new.id)
                .bind(now)
                .bind(new.observed_at)
                .fetch_all(&mut **tx)
                .await?
        });
        let mut superseded = 0;
        for row in changed {
            let fact: Fact = row.try_into()?;
            if fact.id == old && old != new.id {
                self.record_fact(owner, EventType::FactSuperseded, EventData::fact(&fact));
                superseded += 1;
            } else if fact.id == new.id && new.superseded_by.is_some() {
                self.record_fact(owner, EventType::FactRestored, EventData::fact(&fact));
            }
        }
        Ok(superseded)
    }
}
