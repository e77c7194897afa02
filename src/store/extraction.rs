//! The extraction job's reads and its one fenced write.

use super::{
    Result, Store,
    facts::{BindOwner, Remembered},
    job_queue::ClaimedJob,
    messages::{MessageRow, message_columns},
    policy::{POLICY_SQL, PolicyRow},
    with_pool, with_tx,
};
use crate::domain::{
    fact::{NewFact, Origin},
    message::Message,
    policy::Policy,
};

/// Everything the extraction needs, read when the job starts.
#[derive(Debug)]
pub struct ExtractionInput {
    pub policy: Policy,
    /// The conversation's own `memory` flag (false: opted out since the job was queued).
    pub conversation_memory: bool,
    pub extracted_through_seq: i64,
    /// The messages up to the job's `through_seq`, oldest first.
    pub messages: Vec<Message>,
}

/// Messages before the extraction mark that are read again, as context for the new ones.
const CONTEXT_MESSAGES: i64 = 20;

/// The most messages one extraction reads: its memory cost is bounded whatever the
/// thread's length. When more are new, the newest are read (what the person said most
/// recently wins); the older ones are passed over, and the README says so.
const MAX_EXTRACTION_MESSAGES: i64 = 200;

impl Store {
    /// `None` when the conversation no longer exists. Reads at most
    /// [`MAX_EXTRACTION_MESSAGES`]: the newest up to the job's mark, starting at most
    /// [`CONTEXT_MESSAGES`] before the previous extraction's mark.
    pub async fn extraction_input(&self, job: &ClaimedJob) -> Result<Option<ExtractionInput>> {
        let seq_sql = "SELECT extracted_through_seq, memory FROM conversations WHERE id = $1 AND tenant_id = $2";
        // Uses the UNIQUE (conversation_id, seq) index.
        let messages_sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq <= $3 AND seq > $4 \
             ORDER BY seq DESC LIMIT $5"
        );
        let owner = job.owner();
        let (extracted_through_seq, conversation_memory, policy, messages): (i64, bool, PolicyRow, Vec<MessageRow>) = with_pool!(self, pool => {
            let found: Option<(i64, bool)> =
                sqlx::query_as(seq_sql).bind(job.conversation_id).bind(job.tenant_id.as_str()).fetch_optional(pool).await?;
            let Some((seq, memory)) = found else { return Ok(None) };
            let policy = sqlx::query_as(POLICY_SQL)
                .bind_owner(owner)
                .fetch_one(pool)
                .await?;
            let messages = sqlx::query_as(messages_sql)
                .bind(job.conversation_id)
                .bind(job.tenant_id.as_str())
                .bind(job.through_seq)
                .bind(seq - CONTEXT_MESSAGES)
                .bind(MAX_EXTRACTION_MESSAGES)
                .fetch_all(pool)
                .await?;
            (seq, memory, policy, messages)
        });
        Ok(Some(ExtractionInput {
            policy: policy.into(),
            conversation_memory,
            extracted_through_seq,
            // Read newest first to keep the newest; handed over oldest first.
            messages: messages.into_iter().rev().map(Message::try_from).collect::<Result<_>>()?,
        }))
    }

    /// Stores the job's facts in one transaction that first marks the job succeeded,
    /// fenced by its lease: a job cancelled (consent refused, erasure) or re-leased since
    /// it was claimed stores nothing and this returns `None`. Duplicates of stored facts
    /// are skipped by the unique key. Facts are stored in the order given (the best
    /// first) while there is room under `max_facts` beside the manual facts, and the
    /// oldest extracted facts beyond it are evicted; manual facts never are (see the
    /// facts store's module docs).
    pub async fn store_extracted_facts(
        &self,
        job: &ClaimedJob,
        facts: &[NewFact],
        max_facts: i64,
    ) -> Result<Option<u64>> {
        let now = super::now();
        let owner = job.owner();
        let origin = Origin::Extracted { conversation_id: job.conversation_id };
        let mut tx = self.begin_write().await?;
        let fenced = with_tx!(tx, tx => {
            sqlx::query(
                "UPDATE jobs SET status = 'succeeded', lease_token = NULL, locked_until = NULL, last_error = NULL, \
                 updated_at = $3 WHERE id = $1 AND lease_token = $2 AND status = 'running'",
            )
            .bind(job.id)
            .bind(job.lease_token)
            .bind(now)
            .execute(&mut **tx)
            .await?
            .rows_affected()
        });
        if fenced != 1 {
            // Dropping the transaction rolls it back.
            return Ok(None);
        }
        let room = tx.extracted_room(owner, max_facts).await?;
        let mut added = 0u64;
        for fact in facts {
            if i64::try_from(added).unwrap_or(i64::MAX) >= room {
                break;
            }
            if let Remembered::Created(_) = tx.insert_fact(owner, fact, origin, None).await? {
                added += 1;
            }
        }
        if added > 0 {
            tx.evict_oldest(owner, room).await?;
        }
        with_tx!(tx, tx => {
            sqlx::query("UPDATE jobs SET facts_added = $2 WHERE id = $1")
                .bind(job.id)
                .bind(i64::try_from(added).unwrap_or(i64::MAX))
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
        tx.commit().await?;
        Ok(Some(added))
    }
}
