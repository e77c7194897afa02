//! Message rows: the append transaction (sequence numbers, idempotency keys, the
//! optimistic `expected_last_seq` check, the rolling summary and the extraction segment it
//! may queue), reads by
//! sequence and role, and clearing a thread's messages.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use super::{
    Result, Store,
    conversations::ConversationRow,
    jobs::NewJob,
    policy::{POLICY_SQL, PolicyRow},
    with_pool, with_tx, with_writer,
};
use crate::domain::{
    agent_config::Settings,
    conversation::{AppendRequest, Appended, IdempotencyKey, SegmentInputs, extraction_decision, segment_due},
    event::{Actor, EventData, EventType},
    ids::{ExternalRef, TenantId},
    job::JobKind,
    message::{BatchCounts, Message, Role, RoleSet, ToolCall},
    policy::Policy,
    summary::{SummaryState, summary_due},
};

/// What became of an append.
#[derive(Debug)]
pub enum AppendOutcome {
    /// Stored now; `job_queued` when the append queued a summary or an extraction.
    Appended { appended: Appended, job_queued: bool },
    /// The same key and body were stored before: their first response, nothing stored.
    Replayed(Appended),
    /// The key was used before with a different body: nothing stored.
    KeyReused,
    /// `expected_last_seq` was not the conversation's last seq, which is this: nothing stored.
    StaleSeq(i64),
    /// No such conversation in the tenant.
    NotFound,
}

#[derive(sqlx::FromRow)]
pub(super) struct MessageRow {
    id: Uuid,
    conversation_id: Uuid,
    seq: i64,
    role: String,
    content: Json<serde_json::Value>,
    name: Option<String>,
    tool_calls: Option<Json<Vec<ToolCall>>>,
    tool_call_id: Option<String>,
    metadata: Option<Json<serde_json::Value>>,
    created_at: DateTime<Utc>,
}

impl TryFrom<MessageRow> for Message {
    type Error = sqlx::Error;
    fn try_from(row: MessageRow) -> Result<Message> {
        Ok(Message {
            id: row.id,
            conversation_id: row.conversation_id,
            seq: row.seq,
            role: Role::parse(&row.role)
                .ok_or_else(|| sqlx::Error::Decode(format!("unknown role {:?}", row.role).into()))?,
            content: row.content.0,
            name: row.name,
            tool_calls: row.tool_calls.map(|calls| calls.0),
            tool_call_id: row.tool_call_id,
            metadata: row.metadata.map(|m| m.0),
            created_at: row.created_at,
        })
    }
}

macro_rules! message_columns {
    () => {
        "id, conversation_id, seq, role, content, name, tool_calls, tool_call_id, metadata, created_at"
    };
}
pub(super) use message_columns;

/// How long a stored `Idempotency-Key` answers repeats: a client's retries are over
/// well within a day.
pub const IDEMPOTENCY_KEY_TTL: chrono::TimeDelta = chrono::TimeDelta::hours(24);

fn encode_error(error: serde_json::Error) -> sqlx::Error {
    sqlx::Error::Encode(Box::new(error))
}

/// A bumped conversation with its agent's summary and rolling extraction settings, read
/// by the same statement (`None` when the agent was never configured: the defaults apply;
/// `extract_every_user_turns` is also `None` when the agent extracts at the end only).
#[derive(sqlx::FromRow)]
struct BumpedRow {
    #[sqlx(flatten)]
    conversation: ConversationRow,
    summarize_after_messages: Option<i32>,
    summary_window: Option<i32>,
    memory_enabled: Option<bool>,
    extract_every_user_turns: Option<i32>,
}

/// A conversation's messages of some roles after a sequence number, in `seq` order
/// `$order` (`""` or `" DESC"`). Binds: conversation, tenant, after_seq, four role slots,
/// limit. Uses the UNIQUE (conversation_id, seq) index, read forwards or backwards. The
/// roles are four equalities, not `role IN (…)`: SQLite answers an `IN` list of more than
/// two values by building a temporary B-tree of them at every run (see `Dialect` in
/// `facts.rs`).
macro_rules! list_messages {
    ($order:literal) => {
        concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq > $3 \
               AND (role = $4 OR role = $5 OR role = $6 OR role = $7) ORDER BY seq",
            $order,
            " LIMIT $8"
        )
    };
}

/// The first messages (see `list_messages!`).
const LIST_FIRST: &str = list_messages!("");

/// The last messages, newest first.
const LIST_LAST: &str = list_messages!(" DESC");

impl Store {
    /// Appends a validated batch in one transaction, all or nothing.
    ///
    /// The first statement bumps the conversation's counters and so locks its row
    /// (PostgreSQL row lock; SQLite's `BEGIN IMMEDIATE` serialises writers): concurrent
    /// appends to one conversation take turns, each reserving the next `seq` range, so
    /// sequence numbers have no gaps or duplicates. The idempotency check runs under
    /// the same lock, so of two concurrent first requests with one key the second waits
    /// and then finds the first's record; the `(conversation_id, key)` primary key is
    /// the backstop. A replay or conflict rolls back, leaving the counters untouched.
    ///
    /// `expected_last_seq` is a condition of that same first statement, so the check
    /// costs no round trip and holds under the lock: of concurrent appenders expecting
    /// one seq, exactly one matches. Only a miss reads again, to tell a missing
    /// conversation from a stale seq (or a replay, whose seq has moved on by design).
    ///
    /// When the thread now holds more unsummarised messages than its agent's
    /// `summarize_after_messages` ([`summary_due`]), a `summarize` job is queued in the
    /// same transaction, and the conversation's `summary_queued_through_seq` marks it so
    /// that the next appends do not queue it again.
    ///
    /// When the batch brings the user turns since the last segment to the agent's
    /// `extract_every_user_turns` ([`segment_due`]), the rule of an end decides under the
    /// same lock (memory, the conversation's opt-out, consent with `default_consent`,
    /// `min_user_turns`) whether the new segment is queued ([`super::Tx::queue_segment`]);
    /// either way the count starts again, so the policy is read once per segment, not on
    /// every append.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "append_messages", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn append_messages(
        &self,
        tenant: &TenantId,
        conversation_id: Uuid,
        request: &AppendRequest,
        key: Option<&IdempotencyKey>,
        default_consent: bool,
    ) -> Result<AppendOutcome> {
        let now = super::now();
        let counts = BatchCounts::of(&request.messages);
        let fingerprint = key.map(|_| request.fingerprint());
        let bump_sql = concat!(
            "UPDATE conversations SET \
               last_seq = last_seq + $3, \
               message_count = message_count + $3, \
               user_turns = user_turns + $4, \
               last_user_seq = COALESCE(last_seq + $5, last_user_seq), \
               status = 'open', \
               ended_at = NULL, \
               updated_at = $6 \
             WHERE id = $1 AND tenant_id = $2 AND ($7 IS NULL OR last_seq = $7) RETURNING ",
            super::conversations::conversation_columns!(),
            // The agent's summary settings, by primary key, in the same round trip.
            ", (SELECT summarize_after_messages FROM agent_configs a \
                WHERE a.tenant_id = $2 AND a.agent_id = conversations.agent_id) AS summarize_after_messages, \
               (SELECT summary_window FROM agent_configs a \
                WHERE a.tenant_id = $2 AND a.agent_id = conversations.agent_id) AS summary_window, \
               (SELECT memory_enabled FROM agent_configs a \
                WHERE a.tenant_id = $2 AND a.agent_id = conversations.agent_id) AS memory_enabled, \
               (SELECT extract_every_user_turns FROM agent_configs a \
                WHERE a.tenant_id = $2 AND a.agent_id = conversations.agent_id) AS extract_every_user_turns"
        );
        let last_seq_sql = "SELECT last_seq FROM conversations WHERE id = $1 AND tenant_id = $2";
        let key_sql = "SELECT request_hash, response FROM idempotency_keys \
                       WHERE conversation_id = $1 AND key = $2 AND tenant_id = $3";
        let remember_sql = "INSERT INTO idempotency_keys (conversation_id, tenant_id, key, request_hash, response, \
                            created_at) VALUES ($1, $2, $3, $4, $5, $6)";
        // Binds: conversation, tenant, through_seq.
        let mark_sql = "UPDATE conversations SET summary_queued_through_seq = $3 \
                        WHERE id = $1 AND tenant_id = $2 AND summary_queued_through_seq < $3";

        let mut tx = self.begin_write().await?;
        // Binds: conversation, tenant, user turns.
        let checked_sql = "UPDATE conversations SET segment_user_turns = $3 WHERE id = $1 AND tenant_id = $2";
        let step = with_tx!(tx, tx => 'step: {
            // The row bumped, or on a miss the conversation's last seq: a stale
            // `expected_last_seq`, or a replay (whose seq has moved on by design).
            let bumped: Option<BumpedRow> = sqlx::query_as(bump_sql)
                .bind(conversation_id)
                .bind(tenant.as_str())
                .bind(counts.messages)
                .bind(counts.user_turns)
                .bind(counts.last_user_offset)
                .bind(now)
                .bind(request.expected_last_seq)
                .fetch_optional(&mut **tx)
                .await?;
            let bumped = match bumped {
                Some(row) => Ok(row),
                None => {
                    let last_seq: Option<i64> = sqlx::query_scalar(last_seq_sql)
                        .bind(conversation_id)
                        .bind(tenant.as_str())
                        .fetch_optional(&mut **tx)
                        .await?;
                    let Some(last_seq) = last_seq else { break 'step Err(AppendOutcome::NotFound) };
                    Err(last_seq)
                }
            };
            if let (Some(key), Some(fingerprint)) = (key, &fingerprint) {
                let stored: Option<(String, Json<serde_json::Value>)> = sqlx::query_as(key_sql)
                    .bind(conversation_id)
                    .bind(key.as_str())
                    .bind(tenant.as_str())
                    .fetch_optional(&mut **tx)
                    .await?;
                if let Some(outcome) = replay(stored, fingerprint)? {
                    break 'step Err(outcome);
                }
            }
            let BumpedRow { conversation: row, summarize_after_messages, summary_window, memory_enabled, extract_every_user_turns } = match bumped {
                Ok(bumped) => bumped,
                Err(last_seq) => break 'step Err(AppendOutcome::StaleSeq(last_seq)),
            };

            let first_seq = row.last_seq - counts.messages + 1;
            let messages: Vec<Message> = request
                .messages
                .iter()
                .zip(first_seq..)
                .map(|(new, seq)| Message {
                    id: Uuid::now_v7(),
                    conversation_id,
                    seq,
                    role: new.role,
                    content: new.content.clone(),
                    name: new.name.clone(),
                    tool_calls: new.tool_calls.clone(),
                    tool_call_id: new.tool_call_id.clone(),
                    metadata: new.metadata.clone(),
                    created_at: now,
                })
                .collect();
            // One statement for the batch: at most 100 rows of 11 parameters.
            let mut insert = sqlx::QueryBuilder::new(concat!("INSERT INTO messages (", message_columns!(), ", tenant_id) "));
            insert.push_values(&messages, |mut values, m| {
                values
                    .push_bind(m.id)
                    .push_bind(m.conversation_id)
                    .push_bind(m.seq)
                    .push_bind(m.role.as_str())
                    .push_bind(Json(&m.content))
                    .push_bind(m.name.as_deref())
                    .push_bind(m.tool_calls.as_ref().map(Json))
                    .push_bind(m.tool_call_id.as_deref())
                    .push_bind(m.metadata.as_ref().map(Json))
                    .push_bind(m.created_at)
                    .push_bind(tenant.as_str());
            });
            insert.build().execute(&mut **tx).await?;

            let defaults = Settings::default();
            let state = SummaryState {
                summarize_after_messages: summarize_after_messages.unwrap_or(defaults.summarize_after_messages),
                summary_window: summary_window.unwrap_or(defaults.summary_window),
                conversation_memory: row.memory,
                message_count: row.message_count,
                last_seq: row.last_seq,
                summary_through_seq: row.summary_through_seq,
                summary_queued_through_seq: row.summary_queued_through_seq,
            };
            let summary = summary_due(&state).map(|through_seq| (through_seq, row.agent_id.clone(), row.external_ref.clone()));
            let segment = segment_due(&SegmentInputs {
                memory_enabled: memory_enabled.unwrap_or(defaults.memory_enabled),
                conversation_memory: row.memory,
                every: extract_every_user_turns,
                user_turns: row.user_turns,
                segment_user_turns: row.segment_user_turns,
            })
            .then(|| row.clone());
            let appended = Appended { messages, conversation: row.try_into()? };
            if let (Some(key), Some(fingerprint)) = (key, &fingerprint) {
                let response = serde_json::to_value(&appended).map_err(encode_error)?;
                sqlx::query(remember_sql)
                    .bind(conversation_id)
                    .bind(tenant.as_str())
                    .bind(key.as_str())
                    .bind(fingerprint)
                    .bind(Json(response))
                    .bind(now)
                    .execute(&mut **tx)
                    .await?;
            }
            Ok((appended, summary, segment))
        });
        let (appended, summary, segment) = match step {
            Ok(step) => step,
            // A missing conversation, a stale seq or a replay stores nothing: rolled back,
            // and answered once what it read is committed (see [`Tx::roll_back`]).
            Err(outcome) => {
                tx.roll_back().await?;
                return Ok(outcome);
            }
        };
        let mut job_queued = false;
        if let Some(row) = segment {
            let policy: PolicyRow = with_tx!(tx, tx => {
                sqlx::query_as(POLICY_SQL)
                    .bind(tenant.as_str())
                    .bind(&row.agent_id)
                    .bind(&row.external_ref)
                    .fetch_one(&mut **tx)
                    .await?
            });
            let decision = extraction_decision(&row.extraction_inputs(&Policy::from(policy), default_consent));
            if decision.is_ok() && tx.queue_segment(tenant, &row, now).await?.is_some() {
                job_queued = true;
            } else {
                with_tx!(tx, tx => {
                    sqlx::query(checked_sql).bind(conversation_id).bind(tenant.as_str()).bind(row.user_turns).execute(&mut **tx).await?;
                });
            }
        }
        if let Some((through_seq, agent_id, external_ref)) = summary {
            let job = NewJob {
                kind: JobKind::Summarize,
                tenant,
                agent_id: &agent_id,
                external_ref: &external_ref,
                conversation_id,
                from_seq: 0,
                through_seq,
            };
            if tx.queue_job(&job, now).await?.is_some() {
                with_tx!(tx, tx => {
                    sqlx::query(mark_sql).bind(conversation_id).bind(tenant.as_str()).bind(through_seq).execute(&mut **tx).await?;
                });
                job_queued = true;
            }
        }
        tx.commit().await?;
        Ok(AppendOutcome::Appended { appended, job_queued })
    }

    /// The messages of `roles` after `after_seq` that `window` takes, oldest first; `None`
    /// when there is no such conversation in the tenant.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_messages", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation_id: Uuid,
        after_seq: i64,
        roles: RoleSet,
        window: Window,
    ) -> Result<Option<Vec<Message>>> {
        let (sql, limit) = match window {
            Window::First(limit) => (LIST_FIRST, limit),
            Window::Last(count) => (LIST_LAST, count),
        };
        let [r1, r2, r3, r4] = role_slots(roles);
        let mut rows: Vec<MessageRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(conversation_id)
                .bind(tenant.as_str())
                .bind(after_seq)
                .bind(r1)
                .bind(r2)
                .bind(r3)
                .bind(r4)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        if matches!(window, Window::Last(_)) {
            rows.reverse();
        }
        self.messages_of(tenant, conversation_id, rows).await
    }

    /// The messages of conversation `conversation_id` numbered `seqs` that are still
    /// stored (retention or a request may have cleared some), in no order: the words of
    /// facts' source messages. `seqs` are given once each (a fact keeps at most ten).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "messages_at", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn messages_at(&self, tenant: &TenantId, conversation_id: Uuid, seqs: &[i64]) -> Result<Vec<Message>> {
        // Uses the UNIQUE (conversation_id, seq) index, one seek per seq.
        let sql = self.dialect(
            concat!(
                "SELECT ",
                message_columns!(),
                " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 \
                 AND seq IN (SELECT CAST(value AS BIGINT) FROM json_array_elements_text(CAST($3 AS json)))"
            ),
            concat!(
                "SELECT ",
                message_columns!(),
                " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq IN (SELECT value FROM json_each($3))"
            ),
        );
        let seqs = serde_json::to_string(seqs).map_err(|e| sqlx::Error::Encode(e.into()))?;
        let rows: Vec<MessageRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(conversation_id).bind(tenant.as_str()).bind(seqs.as_str()).fetch_all(pool).await?
        });
        super::counted(&rows);
        rows.into_iter().map(Message::try_from).collect()
    }

    /// Deletes a conversation's messages and the idempotency records that hold copies of
    /// them, keeping the conversation (and its key). Sequence numbers go on from where
    /// they were, so a client syncing with `after_seq` never takes a new message for one
    /// it has seen, and extraction marks stay meaningful. The rolling summary goes too
    /// (it is made of those messages). Pending extractions and summaries of it are
    /// cancelled: what they would read is gone, and a running one is fenced. `None`
    /// when there is no such conversation in the tenant.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "clear_messages", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn clear_messages(&self, tenant: &TenantId, conversation_id: Uuid, actor: Actor) -> Result<Option<u64>> {
        let now = super::now();
        // Binds: conversation, tenant, now. Locks the row, as an append does.
        let reset_sql = "UPDATE conversations SET message_count = 0, user_turns = 0, segment_user_turns = 0, summary = NULL, \
                         summary_through_seq = 0, summary_queued_through_seq = 0, updated_at = $3 \
                         WHERE id = $1 AND tenant_id = $2 RETURNING agent_id, external_ref";
        // Binds: conversation, tenant.
        let messages_sql = "DELETE FROM messages WHERE conversation_id = $1 AND tenant_id = $2";
        let keys_sql = "DELETE FROM idempotency_keys WHERE conversation_id = $1 AND tenant_id = $2";
        let mut tx = self.begin_change(actor).await?;
        // Jobs before the conversation (see `cancel_conversation_jobs`); for an id that does
        // not exist this changes nothing, and the transaction is not committed.
        super::conversations::cancel_conversation_jobs(&mut tx, tenant, conversation_id, "messages cleared", now)
            .await?;
        let (deleted, agent, user) = with_tx!(tx, tx => {
            let found: Option<(String, ExternalRef)> =
                sqlx::query_as(reset_sql).bind(conversation_id).bind(tenant.as_str()).bind(now).fetch_optional(&mut **tx).await?;
            let Some((agent, user)) = found else {
                return Ok(None);
            };
            let deleted =
                sqlx::query(messages_sql).bind(conversation_id).bind(tenant.as_str()).execute(&mut **tx).await?.rows_affected();
            sqlx::query(keys_sql).bind(conversation_id).bind(tenant.as_str()).execute(&mut **tx).await?;
            (deleted, agent, user)
        });
        let data = EventData { conversation_id: Some(conversation_id), count: Some(deleted), ..EventData::default() };
        tx.record_person(tenant, Some(&agent), &user, EventType::ConversationCleared, data);
        tx.commit().await?;
        Ok(Some(deleted))
    }

    /// Decodes rows; an empty result asks whether the conversation exists at all, so
    /// that the common case (some messages) costs one query.
    async fn messages_of(
        &self,
        tenant: &TenantId,
        conversation_id: Uuid,
        rows: Vec<MessageRow>,
    ) -> Result<Option<Vec<Message>>> {
        if rows.is_empty() && !self.conversation_exists(tenant, conversation_id).await? {
            return Ok(None);
        }
        rows.into_iter().map(Message::try_from).collect::<Result<Vec<_>>>().map(Some)
    }

    async fn conversation_exists(&self, tenant: &TenantId, id: Uuid) -> Result<bool> {
        let sql = "SELECT count(*) FROM conversations WHERE id = $1 AND tenant_id = $2";
        let found: i64 = with_pool!(self, pool => {
            sqlx::query_scalar(sql).bind(id).bind(tenant.as_str()).fetch_one(pool).await?
        });
        Ok(found > 0)
    }

    /// Forgets idempotency keys older than [`IDEMPOTENCY_KEY_TTL`], across all tenants
    /// (housekeeping by the sweeper). Returns how many were deleted.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_expired_idempotency_keys", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_expired_idempotency_keys(&self) -> Result<u64> {
        // Uses idempotency_keys_created.
        let sql = "DELETE FROM idempotency_keys WHERE created_at < $1";
        let cutoff = super::now() - IDEMPOTENCY_KEY_TTL;
        Ok(with_writer!(self, conn => {
            sqlx::query(sql).bind(cutoff).execute(conn).await?.rows_affected()
        }))
    }
}

/// What a stored idempotency record makes of a request with the same key: its first
/// response when the body is the same, a conflict when not, nothing when there is none.
fn replay(stored: Option<(String, Json<serde_json::Value>)>, fingerprint: &str) -> Result<Option<AppendOutcome>> {
    let Some((stored_fingerprint, response)) = stored else { return Ok(None) };
    if stored_fingerprint != fingerprint {
        return Ok(Some(AppendOutcome::KeyReused));
    }
    let first: Appended = serde_json::from_value(response.0).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
    Ok(Some(AppendOutcome::Replayed(first)))
}

/// The four `role IN (…)` slots of a read: the set's roles, the last one repeated to
/// fill the rest (one statement for every set, portable to both dialects).
fn role_slots(roles: RoleSet) -> [&'static str; 4] {
    let mut slots = [""; 4];
    let mut last = "";
    let mut chosen = roles.roles();
    for slot in &mut slots {
        if let Some(role) = chosen.next() {
            last = role.as_str();
        }
        *slot = last;
    }
    slots
}

/// Which messages of a thread a read takes (of the chosen roles, after a seq).
#[derive(Debug, Clone, Copy)]
pub enum Window {
    /// Up to this many, from the oldest.
    First(i64),
    /// The newest this many (returned oldest first).
    Last(i64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn reading_messages_builds_no_temporary_b_tree() {
        for sql in [LIST_FIRST, LIST_LAST] {
            let opcodes = super::super::tests::sqlite_opcodes(sql).await;
            assert!(opcodes.iter().any(|op| op.starts_with("Seek")), "uses the index: {opcodes:?}");
            assert!(!opcodes.iter().any(|op| op == "OpenEphemeral"), "{sql}: {opcodes:?}");
        }
    }
}
