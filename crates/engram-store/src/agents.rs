//! Agent configuration rows.

use chrono::{DateTime, Utc};
use sqlx::types::Json;

use super::{Result, Store, with_pool, with_tx};
use crate::domain::{
    agent_config::{AgentConfig, ConfigPatch, Settings},
    event::{Actor, EventData, EventType, NewEvent},
    ids::{AgentId, TenantId},
};

#[derive(sqlx::FromRow)]
pub(super) struct ConfigRow {
    agent_id: AgentId,
    memory_enabled: bool,
    min_user_turns: i32,
    max_injected_facts: i32,
    min_confidence: f64,
    extraction_instructions: Option<String>,
    extract_every_user_turns: Option<i32>,
    summarize_after_messages: i32,
    summary_window: i32,
    forget_extracted_after_days: i32,
    forget_unrecalled_after_days: i32,
    keep_best_facts: i32,
    forget_curated_facts: bool,
    max_messages_per_conversation: i32,
    delete_conversations_after_days: i32,
    delete_facts_with_conversation: bool,
    reads_facts_of: Json<Vec<AgentId>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

/// The agent id decodes as an `AgentId` (see `store/ids.rs`), so nothing here can fail.
impl From<ConfigRow> for AgentConfig {
    fn from(row: ConfigRow) -> AgentConfig {
        AgentConfig {
            agent_id: row.agent_id,
            memory_enabled: row.memory_enabled,
            min_user_turns: row.min_user_turns,
            max_injected_facts: row.max_injected_facts,
            min_confidence: row.min_confidence,
            extraction_instructions: row.extraction_instructions,
            extract_every_user_turns: row.extract_every_user_turns,
            summarize_after_messages: row.summarize_after_messages,
            summary_window: row.summary_window,
            forget_extracted_after_days: row.forget_extracted_after_days,
            forget_unrecalled_after_days: row.forget_unrecalled_after_days,
            keep_best_facts: row.keep_best_facts,
            forget_curated_facts: row.forget_curated_facts,
            max_messages_per_conversation: row.max_messages_per_conversation,
            delete_conversations_after_days: row.delete_conversations_after_days,
            delete_facts_with_conversation: row.delete_facts_with_conversation,
            reads_facts_of: row.reads_facts_of.0,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

macro_rules! config_columns {
    () => {
        "agent_id, memory_enabled, min_user_turns, max_injected_facts, min_confidence, extraction_instructions, \
         summarize_after_messages, summary_window, forget_extracted_after_days, forget_unrecalled_after_days, \
         keep_best_facts, forget_curated_facts, max_messages_per_conversation, delete_conversations_after_days, \
         created_at, updated_at, extract_every_user_turns, delete_facts_with_conversation, reads_facts_of"
    };
}
pub(super) use config_columns;

impl Store {
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_agent_config", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn get_agent_config(&self, tenant: &TenantId, agent: &AgentId) -> Result<Option<AgentConfig>> {
        let sql = concat!("SELECT ", config_columns!(), " FROM agent_configs WHERE tenant_id = $1 AND agent_id = $2");
        let row: Option<ConfigRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(tenant.as_str()).bind(agent.as_str()).fetch_optional(pool).await?
        });
        Ok(row.map(AgentConfig::from))
    }

    /// The agent's settings, or the defaults (memory off) when it was never configured.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "agent_settings", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn agent_settings(&self, tenant: &TenantId, agent: &AgentId) -> Result<Settings> {
        Ok(self.get_agent_config(tenant, agent).await?.map(Settings::from).unwrap_or_default())
    }

    /// Creates or partially updates a config in one statement: the patch's absent fields
    /// keep their stored value (or the default on insert).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "upsert_agent_config", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn upsert_agent_config(
        &self,
        tenant: &TenantId,
        agent: &AgentId,
        patch: &ConfigPatch,
        actor: Actor,
    ) -> Result<AgentConfig> {
        let inserted = Settings::created_by(patch);
        let now = super::now();
        let keep_instructions = patch.extraction_instructions.is_none();
        let sql = concat!(
            "INSERT INTO agent_configs (",
            config_columns!(),
            ", tenant_id) VALUES ($1, $2, $3, $4, $5, $6, $14, $15, $18, $19, $20, $21, $22, $23, $7, $7, $30, $32, $34, $8) \
             ON CONFLICT (tenant_id, agent_id) DO UPDATE SET \
               memory_enabled = COALESCE($9, agent_configs.memory_enabled), \
               min_user_turns = COALESCE($10, agent_configs.min_user_turns), \
               max_injected_facts = COALESCE($11, agent_configs.max_injected_facts), \
               min_confidence = COALESCE($12, agent_configs.min_confidence), \
               extraction_instructions = CASE WHEN $13 THEN agent_configs.extraction_instructions ELSE $6 END, \
               summarize_after_messages = COALESCE($16, agent_configs.summarize_after_messages), \
               summary_window = COALESCE($17, agent_configs.summary_window), \
               forget_extracted_after_days = COALESCE($24, agent_configs.forget_extracted_after_days), \
               forget_unrecalled_after_days = COALESCE($25, agent_configs.forget_unrecalled_after_days), \
               keep_best_facts = COALESCE($26, agent_configs.keep_best_facts), \
               forget_curated_facts = COALESCE($27, agent_configs.forget_curated_facts), \
               max_messages_per_conversation = COALESCE($28, agent_configs.max_messages_per_conversation), \
               delete_conversations_after_days = COALESCE($29, agent_configs.delete_conversations_after_days), \
               extract_every_user_turns = CASE WHEN $31 THEN agent_configs.extract_every_user_turns ELSE $30 END, \
               delete_facts_with_conversation = COALESCE($33, agent_configs.delete_facts_with_conversation), \
               reads_facts_of = CASE WHEN $35 THEN agent_configs.reads_facts_of ELSE $34 END, \
               updated_at = $7 \
             RETURNING ",
            config_columns!()
        );
        let mut tx = self.begin_change(actor).await?;
        let row: ConfigRow = with_tx!(tx, tx => {
            sqlx::query_as(sql)
                .bind(agent.as_str())
                .bind(inserted.memory_enabled)
                .bind(inserted.min_user_turns)
                .bind(inserted.max_injected_facts)
                .bind(inserted.min_confidence)
                .bind(&inserted.extraction_instructions)
                .bind(now)
                .bind(tenant.as_str())
                .bind(patch.memory_enabled)
                .bind(patch.min_user_turns)
                .bind(patch.max_injected_facts)
                .bind(patch.min_confidence)
                .bind(keep_instructions)
                .bind(inserted.summarize_after_messages)
                .bind(inserted.summary_window)
                .bind(patch.summarize_after_messages)
                .bind(patch.summary_window)
                .bind(inserted.forgetting.extracted_after_days)
                .bind(inserted.forgetting.unrecalled_after_days)
                .bind(inserted.forgetting.keep_best)
                .bind(inserted.forgetting.curated)
                .bind(inserted.retention.max_messages)
                .bind(inserted.retention.conversations_after_days)
                .bind(patch.forget_extracted_after_days)
                .bind(patch.forget_unrecalled_after_days)
                .bind(patch.keep_best_facts)
                .bind(patch.forget_curated_facts)
                .bind(patch.max_messages_per_conversation)
                .bind(patch.delete_conversations_after_days)
                .bind(inserted.extract_every_user_turns)
                .bind(patch.extract_every_user_turns.is_none())
                .bind(inserted.delete_facts_with_conversation)
                .bind(patch.delete_facts_with_conversation)
                .bind(Json(&inserted.reads_facts_of))
                .bind(patch.reads_facts_of.is_none())
                .fetch_one(&mut **tx)
                .await?
        });
        let config = AgentConfig::from(row);
        tx.record(tenant.as_str(), settings_changed(agent, Some(&config)));
        tx.commit().await?;
        Ok(config)
    }

    /// One page of configs ordered by agent id, after `after` (keyset).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_agent_configs", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_agent_configs(
        &self,
        tenant: &TenantId,
        after: Option<&str>,
        limit: i64,
    ) -> Result<Vec<AgentConfig>> {
        let sql = concat!(
            "SELECT ",
            config_columns!(),
            " FROM agent_configs WHERE tenant_id = $1 AND ($2 IS NULL OR agent_id > $2) ORDER BY agent_id LIMIT $3"
        );
        let rows: Vec<ConfigRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(tenant.as_str()).bind(after).bind(limit).fetch_all(pool).await?
        });
        Ok(rows.into_iter().map(AgentConfig::from).collect())
    }

    /// Those of `agents` that are configured in the tenant (their order kept): what an
    /// agent's `reads_facts_of` may name.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "configured_agents", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn configured_agents(&self, tenant: &TenantId, agents: &[AgentId]) -> Result<Vec<AgentId>> {
        let wanted = serde_json::Value::from(agents.iter().map(AgentId::as_str).collect::<Vec<_>>()).to_string();
        let sql = self.dialect(
            "SELECT agent_id FROM agent_configs WHERE tenant_id = $1 \
               AND agent_id IN (SELECT json_array_elements_text(CAST($2 AS json)))",
            "SELECT agent_id FROM agent_configs WHERE tenant_id = $1 AND agent_id IN (SELECT value FROM json_each($2))",
        );
        let found: Vec<AgentId> = with_pool!(self, pool => {
            sqlx::query_scalar(sql).bind(tenant.as_str()).bind(wanted).fetch_all(pool).await?
        });
        Ok(agents.iter().filter(|agent| found.contains(agent)).cloned().collect())
    }

    /// Returns whether a config was deleted.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_agent_config", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_agent_config(&self, tenant: &TenantId, agent: &AgentId, actor: Actor) -> Result<bool> {
        let sql = "DELETE FROM agent_configs WHERE tenant_id = $1 AND agent_id = $2";
        let mut tx = self.begin_change(actor).await?;
        let done = with_tx!(tx, tx => {
            sqlx::query(sql).bind(tenant.as_str()).bind(agent.as_str()).execute(&mut **tx).await?.rows_affected()
        });
        if done == 0 {
            return Ok(false);
        }
        tx.record(tenant.as_str(), settings_changed(agent, None));
        tx.commit().await?;
        Ok(true)
    }
}

/// The `agent.settings_changed` event: the settings as they now are, or a reset to the
/// defaults.
fn settings_changed(agent: &AgentId, config: Option<&AgentConfig>) -> NewEvent {
    let data = EventData {
        settings: config.and_then(|c| serde_json::to_value(c).ok()),
        reason: config.is_none().then_some("reset"),
        ..EventData::default()
    };
    NewEvent {
        kind: EventType::AgentSettingsChanged,
        agent_id: Some(agent.as_str().to_owned()),
        external_ref: None,
        data,
    }
}
