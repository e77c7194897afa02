//! The one read of what decides memory for a user of an agent: the agent's settings and
//! the user's consent, in one statement, resolved by [`Policy`]. The memory context
//! reads it on its own (one round trip); ending a conversation reads it under the
//! conversation's lock; the extraction reads it when its job starts.

use sqlx::types::Json;

use super::{Result, Store, facts::BindOwner, with_pool};
use crate::domain::{
    agent_config::{Forgetting, Retention, Settings},
    ids::AgentId,
    owner::Owner,
    policy::Policy,
};

/// Binds: `$1` tenant, `$2` agent, `$3` external ref. One row, NULLs where nothing is
/// stored.
pub(super) const POLICY_SQL: &str = "SELECT a.memory_enabled, a.min_user_turns, a.max_injected_facts, \
       a.min_confidence, a.extraction_instructions, a.summarize_after_messages, a.summary_window, \
       a.forget_extracted_after_days, a.forget_unrecalled_after_days, a.keep_best_facts, a.forget_curated_facts, \
       a.max_messages_per_conversation, a.delete_conversations_after_days, a.extract_every_user_turns, \
       a.delete_facts_with_conversation, a.reads_facts_of, u.ai_consent \
     FROM (SELECT 1 AS one) AS one \
     LEFT JOIN agent_configs a ON a.tenant_id = $1 AND a.agent_id = $2 \
     LEFT JOIN user_consents u ON u.tenant_id = $1 AND u.external_ref = $3";

#[derive(sqlx::FromRow)]
pub(super) struct PolicyRow {
    memory_enabled: Option<bool>,
    min_user_turns: Option<i32>,
    max_injected_facts: Option<i32>,
    min_confidence: Option<f64>,
    extraction_instructions: Option<String>,
    extract_every_user_turns: Option<i32>,
    summarize_after_messages: Option<i32>,
    summary_window: Option<i32>,
    forget_extracted_after_days: Option<i32>,
    forget_unrecalled_after_days: Option<i32>,
    keep_best_facts: Option<i32>,
    forget_curated_facts: Option<bool>,
    max_messages_per_conversation: Option<i32>,
    delete_conversations_after_days: Option<i32>,
    delete_facts_with_conversation: Option<bool>,
    reads_facts_of: Option<Json<Vec<AgentId>>>,
    ai_consent: Option<bool>,
}

impl From<PolicyRow> for Policy {
    fn from(row: PolicyRow) -> Policy {
        // The settings columns are NOT NULL: one is null only when no row was joined.
        let agent = match (
            row.memory_enabled,
            row.min_user_turns,
            row.max_injected_facts,
            row.min_confidence,
            row.summarize_after_messages,
            row.summary_window,
        ) {
            (
                Some(memory_enabled),
                Some(min_user_turns),
                Some(max_injected_facts),
                Some(min_confidence),
                Some(summarize_after_messages),
                Some(summary_window),
            ) => Some(Settings {
                memory_enabled,
                min_user_turns,
                max_injected_facts,
                min_confidence,
                extraction_instructions: row.extraction_instructions,
                extract_every_user_turns: row.extract_every_user_turns,
                summarize_after_messages,
                summary_window,
                // NOT NULL too: present whenever the row above is.
                forgetting: Forgetting {
                    extracted_after_days: row.forget_extracted_after_days.unwrap_or_default(),
                    unrecalled_after_days: row.forget_unrecalled_after_days.unwrap_or_default(),
                    keep_best: row.keep_best_facts.unwrap_or_default(),
                    curated: row.forget_curated_facts.unwrap_or_default(),
                },
                retention: Retention {
                    max_messages: row.max_messages_per_conversation.unwrap_or_default(),
                    conversations_after_days: row.delete_conversations_after_days.unwrap_or_default(),
                },
                delete_facts_with_conversation: row.delete_facts_with_conversation.unwrap_or_default(),
                reads_facts_of: row.reads_facts_of.map(|ids| ids.0).unwrap_or_default(),
            }),
            _ => None,
        };
        Policy { agent, stored_consent: row.ai_consent }
    }
}

impl Store {
    /// The owner's policy, in one round trip.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "policy", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn policy(&self, owner: Owner<'_>) -> Result<Policy> {
        let row: PolicyRow = with_pool!(self, pool => {
            sqlx::query_as(POLICY_SQL)
                .bind_owner(owner)
                .fetch_one(pool)
                .await?
        });
        Ok(row.into())
    }
}
