//! Working memory documents (see [`crate::domain::working_memory`]): read, replace and
//! delete one, each conditional on the version the caller saw.
//!
//! A write is a compare-and-swap on the version it read, inside one write transaction:
//! it reads the stored `etag`, checks the caller's condition against it, then updates
//! only the row still holding that `etag` (or inserts when there was none, meeting a
//! concurrent create at the scope's unique index). On PostgreSQL (READ COMMITTED) a
//! writer that lost the race finds no row to update and reads again, so the condition is
//! always judged on the version it replaces; on SQLite write transactions run one at a
//! time and the first try holds.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Result, Store, Tx, facts::BindOwner, with_pool, with_tx};
use crate::domain::{
    event::{Actor, EventData, EventType, NewEvent},
    ids::{AgentId, ExternalRef, TenantId},
    working_memory::{AgentWorkingMemory, Condition, Scope, WorkingMemory},
};

/// What a read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    Found(WorkingMemory),
    /// The scope exists but holds no document.
    Absent,
    /// A conversation scope whose conversation the tenant does not hold.
    NoConversation,
}

/// What became of a write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    Created(WorkingMemory),
    Replaced(WorkingMemory),
    /// The condition did not hold for the stored version: nothing was written.
    Refused,
    NoConversation,
    /// The document changed under every try (other writers without a condition kept
    /// replacing it): nothing was written; a retry is safe.
    Contended,
}

/// What became of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    Deleted,
    Absent,
    Refused,
    NoConversation,
    Contended,
}

/// Tries of a compare-and-swap before [`Written::Contended`]: each failed try means
/// another writer committed in between, so this many in a row is a hot spot, not a race.
const TRIES: usize = 3;

/// A person's own documents (one per agent), by agent id after `$3` (NULL: from the
/// first), at most `$4`; binds `$1` tenant, `$2` external ref. Uses working_memories_tenant_ref.
pub(super) const PERSON_DOCUMENTS: &str = "SELECT agent_id, content, etag, updated_at FROM working_memories \
    WHERE tenant_id = $1 AND external_ref = $2 AND conversation_id IS NULL AND ($3 IS NULL OR agent_id > $3) \
    ORDER BY agent_id LIMIT $4";

/// A row of [`PERSON_DOCUMENTS`].
pub(super) type PersonDocumentRow = (AgentId, String, String, DateTime<Utc>);

/// A row of [`PERSON_DOCUMENTS`] as the agent's document it holds.
pub(super) fn person_document((agent_id, content, etag, updated_at): PersonDocumentRow) -> AgentWorkingMemory {
    AgentWorkingMemory { agent_id, memory: WorkingMemory { content, etag, updated_at } }
}

/// Binds `$1` tenant, `$2` agent, `$3` external ref.
const USER_CURRENT: &str = "SELECT id, etag FROM working_memories \
    WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND conversation_id IS NULL";
/// Binds `$1` conversation id (its tenant is checked first).
const CONVERSATION_CURRENT: &str = "SELECT id, etag FROM working_memories WHERE conversation_id = $1";

impl Store {
    /// The scope's document, in one statement.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_working_memory", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn working_memory(&self, scope: Scope<'_>) -> Result<Lookup> {
        type Row = (Option<String>, Option<String>, Option<DateTime<Utc>>);
        let found = |row: Row| match row {
            (Some(content), Some(etag), Some(updated_at)) => Lookup::Found(WorkingMemory { content, etag, updated_at }),
            _ => Lookup::Absent,
        };
        match scope {
            Scope::User(owner) => {
                let sql = "SELECT content, etag, updated_at FROM working_memories \
                    WHERE tenant_id = $1 AND agent_id = $2 AND external_ref = $3 AND conversation_id IS NULL";
                let row: Option<Row> =
                    with_pool!(self, pool => sqlx::query_as(sql).bind_owner(owner).fetch_optional(pool).await?);
                Ok(row.map_or(Lookup::Absent, found))
            }
            Scope::Conversation { tenant, id } => {
                // The conversation row tells a missing conversation from a missing document.
                let sql = "SELECT w.content, w.etag, w.updated_at FROM conversations c \
                    LEFT JOIN working_memories w ON w.conversation_id = c.id WHERE c.id = $1 AND c.tenant_id = $2";
                let row: Option<Row> = with_pool!(self, pool => {
                    sqlx::query_as(sql).bind(id).bind(tenant.as_str()).fetch_optional(pool).await?
                });
                Ok(row.map_or(Lookup::NoConversation, found))
            }
        }
    }

    /// The first `limit` of a person's own documents, by agent id (the admin panel's
    /// person page).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "person_working_memories", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn person_working_memories(
        &self,
        tenant: &TenantId,
        user: &ExternalRef,
        limit: i64,
    ) -> Result<Vec<AgentWorkingMemory>> {
        let rows: Vec<PersonDocumentRow> = with_pool!(self, pool => {
            sqlx::query_as(PERSON_DOCUMENTS).bind(tenant.as_str()).bind(user.as_str()).bind(None::<&str>)
                .bind(limit).fetch_all(pool).await?
        });
        super::counted(&rows);
        Ok(rows.into_iter().map(person_document).collect())
    }

    /// Replaces (or creates) the scope's document with `content` if `condition` holds for
    /// the stored version.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "put_working_memory", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn put_working_memory(
        &self,
        scope: Scope<'_>,
        content: &str,
        condition: &Condition,
        actor: Actor,
    ) -> Result<Written> {
        let mut tx = self.begin_change(actor).await?;
        let Some(owner) = lock_scope(&mut tx, scope).await? else { return Ok(Written::NoConversation) };
        let now = super::now();
        let etag = Uuid::now_v7().to_string();
        let stored = WorkingMemory { content: content.to_owned(), etag: etag.clone(), updated_at: now };
        for _ in 0..TRIES {
            let current = current(&mut tx, scope).await?;
            if !condition.allows(current.as_ref().map(|(_, etag)| etag.as_str())) {
                return Ok(Written::Refused);
            }
            let written = match &current {
                Some((id, seen)) => {
                    let sql = "UPDATE working_memories SET content = $1, etag = $2, updated_at = $3 \
                        WHERE id = $4 AND etag = $5";
                    with_tx!(tx, tx => {
                        sqlx::query(sql).bind(content).bind(&etag).bind(now).bind(id).bind(seen)
                            .execute(&mut **tx).await?.rows_affected()
                    })
                }
                None => {
                    let sql = "INSERT INTO working_memories (id, tenant_id, agent_id, external_ref, conversation_id, \
                        content, etag, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8) \
                        ON CONFLICT DO NOTHING";
                    let conversation = match scope {
                        Scope::User(_) => None,
                        Scope::Conversation { id, .. } => Some(id),
                    };
                    let (tenant, agent, user) = &owner;
                    with_tx!(tx, tx => {
                        sqlx::query(sql).bind(Uuid::now_v7()).bind(tenant).bind(agent).bind(user).bind(conversation)
                            .bind(content).bind(&etag).bind(now).execute(&mut **tx).await?.rows_affected()
                    })
                }
            };
            if written == 1 {
                tx.record(&owner.0, document_event(EventType::WorkingMemoryWritten, scope, &owner));
                tx.commit().await?;
                return Ok(if current.is_some() { Written::Replaced(stored) } else { Written::Created(stored) });
            }
        }
        Ok(Written::Contended)
    }

    /// Deletes the scope's document if `condition` holds for it.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_working_memory", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_working_memory(
        &self,
        scope: Scope<'_>,
        condition: &Condition,
        actor: Actor,
    ) -> Result<Deleted> {
        let mut tx = self.begin_change(actor).await?;
        let Some(owner) = lock_scope(&mut tx, scope).await? else { return Ok(Deleted::NoConversation) };
        for _ in 0..TRIES {
            let Some((id, seen)) = current(&mut tx, scope).await? else { return Ok(Deleted::Absent) };
            if !condition.allows(Some(&seen)) {
                return Ok(Deleted::Refused);
            }
            let sql = "DELETE FROM working_memories WHERE id = $1 AND etag = $2";
            let deleted = with_tx!(tx, tx => {
                sqlx::query(sql).bind(id).bind(&seen).execute(&mut **tx).await?.rows_affected()
            });
            if deleted == 1 {
                tx.record(&owner.0, document_event(EventType::WorkingMemoryDeleted, scope, &owner));
                tx.commit().await?;
                return Ok(Deleted::Deleted);
            }
        }
        Ok(Deleted::Contended)
    }
}

/// A working-memory event: whose document, of which scope (never its content).
fn document_event(kind: EventType, scope: Scope<'_>, (_, agent, user): &(String, String, String)) -> NewEvent {
    let (scope, conversation_id) = match scope {
        Scope::User(_) => ("user", None),
        Scope::Conversation { id, .. } => ("conversation", Some(id)),
    };
    let data = EventData { scope: Some(scope), conversation_id, ..EventData::default() };
    NewEvent { kind, agent_id: Some(agent.clone()), external_ref: Some(user.clone()), data }
}

/// The scope's owner as (tenant, agent, external ref), or `None` for a conversation the
/// tenant does not hold. A conversation's row is locked until the transaction ends, so
/// it cannot be deleted (taking its document with it) between this check and the write;
/// an erasure, which locks the person's conversations first too, waits or goes first.
async fn lock_scope(tx: &mut Tx, scope: Scope<'_>) -> Result<Option<(String, String, String)>> {
    match scope {
        Scope::User(owner) => Ok(Some((
            owner.tenant().as_str().to_owned(),
            owner.agent().as_str().to_owned(),
            owner.user().as_str().to_owned(),
        ))),
        Scope::Conversation { tenant, id } => {
            let sql = "UPDATE conversations SET status = status WHERE id = $1 AND tenant_id = $2 \
                RETURNING tenant_id, agent_id, external_ref";
            with_tx!(tx, tx => sqlx::query_as(sql).bind(id).bind(tenant.as_str()).fetch_optional(&mut **tx).await)
        }
    }
}

/// The stored document's row id and version, if any.
async fn current(tx: &mut Tx, scope: Scope<'_>) -> Result<Option<(Uuid, String)>> {
    with_tx!(tx, tx => match scope {
        Scope::User(owner) => sqlx::query_as(USER_CURRENT).bind_owner(owner).fetch_optional(&mut **tx).await,
        Scope::Conversation { id, .. } => sqlx::query_as(CONVERSATION_CURRENT).bind(id).fetch_optional(&mut **tx).await,
    })
}
