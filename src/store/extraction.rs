//! The extraction job's reads and its one fenced write.

use super::{
    Result, Store, Transactions,
    facts::{FactWrites, Owner, Remembered},
    messages::{MessageRow, message_columns},
    with_pool,
};
use crate::{
    domain::{
        agent_config::Settings,
        fact::{NewFact, Origin},
        ids::{AgentId, ExternalRef},
        message::Message,
    },
    store::job_queue::ClaimedJob,
};

/// Everything the extraction needs, read when the job starts.
#[derive(Debug)]
pub struct ExtractionInput {
    pub settings: Settings,
    /// The stored consent; `None` when the user never said.
    pub consent: Option<bool>,
    pub extracted_through_seq: i64,
    /// The messages up to the job's `through_seq`, oldest first.
    pub messages: Vec<Message>,
}

#[derive(sqlx::FromRow)]
struct InputRow {
    extracted_through_seq: i64,
    memory_enabled: Option<bool>,
    min_user_turns: Option<i32>,
    max_injected_facts: Option<i32>,
    min_confidence: Option<f64>,
    extraction_instructions: Option<String>,
    ai_consent: Option<bool>,
}

impl Store {
    /// `None` when the conversation no longer exists.
    pub async fn extraction_input(&self, job: &ClaimedJob) -> Result<Option<ExtractionInput>> {
        let sql = "SELECT c.extracted_through_seq, a.memory_enabled, a.min_user_turns, a.max_injected_facts, \
                   a.min_confidence, a.extraction_instructions, u.ai_consent \
                   FROM conversations c \
                   LEFT JOIN agent_configs a ON a.tenant_id = c.tenant_id AND a.agent_id = c.agent_id \
                   LEFT JOIN user_consents u ON u.tenant_id = c.tenant_id AND u.external_ref = c.external_ref \
                   WHERE c.id = $1 AND c.tenant_id = $2";
        // Uses the UNIQUE (conversation_id, seq) index.
        let messages_sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq <= $3 ORDER BY seq"
        );
        let (row, messages): (InputRow, Vec<MessageRow>) = with_pool!(self, pool => {
            let row: Option<InputRow> =
                sqlx::query_as(sql).bind(job.conversation_id).bind(&job.tenant_id).fetch_optional(pool).await?;
            let Some(row) = row else { return Ok(None) };
            let messages = sqlx::query_as(messages_sql)
                .bind(job.conversation_id)
                .bind(&job.tenant_id)
                .bind(job.through_seq)
                .fetch_all(pool)
                .await?;
            (row, messages)
        });
        let defaults = Settings::default();
        let settings = Settings {
            memory_enabled: row.memory_enabled.unwrap_or(defaults.memory_enabled),
            min_user_turns: row.min_user_turns.unwrap_or(defaults.min_user_turns),
            max_injected_facts: row.max_injected_facts.unwrap_or(defaults.max_injected_facts),
            min_confidence: row.min_confidence.unwrap_or(defaults.min_confidence),
            extraction_instructions: row.extraction_instructions,
        };
        Ok(Some(ExtractionInput {
            settings,
            consent: row.ai_consent,
            extracted_through_seq: row.extracted_through_seq,
            messages: messages.into_iter().map(Message::try_from).collect::<Result<_>>()?,
        }))
    }

    /// Stores the job's facts in one transaction that first marks the job succeeded,
    /// fenced by its lease: a job cancelled (consent refused, erasure) or re-leased since
    /// it was claimed stores nothing and this returns `None`. Duplicates of stored facts
    /// are skipped by the unique key; the oldest facts beyond `max_facts` are evicted.
    pub async fn store_extracted_facts(
        &self,
        job: &ClaimedJob,
        facts: &[NewFact],
        max_facts: i64,
    ) -> Result<Option<u64>> {
        let now = super::now();
        let decode = |e: String| sqlx::Error::Decode(e.into());
        let agent = AgentId::parse(job.agent_id.clone()).map_err(decode)?;
        let user = ExternalRef::parse(job.external_ref.clone()).map_err(decode)?;
        let owner = Owner { tenant: &job.tenant_id, agent: &agent, user: &user };
        let origin = Origin::Extracted { conversation_id: job.conversation_id };
        with_pool!(self, pool => {
            let mut tx = pool.begin_write().await?;
            let fenced = sqlx::query(
                "UPDATE jobs SET status = 'succeeded', lease_token = NULL, locked_until = NULL, last_error = NULL, \
                 updated_at = $3 WHERE id = $1 AND lease_token = $2 AND status = 'running'",
            )
            .bind(job.id)
            .bind(job.lease_token)
            .bind(now)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if fenced != 1 {
                tx.rollback().await?;
                return Ok(None);
            }
            let mut added = 0u64;
            for fact in facts {
                if let Remembered::Created(_) = tx.insert_fact(owner, fact, origin, None).await? {
                    added += 1;
                }
            }
            if added > 0 {
                tx.evict_oldest(owner, max_facts).await?;
            }
            sqlx::query("UPDATE jobs SET facts_added = $2 WHERE id = $1")
                .bind(job.id)
                .bind(i64::try_from(added).unwrap_or(i64::MAX))
                .execute(&mut *tx)
                .await?;
            sqlx::query(
                "UPDATE conversations SET extracted_through_seq = $3 \
                 WHERE id = $1 AND tenant_id = $2 AND extracted_through_seq < $3",
            )
            .bind(job.conversation_id)
            .bind(&job.tenant_id)
            .bind(job.through_seq)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(Some(added))
        })
    }
}
