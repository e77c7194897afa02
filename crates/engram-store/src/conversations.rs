//! Conversation rows: create, read, list, update, delete, and ending one (with the
//! extraction job it may queue), which the end route and the idle sweeper share.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use super::{
    Result, Store,
    jobs::NewJob,
    policy::{POLICY_SQL, PolicyRow},
    with_pool, with_tx,
};
use crate::domain::{
    conversation::{
        Conversation, ConversationPatch, ConversationStatus, Ended, Extraction, ExtractionInputs, NewConversation,
        SkipReason, extraction_decision,
    },
    event::{Actor, EventData, EventType},
    ids::{AgentId, ConversationKey, ExternalRef, TenantId},
    job::JobKind,
    owner::Owner,
    policy::Policy,
};

/// A conversation row with the bookkeeping columns the API does not show.
#[derive(Clone, sqlx::FromRow)]
pub(super) struct ConversationRow {
    id: Uuid,
    pub(super) agent_id: String,
    pub(super) external_ref: String,
    key: Option<String>,
    title: Option<String>,
    metadata: Json<serde_json::Value>,
    pub(super) memory: bool,
    status: String,
    pub(super) message_count: i64,
    pub(super) user_turns: i64,
    pub(super) last_seq: i64,
    last_user_seq: i64,
    extracted_through_seq: i64,
    queued_through_seq: i64,
    pub(super) segment_user_turns: i64,
    pub(super) summary_through_seq: i64,
    pub(super) summary_queued_through_seq: i64,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    ended_at: Option<DateTime<Utc>>,
}

impl ConversationRow {
    /// What the extraction rule reads, of this row (read under its lock) and the owner's
    /// policy: an end and a due segment decide alike.
    pub(super) fn extraction_inputs(&self, policy: &Policy, default_consent: bool) -> ExtractionInputs {
        let settings = policy.settings();
        ExtractionInputs {
            memory_enabled: settings.memory_enabled,
            conversation_memory: self.memory,
            min_user_turns: settings.min_user_turns.into(),
            consent: policy.consent(default_consent),
            user_turns: self.user_turns,
            last_user_seq: self.last_user_seq,
            extracted_through_seq: self.extracted_through_seq,
            queued_through_seq: self.queued_through_seq,
        }
    }
}

impl TryFrom<ConversationRow> for Conversation {
    type Error = sqlx::Error;
    fn try_from(row: ConversationRow) -> Result<Conversation> {
        let decode = |e: String| sqlx::Error::Decode(e.into());
        Ok(Conversation {
            id: row.id,
            agent_id: AgentId::parse(row.agent_id).map_err(decode)?,
            external_ref: ExternalRef::parse(row.external_ref).map_err(decode)?,
            key: row.key.map(ConversationKey::parse).transpose().map_err(decode)?,
            title: row.title,
            metadata: row.metadata.0,
            memory: row.memory,
            status: ConversationStatus::parse(&row.status)
                .ok_or_else(|| decode(format!("unknown conversation status {:?}", row.status)))?,
            message_count: row.message_count,
            user_turns: row.user_turns,
            extracted_through_seq: row.extracted_through_seq,
            created_at: row.created_at,
            updated_at: row.updated_at,
            ended_at: row.ended_at,
        })
    }
}

/// Every column of [`ConversationRow`], for `SELECT` and `RETURNING`.
macro_rules! conversation_columns {
    () => {
        "id, agent_id, external_ref, key, title, metadata, memory, status, message_count, user_turns, last_seq, last_user_seq, \
         extracted_through_seq, queued_through_seq, segment_user_turns, summary_through_seq, summary_queued_through_seq, \
         created_at, updated_at, ended_at"
    };
}
pub(super) use conversation_columns;

/// Filters of the list route; `None` matches everything.
#[derive(Debug, Default)]
pub struct ConversationFilter<'a> {
    pub agent_id: Option<&'a AgentId>,
    pub external_ref: Option<&'a ExternalRef>,
    pub key: Option<&'a ConversationKey>,
    pub status: Option<ConversationStatus>,
}

/// What a create did.
#[derive(Debug)]
pub enum Created {
    /// A new conversation.
    New(Conversation),
    /// The request's key names an existing conversation of the agent, returned as is
    /// (whether it agrees with the request is the caller's rule).
    Existing(Conversation),
}

/// How often a create retries when the conversation holding its key is deleted between
/// its insert and its read: each retry needs another concurrent delete, so this is only
/// a bound, never reached in practice.
const CREATE_ATTEMPTS: usize = 3;

/// Why a conversation is being ended.
#[derive(Debug, Clone, Copy)]
pub enum EndTrigger {
    /// A client asked: end it whatever its state (ending twice is allowed).
    Request,
    /// The idle sweeper: end it only if it is still open and was not updated since
    /// `idle_before`, re-checked under the row lock so a concurrent append wins.
    Idle { idle_before: DateTime<Utc> },
}

impl Store {
    /// Creates a conversation, or finds the one its key names. The unique index
    /// conversations_tenant_agent_key decides between concurrent creates with one key:
    /// the insert of the second waits for the first and then does nothing, and the read
    /// that follows finds the first's row (no read-then-write window).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "create_conversation", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn create_conversation(&self, tenant: &TenantId, new: &NewConversation, actor: Actor) -> Result<Created> {
        let now = super::now();
        // Binds: id, tenant, agent, external_ref, key, title, metadata, memory, now.
        let insert_sql = concat!(
            "INSERT INTO conversations (id, tenant_id, agent_id, external_ref, key, title, metadata, memory, status, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'open', $9, $9) \
             ON CONFLICT (tenant_id, agent_id, key) WHERE key IS NOT NULL DO NOTHING RETURNING ",
            conversation_columns!()
        );
        // Binds: tenant, agent, key. Uses conversations_tenant_agent_key.
        let by_key_sql = concat!(
            "SELECT ",
            conversation_columns!(),
            " FROM conversations WHERE tenant_id = $1 AND agent_id = $2 AND key = $3"
        );
        let mut tx = self.begin_change(actor).await?;
        for _ in 0..CREATE_ATTEMPTS {
            let inserted: Option<ConversationRow> = with_tx!(tx, tx => {
                sqlx::query_as(insert_sql)
                    .bind(Uuid::now_v7())
                    .bind(tenant.as_str())
                    .bind(new.agent_id.as_str())
                    .bind(new.external_ref.as_str())
                    .bind(new.key.as_ref().map(ConversationKey::as_str))
                    .bind(new.title.as_deref())
                    .bind(Json(new.metadata_or_empty()))
                    .bind(new.memory.unwrap_or(true))
                    .bind(now)
                    .fetch_optional(&mut **tx)
                    .await?
            });
            if let Some(row) = inserted {
                let conversation: Conversation = row.try_into()?;
                tx.record_person(
                    tenant,
                    Some(conversation.agent_id.as_str()),
                    &conversation.external_ref,
                    EventType::ConversationCreated,
                    EventData { conversation_id: Some(conversation.id), ..EventData::default() },
                );
                tx.commit().await?;
                return Ok(Created::New(conversation));
            }
            // Only a key can conflict, so there is one.
            let key = new.key.as_ref().map(ConversationKey::as_str);
            let existing: Option<ConversationRow> = with_tx!(tx, tx => {
                sqlx::query_as(by_key_sql)
                    .bind(tenant.as_str())
                    .bind(new.agent_id.as_str())
                    .bind(key)
                    .fetch_optional(&mut **tx)
                    .await?
            });
            if let Some(row) = existing {
                // The row may be another writer's of this same SQLite group commit: the
                // answer waits until it is in the file (see [`Tx::roll_back`]).
                tx.roll_back().await?;
                return Ok(Created::Existing(row.try_into()?));
            }
        }
        Err(sqlx::Error::Protocol("a conversation key kept changing owner during create".into()))
    }

    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_conversation", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn get_conversation(&self, tenant: &TenantId, id: Uuid) -> Result<Option<Conversation>> {
        let sql = concat!("SELECT ", conversation_columns!(), " FROM conversations WHERE id = $1 AND tenant_id = $2");
        let row: Option<ConversationRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(id).bind(tenant.as_str()).fetch_optional(pool).await?
        });
        row.map(Conversation::try_from).transpose()
    }

    /// One page, most recently updated first, after the `(updated_at, id)` key `after`.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_conversations", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_conversations(
        &self,
        tenant: &TenantId,
        filter: &ConversationFilter<'_>,
        after: Option<(DateTime<Utc>, Uuid)>,
        limit: i64,
    ) -> Result<Vec<Conversation>> {
        // Uses conversations_tenant_updated (or its agent/ref variants, or the key index).
        let sql = concat!(
            "SELECT ",
            conversation_columns!(),
            " FROM conversations WHERE tenant_id = $1 \
               AND ($2 IS NULL OR agent_id = $2) \
               AND ($3 IS NULL OR external_ref = $3) \
               AND ($4 IS NULL OR status = $4) \
               AND ($5 IS NULL OR key = $5) \
               AND ($6 IS NULL OR updated_at < $6 OR (updated_at = $6 AND id < $7)) \
             ORDER BY updated_at DESC, id DESC LIMIT $8"
        );
        let (after_at, after_id) = after.unzip();
        let rows: Vec<ConversationRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(tenant.as_str())
                .bind(filter.agent_id.map(AgentId::as_str))
                .bind(filter.external_ref.map(ExternalRef::as_str))
                .bind(filter.status.map(ConversationStatus::as_str))
                .bind(filter.key.map(ConversationKey::as_str))
                .bind(after_at)
                .bind(after_id)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        rows.into_iter().map(Conversation::try_from).collect()
    }

    /// Applies a patch; `None` when there is no such conversation in the tenant. Opting
    /// out (`memory: false`) also cancels the conversation's pending and running
    /// extractions and summaries in the same transaction: a running one is fenced and
    /// stores nothing.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "update_conversation", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn update_conversation(
        &self,
        tenant: &TenantId,
        id: Uuid,
        patch: ConversationPatch,
    ) -> Result<Option<Conversation>> {
        // Binds: id, tenant, set_title, title, metadata, memory, now.
        let sql = concat!(
            "UPDATE conversations SET \
               title = CASE WHEN $3 THEN $4 ELSE title END, \
               metadata = COALESCE($5, metadata), \
               memory = COALESCE($6, memory), \
               updated_at = $7 \
             WHERE id = $1 AND tenant_id = $2 RETURNING ",
            conversation_columns!()
        );
        let (set_title, title) = match patch.title {
            Some(title) => (true, title),
            None => (false, None),
        };
        let now = super::now();
        let mut tx = self.begin_write().await?;
        if patch.memory == Some(false) {
            // Jobs before the conversation: see [`cancel_conversation_jobs`]. For an id that
            // does not exist this changes nothing, and the transaction is not committed.
            cancel_conversation_jobs(&mut tx, tenant, id, "conversation opted out", now).await?;
        }
        let row: Option<ConversationRow> = with_tx!(tx, tx => {
            sqlx::query_as(sql)
                .bind(id)
                .bind(tenant.as_str())
                .bind(set_title)
                .bind(title)
                .bind(patch.metadata.map(Json))
                .bind(patch.memory)
                .bind(now)
                .fetch_optional(&mut **tx)
                .await?
        });
        if row.is_none() {
            return Ok(None);
        }
        tx.commit().await?;
        row.map(Conversation::try_from).transpose()
    }

    /// Deletes a conversation; its messages and idempotency records go with it (ON
    /// DELETE CASCADE). Jobs are kept, and facts too, unless the agent's
    /// `delete_facts_with_conversation` is on: then the facts drawn only from it go in
    /// the same transaction (see [`super::Tx::delete_drawn_only_from`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_conversation", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_conversation(&self, tenant: &TenantId, id: Uuid, actor: Actor) -> Result<bool> {
        let sql = "DELETE FROM conversations WHERE id = $1 AND tenant_id = $2 RETURNING agent_id, external_ref";
        let mut tx = self.begin_change(actor).await?;
        let deleted: Option<(AgentId, ExternalRef)> = with_tx!(tx, tx => {
            sqlx::query_as(sql).bind(id).bind(tenant.as_str()).fetch_optional(&mut **tx).await?
        });
        let Some((agent, user)) = deleted else { return Ok(false) };
        let with_facts: Option<bool> = with_tx!(tx, tx => {
            sqlx::query_scalar(
                "SELECT delete_facts_with_conversation FROM agent_configs WHERE tenant_id = $1 AND agent_id = $2",
            )
            .bind(tenant.as_str())
            .bind(agent.as_str())
            .fetch_optional(&mut **tx)
            .await?
        });
        if with_facts == Some(true) {
            tx.delete_drawn_only_from(Owner::new(tenant, &agent, &user), id).await?;
        }
        let data = EventData { conversation_id: Some(id), ..EventData::default() };
        tx.record_person(tenant, Some(agent.as_str()), &user, EventType::ConversationDeleted, data);
        tx.commit().await?;
        Ok(true)
    }

    /// Ends a conversation and decides, in the same transaction, whether to queue an
    /// extraction. `None` when there is no such conversation in the tenant, or (for
    /// [`EndTrigger::Idle`]) when it is no longer idle and open.
    ///
    /// The first statement locks the conversation row, so two concurrent ends (or an
    /// end racing an append) are serialised: the second sees the first's
    /// `queued_through_seq` and answers `nothing_new`; the unique
    /// `(conversation_id, kind, through_seq)` of jobs is the backstop.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "end_conversation", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn end_conversation(
        &self,
        tenant: &TenantId,
        id: Uuid,
        trigger: EndTrigger,
        default_consent: bool,
        actor: Actor,
    ) -> Result<Option<Ended>> {
        let now = super::now();
        let idle_before = match trigger {
            EndTrigger::Request => None,
            EndTrigger::Idle { idle_before } => Some(idle_before),
        };
        // An already ended conversation keeps its ended_at and updated_at.
        let end_sql = concat!(
            "UPDATE conversations SET \
               status = 'ended', \
               ended_at = CASE WHEN status = 'ended' THEN ended_at ELSE $3 END, \
               updated_at = CASE WHEN status = 'ended' THEN updated_at ELSE $3 END \
             WHERE id = $1 AND tenant_id = $2 AND ($4 IS NULL OR (status = 'open' AND updated_at < $4)) \
             RETURNING ",
            conversation_columns!()
        );
        let mut tx = self.begin_change(actor).await?;
        let (row, policy): (ConversationRow, PolicyRow) = with_tx!(tx, tx => {
            let Some(row): Option<ConversationRow> = sqlx::query_as(end_sql)
                .bind(id)
                .bind(tenant.as_str())
                .bind(now)
                .bind(idle_before)
                .fetch_optional(&mut **tx)
                .await?
            else {
                return Ok(None);
            };
            let policy = sqlx::query_as(POLICY_SQL)
                .bind(tenant.as_str())
                .bind(&row.agent_id)
                .bind(&row.external_ref)
                .fetch_one(&mut **tx)
                .await?;
            (row, policy)
        });
        let inputs = row.extraction_inputs(&Policy::from(policy), default_consent);
        let extraction = match extraction_decision(&inputs) {
            Err(reason) => Extraction::skipped(reason),
            Ok(()) => match tx.queue_segment(tenant, &row, now).await? {
                Some(job_id) => Extraction::queued(job_id),
                // A job for exactly this state exists already.
                None => Extraction::skipped(SkipReason::NothingNew),
            },
        };
        let conversation: Conversation = row.try_into()?;
        // Ending an ended conversation changes nothing (it keeps its `ended_at`).
        if conversation.ended_at == Some(now) {
            let data = EventData { conversation_id: Some(conversation.id), ..EventData::default() };
            let agent = Some(conversation.agent_id.as_str());
            tx.record_person(tenant, agent, &conversation.external_ref, EventType::ConversationEnded, data);
        }
        tx.commit().await?;
        Ok(Some(Ended { conversation, extraction }))
    }

    /// Open conversations not updated since `idle_before`, oldest first, across all
    /// tenants: the idle sweeper's work list (each is then ended in its own tenant).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "idle_conversations", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn idle_conversations(&self, idle_before: DateTime<Utc>, limit: i64) -> Result<Vec<(TenantId, Uuid)>> {
        // Uses the partial index conversations_open_idle.
        let sql = "SELECT tenant_id, id FROM conversations WHERE status = 'open' AND updated_at < $1 \
                   ORDER BY updated_at LIMIT $2";
        with_pool!(self, pool => {
            sqlx::query_as(sql).bind(idle_before).bind(limit).fetch_all(pool).await
        })
    }
}

impl super::Tx {
    /// Queues the extraction of what no job has covered yet: the segment after the
    /// conversation's `queued_through_seq` (or its `extracted_through_seq`, which an import
    /// sets) through its last message, and moves `queued_through_seq` to that end in
    /// the same transaction. `row` was read under the conversation's row lock (an end's
    /// or an append's first statement), so two writers never both take one message: each
    /// message is in one job's segment, and every retry or re-claim of that job reads
    /// the same segment. `None` when a job through this seq exists already.
    pub(super) async fn queue_segment(
        &mut self,
        tenant: &TenantId,
        row: &ConversationRow,
        now: DateTime<Utc>,
    ) -> Result<Option<Uuid>> {
        let job = NewJob {
            kind: JobKind::ExtractFacts,
            tenant,
            agent_id: &row.agent_id,
            external_ref: &row.external_ref,
            conversation_id: row.id,
            from_seq: row.extracted_through_seq.max(row.queued_through_seq),
            through_seq: row.last_seq,
        };
        let Some(job_id) = self.queue_job(&job, now).await? else { return Ok(None) };
        let mark_sql = "UPDATE conversations SET queued_through_seq = $3, segment_user_turns = $4 WHERE id = $1 AND tenant_id = $2";
        with_tx!(self, tx => {
            sqlx::query(mark_sql)
                .bind(row.id)
                .bind(tenant.as_str())
                .bind(row.last_seq)
                .bind(row.user_turns)
                .execute(&mut **tx)
                .await?;
        });
        Ok(Some(job_id))
    }
}

/// Cancels a conversation's queued, failed and running jobs inside `tx`: what they would
/// read is no longer theirs to read. A running job is fenced by its lease and stores
/// nothing.
/// Cancels the conversation's pending and running jobs. Called before the conversation's
/// own row is written: every transaction that touches both a conversation's jobs and its
/// row (erasure, a job's fenced write, clearing, opting out) locks the jobs first, so two
/// of them never wait for each other in a cycle.
pub(super) async fn cancel_conversation_jobs(
    tx: &mut super::Tx,
    tenant: &TenantId,
    conversation_id: Uuid,
    reason: &str,
    now: DateTime<Utc>,
) -> Result<()> {
    // Binds: tenant, conversation, reason, now.
    let sql = "UPDATE jobs SET status = 'cancelled', last_error = $3, locked_until = NULL, lease_token = NULL, \
               updated_at = $4 WHERE tenant_id = $1 AND conversation_id = $2 AND status IN ('queued', 'failed', 'running')";
    with_tx!(tx, tx => {
        sqlx::query(sql).bind(tenant.as_str()).bind(conversation_id).bind(reason).bind(now).execute(&mut **tx).await?;
    });
    Ok(())
}
