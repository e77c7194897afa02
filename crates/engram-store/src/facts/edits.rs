//! Changes to stored facts other than remembering them: an edit, and the deletes (one
//! fact, all of an owner's, the expired, those of a deleted conversation), each with its
//! event.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use super::{Fact, FactRow, UpdateError, binds::BindOwner, fact_columns, reads::FROM_CONVERSATION};
use crate::{
    Result, Store, Tx,
    domain::{
        event::{Actor, EventData, EventType, NewEvent},
        fact::FactChanges,
        owner::Owner,
        slot::Slot,
    },
    with_tx, word_index,
};

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

/// `$4` id; returns the fact as it was.
const DELETE_ONE: &str = concat!(
    "DELETE FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND id = $4 RETURNING ",
    fact_columns!()
);

const DELETE_ALL: &str = "DELETE FROM facts WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3";

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
pub(crate) struct ExpiredRow {
    tenant_id: String,
    #[sqlx(flatten)]
    fact: FactRow,
}

impl Store {
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
                    .bind(crate::now())
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
}

impl Tx {
    /// Records a `fact.deleted` event (actor: the transaction's, `reason`) for each fact
    /// the sweeper deleted in this transaction, and commits; returns how many there were.
    /// With none it still commits (no change, no event) rather than leave the rollback to
    /// the drop, which on SQLite a spawned task would run.
    pub(crate) async fn commit_swept(mut self, rows: Vec<ExpiredRow>, reason: &'static str) -> Result<u64> {
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

    /// Deletes the owner's extracted facts drawn only from `conversation` (every one of
    /// their source messages is in it), each with its `fact.deleted` event (reason
    /// `conversation_deleted`); returns how many. A fact drawn from another conversation
    /// too stays: something else said it.
    pub(crate) async fn delete_drawn_only_from(&mut self, owner: Owner<'_>, conversation: Uuid) -> Result<u64> {
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
    pub(super) fn record_deleted(
        &mut self,
        owner: Owner<'_>,
        row: FactRow,
        reason: Option<&'static str>,
    ) -> Result<()> {
        let fact: Fact = row.try_into()?;
        self.record_fact(owner, EventType::FactDeleted, EventData { reason, ..EventData::fact(&fact) });
        Ok(())
    }
}
