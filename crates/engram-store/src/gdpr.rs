//! GDPR erasure and receipts. Erasure is one transaction whose statement order matters
//! on PostgreSQL (READ COMMITTED), where each statement sees what committed before it:
//!
//! 1. delete the person's jobs: this waits for an extraction that is storing facts (its
//!    fenced transaction holds its job row) to commit, and a job whose row is gone when
//!    it tries to store finds no row to fence on and stores nothing;
//! 2. lock the person's conversations: this waits for in-flight appends and ends (they
//!    lock the conversation row first), after the job rows, so that a storing
//!    extraction, which updates its conversation last, can never wait on us in a cycle;
//! 3. delete jobs again (ends that committed during step 2 may have queued one), then
//!    facts, messages and conversations, each seeing everything committed before.
//!
//! The erased rows' old versions then leave the files: see [`super::purge`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    Result, Store, Tx,
    consent::SELECT_CONSENT,
    conversations::{ConversationRow, conversation_columns},
    events::EventRow,
    facts::{FactRow, fact_columns},
    messages::{MessageRow, message_columns},
    with_pool, with_tx,
    working_memory::{PERSON_DOCUMENTS, PersonDocumentRow, person_document},
};
use crate::domain::{
    conversation::Conversation,
    event::{Actor, ActorView, Event, EventData, EventType, ExportedVersion, FactVersion, NewEvent},
    fact::Fact,
    ids::{ExternalRef, TenantId},
    import::ImportedId,
    message::Message,
    webhook::ExportedDelivery,
    working_memory::{AgentWorkingMemory, WorkingMemory},
};

/// Rows erased, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErasedCounts {
    pub facts: u64,
    pub conversations: u64,
    pub messages: u64,
    pub jobs: u64,
    /// Working memory documents: the person's own and their conversations'. Receipts
    /// written before working memory existed read 0.
    #[serde(default)]
    pub working_memories: u64,
    /// The person's events (with their webhook deliveries). Receipts written before
    /// events existed read 0.
    #[serde(default)]
    pub events: u64,
}

/// Proof that an erasure happened, without the person's identifier.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Receipt {
    pub receipt_id: Uuid,
    /// HMAC-SHA256 of the tenant and external_ref under the server's receipt key.
    pub subject_hash: String,
    pub deleted: ErasedCounts,
    pub completed_at: DateTime<Utc>,
    /// When no file of the database held the erased rows' old versions any more (what
    /// that covers on each backend: docs/api.md); null until then.
    pub purged_at: Option<DateTime<Utc>>,
}

/// A snapshot of one end user's data, read a page at a time (see
/// [`Store::export_reader`]). Pages continue after the last item of the previous one.
pub struct ExportReader {
    tx: Tx,
    tenant: TenantId,
    user: ExternalRef,
}

impl ExportReader {
    /// The stored consent and when it was set; `None` when the user never said.
    pub async fn consent(&mut self) -> Result<Option<(bool, DateTime<Utc>)>> {
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        with_tx!(self.tx, tx => sqlx::query_as(SELECT_CONSENT).bind(tenant).bind(user).fetch_optional(&mut **tx).await)
    }

    /// Up to `limit` conversations, oldest first, after `after` (created_at, id).
    pub async fn conversations(
        &mut self,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Conversation>> {
        // Uses conversations_tenant_ref_updated for the owner, then sorts one page.
        let sql = concat!(
            "SELECT ",
            conversation_columns!(),
            " FROM conversations WHERE tenant_id = $1 AND external_ref = $2 \
               AND ($3 IS NULL OR created_at > $3 OR (created_at = $3 AND id > $4)) \
             ORDER BY created_at, id LIMIT $5"
        );
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        let (at, id) = after.unzip();
        let rows: Vec<ConversationRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(tenant).bind(user).bind(at).bind(id).bind(limit).fetch_all(&mut **tx).await?
        });
        rows.into_iter().map(Conversation::try_from).collect()
    }

    /// The rolling summary of one of the user's conversations, the last seq it covers
    /// (`None, 0` when it has none) and its working memory.
    pub async fn extras(&mut self, conversation_id: Uuid) -> Result<ConversationExtras> {
        let sql = "SELECT c.summary, c.summary_through_seq, w.content, w.etag, w.updated_at FROM conversations c \
            LEFT JOIN working_memories w ON w.conversation_id = c.id WHERE c.id = $1 AND c.tenant_id = $2";
        let tenant = self.tenant.as_str();
        type Row = (Option<String>, i64, Option<String>, Option<String>, Option<DateTime<Utc>>);
        let found: Option<Row> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(conversation_id).bind(tenant).fetch_optional(&mut **tx).await?
        });
        let Some((summary, summary_through_seq, content, etag, updated_at)) = found else {
            return Ok(ConversationExtras { summary: None, summary_through_seq: 0, working_memory: None });
        };
        let working_memory = match (content, etag, updated_at) {
            (Some(content), Some(etag), Some(updated_at)) => Some(WorkingMemory { content, etag, updated_at }),
            _ => None,
        };
        Ok(ConversationExtras { summary, summary_through_seq, working_memory })
    }

    /// Up to `limit` of the person's own working memory documents (one per agent), by
    /// agent id after `after`.
    pub async fn working_memories(&mut self, after: Option<&str>, limit: i64) -> Result<Vec<AgentWorkingMemory>> {
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        let rows: Vec<PersonDocumentRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(PERSON_DOCUMENTS).bind(tenant).bind(user).bind(after).bind(limit).fetch_all(&mut **tx).await?
        });
        Ok(rows.into_iter().map(person_document).collect())
    }

    /// Up to `limit` messages of one of the user's conversations after seq `after_seq`.
    pub async fn messages(&mut self, conversation_id: Uuid, after_seq: i64, limit: i64) -> Result<Vec<Message>> {
        let sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq > $3 ORDER BY seq LIMIT $4"
        );
        let tenant = self.tenant.as_str();
        let rows: Vec<MessageRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(conversation_id).bind(tenant).bind(after_seq).bind(limit).fetch_all(&mut **tx).await?
        });
        rows.into_iter().map(Message::try_from).collect()
    }

    /// Up to `limit` facts, oldest first, after the fact `after`; expired ones are gone
    /// (deleted by the next sweep, or by the erasure).
    pub async fn facts(&mut self, after: Option<Uuid>, limit: i64) -> Result<Vec<Fact>> {
        // Uses facts_tenant_ref.
        let sql = concat!(
            "SELECT ",
            fact_columns!(),
            " FROM facts WHERE tenant_id = $1 AND external_ref = $2 AND ($3 IS NULL OR id > $3) \
              AND (expires_at IS NULL OR expires_at > $5) ORDER BY id LIMIT $4"
        );
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        let rows: Vec<FactRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql)
                .bind(tenant)
                .bind(user)
                .bind(after)
                .bind(limit)
                .bind(super::now())
                .fetch_all(&mut **tx)
                .await?
        });
        rows.into_iter().map(Fact::try_from).collect()
    }
}

impl ExportReader {
    /// Up to `limit` of the person's events, oldest first, after id `after`.
    pub async fn events(&mut self, after: i64, limit: i64) -> Result<Vec<Event>> {
        let sql = "SELECT id, type, created_at, agent_id, external_ref, actor, actor_job_id, data FROM events \
                   WHERE tenant_id = $1 AND external_ref = $2 AND id > $3 ORDER BY id LIMIT $4";
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        let rows: Vec<EventRow> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(tenant).bind(user).bind(after).bind(limit).fetch_all(&mut **tx).await?
        });
        Ok(rows.into_iter().map(Event::from).collect())
    }

    /// Up to `limit` versions of the person's facts, by fact and version, after `after`.
    pub async fn fact_versions(&mut self, after: Option<(Uuid, i32)>, limit: i64) -> Result<Vec<ExportedVersion>> {
        let sql = "SELECT v.fact_id, v.version, v.change, v.created_at, v.actor, v.actor_job_id, v.fact \
                   FROM fact_versions v JOIN facts f ON f.id = v.fact_id \
                   WHERE f.tenant_id = $1 AND f.external_ref = $2 \
                     AND ($3 IS NULL OR v.fact_id > $3 OR (v.fact_id = $3 AND v.version > $4)) \
                     AND (f.expires_at IS NULL OR f.expires_at > $6) \
                   ORDER BY v.fact_id, v.version LIMIT $5";
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        let (fact, version) = after.unzip();
        type Row = (Uuid, i32, String, DateTime<Utc>, String, Option<Uuid>, Json<serde_json::Value>);
        let rows: Vec<Row> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql)
                .bind(tenant)
                .bind(user)
                .bind(fact)
                .bind(version)
                .bind(limit)
                .bind(super::now())
                .fetch_all(&mut **tx)
                .await?
        });
        Ok(rows
            .into_iter()
            .map(|(fact_id, version, change, created_at, actor, job_id, fact)| ExportedVersion {
                fact_id,
                version: FactVersion {
                    version,
                    change,
                    created_at,
                    actor: ActorView { kind: actor, job_id },
                    fact: fact.0,
                },
            })
            .collect())
    }

    /// Up to `limit` of the client ids the person's records were imported under, by kind
    /// and client id, after `after` (`import_ids_person`).
    pub async fn imported_ids(&mut self, after: Option<(&str, &str)>, limit: i64) -> Result<Vec<ImportedId>> {
        let sql = "SELECT kind, client_id, record_id, created_at FROM import_ids \
                   WHERE tenant_id = $1 AND external_ref = $2 \
                     AND ($3 IS NULL OR kind > $3 OR (kind = $3 AND client_id > $4)) \
                   ORDER BY kind, client_id LIMIT $5";
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        let (kind, client_id) = after.unzip();
        type Row = (String, String, Option<Uuid>, DateTime<Utc>);
        let rows: Vec<Row> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(tenant).bind(user).bind(kind).bind(client_id).bind(limit).fetch_all(&mut **tx).await?
        });
        Ok(rows
            .into_iter()
            .map(|(kind, client_id, record_id, created_at)| ImportedId { kind, client_id, record_id, created_at })
            .collect())
    }

    /// Up to `limit` webhook deliveries of the person's events, by event and
    /// subscription, after `after`.
    pub async fn deliveries(&mut self, after: Option<(i64, Uuid)>, limit: i64) -> Result<Vec<ExportedDelivery>> {
        let sql = "SELECT d.subscription_id, d.event_id, d.status, d.attempts, d.last_error, d.delivered_at \
                   FROM webhook_deliveries d JOIN events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id \
                   WHERE e.tenant_id = $1 AND e.external_ref = $2 \
                     AND ($3 IS NULL OR d.event_id > $3 OR (d.event_id = $3 AND d.subscription_id > $4)) \
                   ORDER BY d.event_id, d.subscription_id LIMIT $5";
        let (tenant, user) = (self.tenant.as_str(), self.user.as_str());
        let (event, subscription) = after.unzip();
        type Row = (Uuid, i64, String, i32, Option<String>, Option<DateTime<Utc>>);
        let rows: Vec<Row> = with_tx!(self.tx, tx => {
            sqlx::query_as(sql).bind(tenant).bind(user).bind(event).bind(subscription).bind(limit).fetch_all(&mut **tx).await?
        });
        Ok(rows
            .into_iter()
            .map(|(subscription_id, event_id, status, attempts, last_error, delivered_at)| ExportedDelivery {
                subscription_id,
                event_id,
                status,
                attempts,
                last_error,
                delivered_at,
            })
            .collect())
    }
}

/// What an export shows of a conversation beside its own fields and messages.
pub struct ConversationExtras {
    pub summary: Option<String>,
    pub summary_through_seq: i64,
    pub working_memory: Option<WorkingMemory>,
}

#[derive(sqlx::FromRow)]
struct ReceiptRow {
    id: Uuid,
    subject_hash: String,
    deleted: Json<ErasedCounts>,
    completed_at: DateTime<Utc>,
    purged_at: Option<DateTime<Utc>>,
}

impl Store {
    /// Erases everything about one end user in the tenant, across all agents, and
    /// writes the receipt, in one transaction. A consent refusal is kept so that it
    /// outlives the erasure; any other consent record goes.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "erase_user", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn erase_user(
        &self,
        tenant: &TenantId,
        user: &ExternalRef,
        subject_hash: &str,
        actor: Actor,
    ) -> Result<Receipt> {
        let now = super::now();
        let receipt_id = Uuid::now_v7();
        let who = user.as_str();
        let mut tx = self.begin_change(actor).await?;
        // Each step binds `$1` tenant, `$2` external ref; the order is explained above.
        let steps = [
            "DELETE FROM jobs WHERE tenant_id = $1 AND external_ref = $2",
            "UPDATE conversations SET status = status WHERE tenant_id = $1 AND external_ref = $2",
            // Jobs queued by ends that committed while we waited for the conversations.
            "DELETE FROM jobs WHERE tenant_id = $1 AND external_ref = $2",
            // Their history goes with them (cascade).
            "DELETE FROM facts WHERE tenant_id = $1 AND external_ref = $2",
            // The person's documents and their conversations' (which would also go by cascade).
            "DELETE FROM working_memories WHERE tenant_id = $1 AND external_ref = $2",
            "DELETE FROM messages WHERE tenant_id = $1 AND conversation_id IN \
             (SELECT id FROM conversations WHERE tenant_id = $1 AND external_ref = $2)",
            // Idempotency records (they hold message bodies) go by cascade.
            "DELETE FROM conversations WHERE tenant_id = $1 AND external_ref = $2",
            // A refusal outlives the erasure.
            "DELETE FROM user_consents WHERE tenant_id = $1 AND external_ref = $2 AND ai_consent",
            // Their events, and those events' webhook deliveries and attempts (cascade).
            "DELETE FROM events WHERE tenant_id = $1 AND external_ref = $2",
            // The client ids their records were imported under.
            "DELETE FROM import_ids WHERE tenant_id = $1 AND external_ref = $2",
        ];
        let mut counts = [0u64; 10];
        for (count, sql) in counts.iter_mut().zip(steps) {
            *count = with_tx!(tx, tx => {
                sqlx::query(sql).bind(tenant.as_str()).bind(who).execute(&mut **tx).await?.rows_affected()
            });
        }
        let [jobs_before, _, jobs_after, facts, working_memories, messages, conversations, _, events, _] = counts;
        let deleted =
            ErasedCounts { facts, conversations, messages, jobs: jobs_before + jobs_after, working_memories, events };
        with_tx!(tx, tx => {
            sqlx::query(
                "INSERT INTO erasure_receipts (id, tenant_id, subject_hash, deleted, completed_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(receipt_id)
            .bind(tenant.as_str())
            .bind(subject_hash)
            .bind(Json(deleted))
            .bind(now)
            .execute(&mut **tx)
            .await?;
        });
        // The erasure's own event names the receipt, never the person.
        let data = EventData { receipt_id: Some(receipt_id), ..EventData::default() };
        tx.record(
            tenant.as_str(),
            NewEvent { kind: EventType::PersonErased, agent_id: None, external_ref: None, data },
        );
        tx.commit().await?;
        self.owe_purge();
        // SQLite purges at once, in line with the writers (a reader on an older snapshot
        // past a short wait postpones it); PostgreSQL's vacuum is the purge worker's.
        let purged_at = if self.is_embedded() { self.purge_at_once(receipt_id).await } else { None };
        Ok(Receipt { receipt_id, subject_hash: subject_hash.to_owned(), deleted, completed_at: now, purged_at })
    }

    /// Purges now and tells when the receipt's erasure was purged: `None` while it is
    /// owed (the purge worker tries again). The erasure has committed either way.
    async fn purge_at_once(&self, receipt_id: Uuid) -> Option<DateTime<Utc>> {
        match self.purge_erasures().await {
            Ok(true) => {}
            Ok(false) => tracing::warn!("the purge after an erasure was held back by a reader; it is tried again"),
            Err(e) => tracing::warn!(error = %e, "the purge after an erasure failed; it is tried again"),
        }
        // Another purge (the worker's) may have covered it.
        let sql = "SELECT purged_at FROM erasure_receipts WHERE id = $1";
        let read: Result<Option<DateTime<Utc>>> =
            with_pool!(self, pool => sqlx::query_scalar(sql).bind(receipt_id).fetch_one(pool).await);
        read.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "reading an erasure receipt back failed");
            None
        })
    }

    /// Opens a reader of everything held about one end user in the tenant, across
    /// agents, in one snapshot so that the export is consistent with itself (GDPR
    /// Art. 15 and 20). It reads page by page, so an export of any size costs bounded
    /// memory.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "export_reader", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn export_reader(&self, tenant: &TenantId, user: &ExternalRef) -> Result<ExportReader> {
        Ok(ExportReader { tx: self.begin_snapshot().await?, tenant: tenant.clone(), user: user.clone() })
    }

    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_receipt", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn get_receipt(&self, tenant: &TenantId, id: Uuid) -> Result<Option<Receipt>> {
        let sql = "SELECT id, subject_hash, deleted, completed_at, purged_at FROM erasure_receipts WHERE id = $1 AND tenant_id = $2";
        let row: Option<ReceiptRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(id).bind(tenant.as_str()).fetch_optional(pool).await?
        });
        Ok(row.map(|r| Receipt {
            receipt_id: r.id,
            subject_hash: r.subject_hash,
            deleted: r.deleted.0,
            completed_at: r.completed_at,
            purged_at: r.purged_at,
        }))
    }
}
