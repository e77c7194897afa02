//! Conversations: create, append and end, each with the worker wake-up after its commit
//! (an append may queue a rolling summary or an extraction segment, an end an extraction). The end route and the
//! idle sweeper both end conversations here.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{
        conversation::{
            AppendRequest, Appended, Conversation, ConversationPatch, Ended, IdempotencyKey, NewConversation,
        },
        event::Actor,
        ids::TenantId,
        message::{Message, MessageError, RoleSet, validate_batch},
    },
    service::error::ServiceError,
    store::{
        conversations::{ConversationFilter, Created, EndTrigger},
        messages::{AppendOutcome, Window},
    },
};

const NOT_FOUND: ServiceError = ServiceError::NotFound("conversation");

/// Creates a conversation, or with a key the agent already uses returns that one
/// (`false`) when the request agrees with it; a `conflict` when it does not.
pub async fn create(
    state: &AppState,
    tenant: &TenantId,
    new: &NewConversation,
    actor: Actor,
) -> Result<(bool, Conversation), ServiceError> {
    new.validate().map_err(ServiceError::Invalid)?;
    match state.store.create_conversation(tenant, new, actor).await? {
        Created::New(conversation) => Ok((true, conversation)),
        Created::Existing(conversation) if new.agrees_with(&conversation) => Ok((false, conversation)),
        Created::Existing(_) => {
            Err(ServiceError::Conflict("this key already names a conversation of the agent with other fields".into()))
        }
    }
}

/// Appends a batch, all or none, and wakes a worker when it queued a rolling summary or
/// an extraction segment.
/// A replay of the same idempotent request returns the first answer and stores nothing.
pub async fn append(
    state: &AppState,
    tenant: &TenantId,
    id: Uuid,
    request: &AppendRequest,
    key: Option<&IdempotencyKey>,
) -> Result<Appended, ServiceError> {
    if request.expected_last_seq.is_some_and(|seq| seq < 0) {
        return Err(ServiceError::invalid("expected_last_seq must be 0 or more"));
    }
    validate_batch(&request.messages).map_err(message_error)?;
    match state.store.append_messages(tenant, id, request, key, state.config.default_ai_consent).await? {
        AppendOutcome::Appended { appended, job_queued } => {
            if job_queued {
                state.job_wakeup.notify_one();
            }
            Ok(appended)
        }
        AppendOutcome::Replayed(appended) => Ok(appended),
        AppendOutcome::KeyReused => {
            Err(ServiceError::Conflict("this Idempotency-Key was already used with a different request body".into()))
        }
        AppendOutcome::StaleSeq(last_seq) => Err(ServiceError::StaleSeq(last_seq)),
        AppendOutcome::NotFound => Err(ServiceError::NotFound("conversation")),
    }
}

/// Ends a conversation (see [`crate::store::Store::end_conversation`]) and, when that
/// queued an extraction, wakes a worker; `None` when the tenant has no such conversation.
pub async fn end(
    state: &AppState,
    tenant: &TenantId,
    id: Uuid,
    trigger: EndTrigger,
    actor: Actor,
) -> Result<Option<Ended>, ServiceError> {
    let ended = state.store.end_conversation(tenant, id, trigger, state.config.default_ai_consent, actor).await?;
    if ended.as_ref().is_some_and(|e| e.extraction.queued) {
        state.job_wakeup.notify_one();
    }
    Ok(ended)
}

/// A message refused: 400, or 413 for one too large.
pub fn message_error(error: MessageError) -> ServiceError {
    match error {
        MessageError::Invalid(why) => ServiceError::Invalid(why),
        MessageError::TooLarge(why) => ServiceError::TooLarge(why),
    }
}

/// One page of the tenant's conversations that `filter` takes, most recently updated
/// first, after the `(updated_at, id)` key `after`.
pub async fn list(
    state: &AppState,
    tenant: &TenantId,
    filter: &ConversationFilter<'_>,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<Conversation>, ServiceError> {
    Ok(state.store.list_conversations(tenant, filter, after, limit).await?)
}

/// One of the tenant's conversations; `not_found` for another tenant's.
pub async fn get(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<Conversation, ServiceError> {
    state.store.get_conversation(tenant, id).await?.ok_or(NOT_FOUND)
}

/// Changes a conversation's title, metadata or opt-out (see [`ConversationPatch`]).
pub async fn update(
    state: &AppState,
    tenant: &TenantId,
    id: Uuid,
    patch: ConversationPatch,
) -> Result<Conversation, ServiceError> {
    patch.validate().map_err(ServiceError::Invalid)?;
    state.store.update_conversation(tenant, id, patch).await?.ok_or(NOT_FOUND)
}

/// Deletes a conversation and its messages; its facts stay.
pub async fn delete(state: &AppState, tenant: &TenantId, id: Uuid, actor: Actor) -> Result<(), ServiceError> {
    if state.store.delete_conversation(tenant, id, actor).await? { Ok(()) } else { Err(NOT_FOUND) }
}

/// Deletes every message of a conversation, keeping the conversation; how many went.
pub async fn clear_messages(state: &AppState, tenant: &TenantId, id: Uuid, actor: Actor) -> Result<u64, ServiceError> {
    state.store.clear_messages(tenant, id, actor).await?.ok_or(NOT_FOUND)
}

/// The conversation's messages of `roles` after seq `after_seq`, the `window` first or
/// last of them, oldest first.
pub async fn messages(
    state: &AppState,
    tenant: &TenantId,
    id: Uuid,
    after_seq: i64,
    roles: RoleSet,
    window: Window,
) -> Result<Vec<Message>, ServiceError> {
    state.store.list_messages(tenant, id, after_seq, roles, window).await?.ok_or(NOT_FOUND)
}

/// The conversation's rolling summary (none yet: `None`) and the seq it covers (0).
pub async fn summary(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<(Option<String>, i64), ServiceError> {
    state.store.conversation_summary(tenant, id).await?.ok_or(NOT_FOUND)
}
