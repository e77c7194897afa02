//! What the sweeper forgets by the agents' own settings, and the recall bookkeeping it
//! ranks by: the agents that set a forgetting or retention policy, the three fact
//! policies (maximum age, time since last recall, keep the best N per user), message
//! retention (the oldest messages of a long conversation, conversations long ended), and
//! the batched write of recall counts.
//!
//! Every delete here is bounded (`LIMIT`), one transaction per batch, and writes its
//! events (actor: the sweeper) in that transaction. A fact's vectors and history go with
//! it (`ON DELETE CASCADE`), a conversation's messages and idempotency records with it.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{
    Result, Store,
    agents::{ConfigRow, config_columns},
    facts::{ExpiredRow, fact_columns},
    with_pool, with_tx,
};
use crate::domain::{
    agent_config::{AgentConfig, Forgetting, Retention, Settings},
    event::{Actor, EventData, EventType},
    ids::{AgentId, ExternalRef, TenantId},
};

/// One agent that set a forgetting or retention policy.
#[derive(Debug, Clone)]
pub struct PolicyAgent {
    pub tenant: TenantId,
    pub agent: AgentId,
    pub forgetting: Forgetting,
    pub retention: Retention,
    /// Whether the agent writes rolling summaries (`summarize_after_messages` > 0): then
    /// only messages a summary already covers are trimmed.
    pub summarizes: bool,
}

/// An agent's stored settings with its tenant.
#[derive(sqlx::FromRow)]
struct PolicyAgentRow {
    tenant_id: TenantId,
    #[sqlx(flatten)]
    config: ConfigRow,
}

/// The facts a policy may delete: extracted ones, or every one when `$5` (the agent's
/// `forget_curated_facts`) is true; never an expired one (the expiry sweep deletes those,
/// as `expired`). `$1` tenant, `$2` agent, `$4` now.
const REACHABLE: &str = "tenant_id = $1 AND agent_id = $2 AND ($5 OR source NOT IN ('manual', 'agent')) \
     AND (expires_at IS NULL OR expires_at > $4)";

/// Up to `$6` of the reachable facts said (`observed_at`) before `$3`, the oldest first.
const TOO_OLD: &str = "SELECT id FROM facts WHERE {reachable} AND observed_at < $3 ORDER BY observed_at LIMIT $6";

/// Up to `$6` of the reachable facts last recalled before `$3`, or never recalled and
/// stored before `$3`, the longest unrecalled first.
const UNRECALLED: &str = "SELECT id FROM facts WHERE {reachable} AND COALESCE(last_recalled_at, created_at) < $3 \
     ORDER BY COALESCE(last_recalled_at, created_at) LIMIT $6";

/// Up to `$6` of the reachable facts of each user past the `$3` best by the keep score
/// (docs/behaviour.md, "Forgetting"): `0.5 × score (0.5 when unscored) + 0.3 × 30 / (30 +
/// days since said or last recalled) + 0.2 × recalls / (recalls + 5)`; ties keep the
/// newer. `{days}` is the dialect's days between `$4` and `freshest`.
const NOT_KEPT: &str = "SELECT id FROM (SELECT id, row_number() OVER (PARTITION BY external_ref \
       ORDER BY 0.5 * COALESCE(score, 0.5) + 0.3 * 30 / (30 + {days}) \
         + 0.2 * CAST(recall_count AS DOUBLE PRECISION) / (recall_count + 5) DESC, observed_at DESC, id DESC) AS rank \
       FROM facts WHERE {reachable}) AS ranked \
     WHERE rank > $3 LIMIT $6";

/// Days from a fact's `observed_at` or `last_recalled_at`, the later, to `$4` (never
/// negative), per dialect.
const POSTGRES_DAYS: &str = "GREATEST(CAST(EXTRACT(EPOCH FROM ($4 - GREATEST(observed_at, \
       COALESCE(last_recalled_at, observed_at)))) AS DOUBLE PRECISION) / 86400, 0)";
const SQLITE_DAYS: &str =
    "max(julianday($4) - julianday(max(observed_at, COALESCE(last_recalled_at, observed_at))), 0)";

/// One fact policy a sweep applies, with its cut-off; its [`reason`](Self::reason) is the
/// `reason` of the `fact.deleted` events and the metric's label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FactPolicy {
    /// `forget_extracted_after_days`: facts said before this time.
    MaxAge(DateTime<Utc>),
    /// `forget_unrecalled_after_days`: facts not recalled since this time.
    Unrecalled(DateTime<Utc>),
    /// `keep_best_facts`: all but this many per user.
    KeepBest(i64),
}

impl FactPolicy {
    pub fn reason(self) -> &'static str {
        match self {
            FactPolicy::MaxAge(_) => "max_age",
            FactPolicy::Unrecalled(_) => "unrecalled",
            FactPolicy::KeepBest(_) => "keep_best",
        }
    }
}

/// Ids of the messages of conversation `$2` (tenant `$1`) older than its `$3 + 1` newest,
/// the oldest `$5` of them; with `$4` false only those a rolling summary already covers.
/// Index: messages' `(conversation_id, seq)`.
const TRIM: &str = "DELETE FROM messages WHERE id IN (SELECT id FROM messages \
     WHERE conversation_id = $2 AND tenant_id = $1 \
       AND seq < (SELECT seq FROM messages WHERE conversation_id = $2 ORDER BY seq DESC LIMIT 1 OFFSET $3) \
       AND ($4 OR seq <= (SELECT summary_through_seq FROM conversations WHERE id = $2)) \
     ORDER BY seq LIMIT $5)";

impl Store {
    /// Up to `limit` agents, after `after` (keyset), that set a forgetting or retention
    /// policy (index `agent_configs_forgetting`).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "policy_agents", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn policy_agents(&self, after: Option<(&TenantId, &AgentId)>, limit: i64) -> Result<Vec<PolicyAgent>> {
        let sql = concat!(
            "SELECT tenant_id, ",
            config_columns!(),
            " FROM agent_configs \
             WHERE (forget_extracted_after_days > 0 OR forget_unrecalled_after_days > 0 OR keep_best_facts > 0 \
                    OR max_messages_per_conversation > 0 OR delete_conversations_after_days > 0) \
               AND ($1 IS NULL OR tenant_id > $1 OR (tenant_id = $1 AND agent_id > $2)) \
             ORDER BY tenant_id, agent_id LIMIT $3"
        );
        let rows: Vec<PolicyAgentRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(after.map(|(tenant, _)| tenant.as_str()))
                .bind(after.map(|(_, agent)| agent.as_str()))
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        Ok(rows
            .into_iter()
            .map(|row| {
                let config = AgentConfig::from(row.config);
                let agent = config.agent_id.clone();
                let settings = Settings::from(config);
                PolicyAgent {
                    tenant: row.tenant_id,
                    agent,
                    forgetting: settings.forgetting,
                    retention: settings.retention,
                    summarizes: settings.summarize_after_messages > 0,
                }
            })
            .collect())
    }

    /// Deletes up to `limit` of the agent's facts that `policy` names, in one transaction
    /// with their `fact.deleted` events; returns how many.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "forget_facts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn forget_facts(
        &self,
        agent: &PolicyAgent,
        policy: FactPolicy,
        now: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64> {
        let select = match policy {
            FactPolicy::MaxAge(_) => TOO_OLD.to_owned(),
            FactPolicy::Unrecalled(_) => UNRECALLED.to_owned(),
            FactPolicy::KeepBest(_) => NOT_KEPT.replace("{days}", self.dialect(POSTGRES_DAYS, SQLITE_DAYS)),
        }
        .replace("{reachable}", REACHABLE);
        let sql = format!("DELETE FROM facts WHERE id IN ({select}) RETURNING tenant_id, {}", fact_columns!());
        let mut tx = self.begin_change(Actor::Sweeper).await?;
        let rows: Vec<ExpiredRow> = with_tx!(tx, tx => {
            let query = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(agent.tenant.as_str()).bind(agent.agent.as_str());
            let query = match policy {
                FactPolicy::MaxAge(before) | FactPolicy::Unrecalled(before) => query.bind(before),
                FactPolicy::KeepBest(keep) => query.bind(keep),
            };
            query
                .bind(now)
                .bind(agent.forgetting.curated)
                .bind(limit)
                .fetch_all(&mut **tx)
                .await?
        });
        super::counted(&rows);
        tx.commit_swept(rows, policy.reason()).await
    }

    /// Adds recall counts: for each `(fact, count, last)`, `count` to the fact's
    /// `recall_count` and `last` as its `last_recalled_at` (unless a later one is
    /// stored). One transaction; a fact deleted meanwhile is skipped. Returns the facts
    /// updated. No event: recalls change what a fact is worth keeping, not the fact.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "add_recalls", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn add_recalls(&self, recalls: &[(Uuid, u32, DateTime<Utc>)]) -> Result<u64> {
        // Index: the primary key.
        let sql = "UPDATE facts SET recall_count = recall_count + $2, \
             last_recalled_at = CASE WHEN last_recalled_at IS NULL OR last_recalled_at < $3 THEN $3 ELSE last_recalled_at END \
             WHERE id = $1";
        let mut tx = self.begin_write().await?;
        let mut updated = 0;
        for (id, count, last) in recalls {
            updated += with_tx!(tx, tx => {
                sqlx::query(sql).bind(id).bind(i64::from(*count)).bind(last).execute(&mut **tx).await?.rows_affected()
            });
        }
        tx.commit().await?;
        Ok(updated)
    }

    /// Up to `limit` of the agent's conversations holding more than `max` messages, after
    /// `after` (keyset by id).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "long_conversations", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn long_conversations(
        &self,
        agent: &PolicyAgent,
        max: i64,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Uuid>> {
        // Index: conversations_tenant_agent_updated (the agent's conversations).
        let sql = "SELECT id FROM conversations WHERE tenant_id = $1 AND agent_id = $2 AND message_count > $3 \
             AND ($4 IS NULL OR id > $4) ORDER BY id LIMIT $5";
        let rows: Vec<(Uuid,)> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(agent.tenant.as_str())
                .bind(agent.agent.as_str())
                .bind(max)
                .bind(after)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// Deletes up to `limit` of the oldest messages of conversation `id` beyond its `max`
    /// newest (with `summarized_only`, only those its rolling summary covers), lowers its
    /// `message_count` and writes `conversation.cleared` (`reason: retention`, the count),
    /// in one transaction; returns how many.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "trim_conversation", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn trim_conversation(
        &self,
        tenant: &TenantId,
        id: Uuid,
        max: i64,
        summarized_only: bool,
        limit: i64,
    ) -> Result<u64> {
        let count_sql = "UPDATE conversations SET message_count = message_count - $3 \
             WHERE id = $1 AND tenant_id = $2 RETURNING agent_id, external_ref";
        let mut tx = self.begin_change(Actor::Sweeper).await?;
        let trimmed = with_tx!(tx, tx => {
            let deleted = sqlx::query(TRIM)
                .bind(tenant.as_str())
                .bind(id)
                .bind(max - 1)
                .bind(!summarized_only)
                .bind(limit)
                .execute(&mut **tx)
                .await?
                .rows_affected();
            if deleted == 0 {
                None
            } else {
                let owner: (String, ExternalRef) = sqlx::query_as(count_sql)
                    .bind(id)
                    .bind(tenant.as_str())
                    .bind(i64::try_from(deleted).unwrap_or(i64::MAX))
                    .fetch_one(&mut **tx)
                    .await?;
                Some((deleted, owner))
            }
        });
        let Some((deleted, (agent, user))) = trimmed else {
            tx.commit().await?;
            return Ok(0);
        };
        let data = EventData {
            conversation_id: Some(id),
            count: Some(deleted),
            reason: Some("retention"),
            ..EventData::default()
        };
        tx.record_person(tenant, Some(&agent), &user, EventType::ConversationCleared, data);
        tx.commit().await?;
        Ok(deleted)
    }

    /// Deletes up to `limit` of the agent's conversations that ended before `before`, the
    /// longest ended first, with their messages, writing `conversation.deleted` (`reason:
    /// retention`) for each in the same transaction; returns how many (index
    /// `conversations_ended`). Facts and jobs are kept, as on a caller's delete.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_ended_conversations", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_ended_conversations(
        &self,
        agent: &PolicyAgent,
        before: DateTime<Utc>,
        limit: i64,
    ) -> Result<u64> {
        let sql = "DELETE FROM conversations WHERE id IN (SELECT id FROM conversations \
               WHERE tenant_id = $1 AND agent_id = $2 AND ended_at < $3 ORDER BY ended_at LIMIT $4) \
             RETURNING id, external_ref";
        let mut tx = self.begin_change(Actor::Sweeper).await?;
        let rows: Vec<(Uuid, ExternalRef)> = with_tx!(tx, tx => {
            sqlx::query_as(sql)
                .bind(agent.tenant.as_str())
                .bind(agent.agent.as_str())
                .bind(before)
                .bind(limit)
                .fetch_all(&mut **tx)
                .await?
        });
        super::counted(&rows);
        let deleted = rows.len() as u64;
        for (id, user) in rows {
            let data = EventData { conversation_id: Some(id), reason: Some("retention"), ..EventData::default() };
            tx.record_person(&agent.tenant, Some(agent.agent.as_str()), &user, EventType::ConversationDeleted, data);
        }
        tx.commit().await?;
        Ok(deleted)
    }
}
