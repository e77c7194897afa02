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

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::types::Json;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    Result, Store, Transactions,
    consent::SELECT_CONSENT,
    conversations::{ConversationRow, conversation_columns},
    facts::{FactRow, fact_columns},
    messages::{MessageRow, message_columns},
    with_pool,
};
use crate::domain::{conversation::Conversation, fact::Fact, ids::ExternalRef, message::Message};

/// Rows erased, per kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErasedCounts {
    pub facts: u64,
    pub conversations: u64,
    pub messages: u64,
    pub jobs: u64,
}

/// Proof that an erasure happened, without the person's identifier.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Receipt {
    pub receipt_id: Uuid,
    /// HMAC-SHA256 of the tenant and external_ref under the server's receipt key.
    pub subject_hash: String,
    pub deleted: ErasedCounts,
    pub completed_at: DateTime<Utc>,
}

/// What the store holds about one end user (the export's raw material).
#[derive(Debug)]
pub struct UserData {
    /// The stored consent and when it was set; `None` when the user never said.
    pub consent: Option<(bool, DateTime<Utc>)>,
    /// Oldest first.
    pub conversations: Vec<Conversation>,
    /// By conversation, then seq.
    pub messages: Vec<Message>,
    /// Oldest first.
    pub facts: Vec<Fact>,
}

#[derive(sqlx::FromRow)]
struct ReceiptRow {
    id: Uuid,
    subject_hash: String,
    deleted: Json<ErasedCounts>,
    completed_at: DateTime<Utc>,
}

impl Store {
    /// Erases everything about one end user in the tenant, across all agents, and
    /// writes the receipt, in one transaction. A consent refusal is kept so that it
    /// outlives the erasure; any other consent record goes.
    pub async fn erase_user(&self, tenant: &str, user: &ExternalRef, subject_hash: &str) -> Result<Receipt> {
        let now = super::now();
        let receipt_id = Uuid::now_v7();
        let who = user.as_str();
        let deleted = with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let delete_jobs = "DELETE FROM jobs WHERE tenant_id = $1 AND external_ref = $2";
            let mut jobs = sqlx::query(delete_jobs).bind(tenant).bind(who).execute(&mut *tx).await?.rows_affected();
            sqlx::query("UPDATE conversations SET status = status WHERE tenant_id = $1 AND external_ref = $2")
                .bind(tenant)
                .bind(who)
                .execute(&mut *tx)
                .await?;
            // Jobs queued by ends that committed while we waited for the conversations.
            jobs += sqlx::query(delete_jobs).bind(tenant).bind(who).execute(&mut *tx).await?.rows_affected();
            let facts = sqlx::query("DELETE FROM facts WHERE tenant_id = $1 AND external_ref = $2")
                .bind(tenant)
                .bind(who)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            let messages = sqlx::query(
                "DELETE FROM messages WHERE tenant_id = $1 AND conversation_id IN \
                 (SELECT id FROM conversations WHERE tenant_id = $1 AND external_ref = $2)",
            )
            .bind(tenant)
            .bind(who)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            // Idempotency records (they hold message bodies) go by cascade.
            let conversations = sqlx::query("DELETE FROM conversations WHERE tenant_id = $1 AND external_ref = $2")
                .bind(tenant)
                .bind(who)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            sqlx::query("DELETE FROM user_consents WHERE tenant_id = $1 AND external_ref = $2 AND ai_consent")
                .bind(tenant)
                .bind(who)
                .execute(&mut *tx)
                .await?;
            let deleted = ErasedCounts { facts, conversations, messages, jobs };
            sqlx::query(
                "INSERT INTO erasure_receipts (id, tenant_id, subject_hash, deleted, completed_at) \
                 VALUES ($1, $2, $3, $4, $5)",
            )
            .bind(receipt_id)
            .bind(tenant)
            .bind(subject_hash)
            .bind(Json(deleted))
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            deleted
        });
        Ok(Receipt { receipt_id, subject_hash: subject_hash.to_owned(), deleted, completed_at: now })
    }

    /// Everything held about one end user in the tenant, across agents, read in one
    /// snapshot so that the export is consistent with itself (GDPR Art. 15 and 20).
    pub async fn export_user(&self, tenant: &str, user: &ExternalRef) -> Result<UserData> {
        // Uses conversations_tenant_ref_updated.
        let conversations_sql = concat!(
            "SELECT ",
            conversation_columns!(),
            " FROM conversations WHERE tenant_id = $1 AND external_ref = $2 ORDER BY created_at, id"
        );
        let messages_sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE tenant_id = $1 AND conversation_id IN \
             (SELECT id FROM conversations WHERE tenant_id = $1 AND external_ref = $2) ORDER BY conversation_id, seq"
        );
        // Uses facts_tenant_ref.
        let facts_sql =
            concat!("SELECT ", fact_columns!(), " FROM facts WHERE tenant_id = $1 AND external_ref = $2 ORDER BY id");
        let (consent, conversations, messages, facts): (_, Vec<ConversationRow>, Vec<MessageRow>, Vec<FactRow>) = with_pool!(self, pool => {
            let mut tx = pool.begin_snapshot().await?;
            let who = user.as_str();
            let consent = sqlx::query_as(SELECT_CONSENT).bind(tenant).bind(who).fetch_optional(&mut *tx).await?;
            let conversations = sqlx::query_as(conversations_sql).bind(tenant).bind(who).fetch_all(&mut *tx).await?;
            let messages = sqlx::query_as(messages_sql).bind(tenant).bind(who).fetch_all(&mut *tx).await?;
            let facts = sqlx::query_as(facts_sql).bind(tenant).bind(who).fetch_all(&mut *tx).await?;
            tx.commit().await?;
            (consent, conversations, messages, facts)
        });
        Ok(UserData {
            consent,
            conversations: conversations.into_iter().map(Conversation::try_from).collect::<Result<_>>()?,
            messages: messages.into_iter().map(Message::try_from).collect::<Result<_>>()?,
            facts: facts.into_iter().map(Fact::try_from).collect::<Result<_>>()?,
        })
    }

    pub async fn get_receipt(&self, tenant: &str, id: Uuid) -> Result<Option<Receipt>> {
        let sql =
            "SELECT id, subject_hash, deleted, completed_at FROM erasure_receipts WHERE id = $1 AND tenant_id = $2";
        let row: Option<ReceiptRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(id).bind(tenant).fetch_optional(pool).await?
        });
        Ok(row.map(|r| Receipt {
            receipt_id: r.id,
            subject_hash: r.subject_hash,
            deleted: r.deleted.0,
            completed_at: r.completed_at,
        }))
    }
}
