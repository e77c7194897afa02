//! Rolling summaries: the `summarize` job's reads and its one fenced write, and the
//! summary read of the ready-to-send history. The summary lives on its conversation row,
//! so deleting or erasing the conversation deletes it, and clearing its messages clears
//! it (see `messages.rs`).

use uuid::Uuid;

use super::{
    Result, Store,
    facts::BindOwner,
    jobs::queue::ClaimedJob,
    messages::{MessageRow, message_columns},
    policy::{POLICY_SQL, PolicyRow},
    usage::JobCost,
    with_pool, with_tx,
};
use crate::domain::{
    event::{Actor, EventData, EventType},
    ids::TenantId,
    message::Message,
    policy::Policy,
};

/// What a summarize job reads when it starts.
#[derive(Debug)]
pub struct SummaryInput {
    /// The user's consent decides whether an LLM may read the messages.
    pub policy: Policy,
    /// The conversation's own `memory` flag (false: opted out since the job was queued).
    pub conversation_memory: bool,
    /// The summary so far and the last seq it covers: the job folds the messages after it.
    pub summary: Option<String>,
    pub summary_through_seq: i64,
}

impl Store {
    /// `None` when the conversation no longer exists.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "summary_input", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn summary_input(&self, job: &ClaimedJob) -> Result<Option<SummaryInput>> {
        let sql = "SELECT memory, summary, summary_through_seq FROM conversations WHERE id = $1 AND tenant_id = $2";
        let owner = job.owner();
        with_pool!(self, pool => {
            let found: Option<(bool, Option<String>, i64)> =
                sqlx::query_as(sql).bind(job.conversation_id).bind(job.tenant_id.as_str()).fetch_optional(pool).await?;
            let Some((conversation_memory, summary, summary_through_seq)) = found else { return Ok(None) };
            let policy: PolicyRow = sqlx::query_as(POLICY_SQL).bind_owner(owner).fetch_one(pool).await?;
            Ok(Some(SummaryInput { policy: policy.into(), conversation_memory, summary, summary_through_seq }))
        })
    }

    /// Up to `limit` messages of the job's conversation after `after_seq` and up to its
    /// `through_seq`, oldest first: one chunk of what the job folds.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "summary_messages", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn summary_messages(&self, job: &ClaimedJob, after_seq: i64, limit: i64) -> Result<Vec<Message>> {
        // Uses the UNIQUE (conversation_id, seq) index.
        let sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq > $3 AND seq <= $4 \
             ORDER BY seq LIMIT $5"
        );
        let rows: Vec<MessageRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(job.conversation_id)
                .bind(job.tenant_id.as_str())
                .bind(after_seq)
                .bind(job.through_seq)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        rows.into_iter().map(Message::try_from).collect()
    }

    /// Stores the job's summary in one transaction that first marks the job succeeded
    /// with what it `cost`, fenced by its lease: a job cancelled (consent refused, opt-out, messages cleared),
    /// deleted (erasure) or re-leased since it was claimed stores nothing, and this
    /// returns `None`. The summary replaces the one the job started from only if that is
    /// still the conversation's (`summary_through_seq` unchanged): of two summaries built
    /// from one state, the first to commit wins and the other is dropped (`Some(false)`).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "store_summary", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn store_summary(
        &self,
        job: &ClaimedJob,
        from_seq: i64,
        summary: Option<&str>,
        through_seq: i64,
        cost: &JobCost,
    ) -> Result<Option<bool>> {
        let now = super::now();
        // Binds: job, lease token, now.
        let fence_sql = "UPDATE jobs SET status = 'succeeded', lease_token = NULL, locked_until = NULL, \
                         last_error = NULL, updated_at = $3 WHERE id = $1 AND lease_token = $2 AND status = 'running'";
        // Binds: conversation, tenant, summary, through_seq, from_seq.
        let store_sql = "UPDATE conversations SET summary = $3, summary_through_seq = $4 \
                         WHERE id = $1 AND tenant_id = $2 AND summary_through_seq = $5 AND $4 > $5";
        let mut tx = self.begin_change(Actor::Summary(job.id)).await?;
        let stored = with_tx!(tx, tx => {
            // The job first, then the conversation: the order of every transaction that
            // writes both (see `cancel_conversation_jobs`).
            let fenced =
                sqlx::query(fence_sql).bind(job.id).bind(job.lease_token).bind(now).execute(&mut **tx).await?.rows_affected();
            if fenced != 1 {
                // Dropping the transaction rolls it back.
                return Ok(None);
            }
            sqlx::query(store_sql)
                .bind(job.conversation_id)
                .bind(job.tenant_id.as_str())
                .bind(summary)
                .bind(through_seq)
                .bind(from_seq)
                .execute(&mut **tx)
                .await?
                .rows_affected()
        });
        tx.record_job_cost(job, cost, now).await?;
        let conversation_id = Some(job.conversation_id);
        if stored == 1 {
            let data = EventData { conversation_id, ..EventData::default() };
            tx.record_fact(job.owner(), EventType::ConversationSummarized, data);
        }
        let data = EventData {
            job_id: Some(job.id),
            job_kind: Some(job.kind.clone()),
            conversation_id,
            ..EventData::default()
        };
        tx.record_fact(job.owner(), EventType::JobSucceeded, data);
        tx.commit().await?;
        Ok(Some(stored == 1))
    }

    /// A conversation's summary and the last seq it covers; `None` when there is no such
    /// conversation in the tenant.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "conversation_summary", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn conversation_summary(&self, tenant: &TenantId, id: Uuid) -> Result<Option<(Option<String>, i64)>> {
        let sql = "SELECT summary, summary_through_seq FROM conversations WHERE id = $1 AND tenant_id = $2";
        with_pool!(self, pool => sqlx::query_as(sql).bind(id).bind(tenant.as_str()).fetch_optional(pool).await)
    }
}
