//! Conversations: create, append and end, each with the worker wake-up after its commit
//! (an append may queue a rolling summary or an extraction segment, an end an extraction). The end route and the
//! idle sweeper both end conversations here.

use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{
        conversation::{AppendRequest, Appended, Conversation, Ended, IdempotencyKey, NewConversation},
        event::Actor,
        ids::TenantId,
        message::{MessageError, validate_batch},
    },
    error::ApiError,
    store::{
        self,
        conversations::{Created, EndTrigger},
        messages::AppendOutcome,
    },
};

/// Creates a conversation, or with a key the agent already uses returns that one
/// (`false`) when the request agrees with it; a `conflict` when it does not.
pub async fn create(
    state: &AppState,
    tenant: &TenantId,
    new: &NewConversation,
    actor: Actor,
) -> Result<(bool, Conversation), ApiError> {
    new.validate().map_err(ApiError::InvalidRequest)?;
    match state.store.create_conversation(tenant, new, actor).await? {
        Created::New(conversation) => Ok((true, conversation)),
        Created::Existing(conversation) if new.agrees_with(&conversation) => Ok((false, conversation)),
        Created::Existing(_) => {
            Err(ApiError::Conflict("this key already names a conversation of the agent with other fields".into()))
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
) -> Result<Appended, ApiError> {
    if request.expected_last_seq.is_some_and(|seq| seq < 0) {
        return Err(ApiError::invalid("expected_last_seq must be 0 or more"));
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
            Err(ApiError::Conflict("this Idempotency-Key was already used with a different request body".into()))
        }
        AppendOutcome::StaleSeq(last_seq) => Err(ApiError::StaleSeq(last_seq)),
        AppendOutcome::NotFound => Err(ApiError::NotFound("conversation")),
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
) -> store::Result<Option<Ended>> {
    let ended = state.store.end_conversation(tenant, id, trigger, state.config.default_ai_consent, actor).await?;
    if ended.as_ref().is_some_and(|e| e.extraction.queued) {
        state.job_wakeup.notify_one();
    }
    Ok(ended)
}

/// A message refused: 400, or 413 for one too large.
pub fn message_error(error: MessageError) -> ApiError {
    match error {
        MessageError::Invalid(why) => ApiError::InvalidRequest(why),
        MessageError::TooLarge(why) => ApiError::PayloadTooLarge(why),
    }
}
