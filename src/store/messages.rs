//! Message rows: the append transaction (sequence numbers, idempotency keys) and reads
//! by sequence.

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use uuid::Uuid;

use super::{Result, Store, conversations::ConversationRow, with_pool, with_tx};
use crate::domain::{
    conversation::{AppendRequest, Appended, IdempotencyKey},
    ids::TenantId,
    message::{BatchCounts, Message, Role, ToolCall},
};

/// What became of an append.
#[derive(Debug)]
pub enum AppendOutcome {
    /// Stored now.
    Appended(Appended),
    /// The same key and body were stored before: their first response, nothing stored.
    Replayed(Appended),
    /// The key was used before with a different body: nothing stored.
    KeyReused,
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
    pub async fn append_messages(
        &self,
        tenant: &TenantId,
        conversation_id: Uuid,
        request: &AppendRequest,
        key: Option<&IdempotencyKey>,
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
             WHERE id = $1 AND tenant_id = $2 RETURNING ",
            super::conversations::conversation_columns!()
        );
        let key_sql = "SELECT request_hash, response FROM idempotency_keys \
                       WHERE conversation_id = $1 AND key = $2 AND tenant_id = $3";
        let remember_sql = "INSERT INTO idempotency_keys (conversation_id, tenant_id, key, request_hash, response, \
                            created_at) VALUES ($1, $2, $3, $4, $5, $6)";

        let mut tx = self.begin_write().await?;
        let appended = with_tx!(tx, tx => {
            let Some(row): Option<ConversationRow> = sqlx::query_as(bump_sql)
                .bind(conversation_id)
                .bind(tenant.as_str())
                .bind(counts.messages)
                .bind(counts.user_turns)
                .bind(counts.last_user_offset)
                .bind(now)
                .fetch_optional(&mut **tx)
                .await?
            else {
                return Ok(AppendOutcome::NotFound);
            };
            if let (Some(key), Some(fingerprint)) = (key, &fingerprint) {
                let stored: Option<(String, Json<serde_json::Value>)> = sqlx::query_as(key_sql)
                    .bind(conversation_id)
                    .bind(key.as_str())
                    .bind(tenant.as_str())
                    .fetch_optional(&mut **tx)
                    .await?;
                if let Some((stored_fingerprint, response)) = stored {
                    // Returning drops the transaction, which rolls it back.
                    if &stored_fingerprint != fingerprint {
                        return Ok(AppendOutcome::KeyReused);
                    }
                    let first: Appended = serde_json::from_value(response.0)
                        .map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
                    return Ok(AppendOutcome::Replayed(first));
                }
            }

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
            appended
        });
        tx.commit().await?;
        Ok(AppendOutcome::Appended(appended))
    }

    /// Up to `limit` messages after `after_seq`, oldest first; `None` when there is no
    /// such conversation in the tenant.
    pub async fn list_messages(
        &self,
        tenant: &TenantId,
        conversation_id: Uuid,
        after_seq: i64,
        limit: i64,
    ) -> Result<Option<Vec<Message>>> {
        // Uses the UNIQUE (conversation_id, seq) index.
        let sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 AND seq > $3 ORDER BY seq LIMIT $4"
        );
        let rows: Vec<MessageRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(conversation_id).bind(tenant.as_str()).bind(after_seq).bind(limit).fetch_all(pool).await?
        });
        self.messages_of(tenant, conversation_id, rows).await
    }

    /// The newest `count` messages, oldest first; `None` when there is no such
    /// conversation in the tenant.
    pub async fn last_messages(
        &self,
        tenant: &TenantId,
        conversation_id: Uuid,
        count: i64,
    ) -> Result<Option<Vec<Message>>> {
        let sql = concat!(
            "SELECT ",
            message_columns!(),
            " FROM messages WHERE conversation_id = $1 AND tenant_id = $2 ORDER BY seq DESC LIMIT $3"
        );
        let mut rows: Vec<MessageRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(conversation_id).bind(tenant.as_str()).bind(count).fetch_all(pool).await?
        });
        rows.reverse();
        self.messages_of(tenant, conversation_id, rows).await
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
    pub async fn delete_expired_idempotency_keys(&self) -> Result<u64> {
        // Uses idempotency_keys_created.
        let sql = "DELETE FROM idempotency_keys WHERE created_at < $1";
        let cutoff = super::now() - IDEMPOTENCY_KEY_TTL;
        Ok(with_pool!(self, pool => {
            sqlx::query(sql).bind(cutoff).execute(pool).await?.rows_affected()
        }))
    }
}
