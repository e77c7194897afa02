//! Working memory (see [`crate::domain::working_memory`]): the REST routes, the memory
//! tools and the admin panel read, replace and delete documents here, so each door
//! answers a missing document, a stale version and an oversized one alike.
//!
//! Unlike extraction and memory context, these calls do not depend on the agent's
//! `memory_enabled` or the user's consent: the document is what the agent itself wrote,
//! stored like its messages. What memory context shows of it does depend on them.

use super::AppState;
use crate::{
    domain::{
        event::Actor,
        ids::{ExternalRef, TenantId},
        owner::Owner,
        working_memory::{self, AgentWorkingMemory, Condition, ContentError, Scope, WorkingMemory},
    },
    service::error::ServiceError,
    store::working_memory::{Deleted, Lookup, Written},
};

const NO_DOCUMENT: ServiceError = ServiceError::NotFound("working memory");
const NO_CONVERSATION: ServiceError = ServiceError::NotFound("conversation");
const CONTENDED: ServiceError = ServiceError::Unavailable("the working memory is being rewritten by other writers");

/// The scope's document (404 when there is none, or no such conversation).
pub async fn read(state: &AppState, scope: Scope<'_>) -> Result<WorkingMemory, ServiceError> {
    match state.store.working_memory(scope).await? {
        Lookup::Found(document) => Ok(document),
        Lookup::Absent => Err(NO_DOCUMENT),
        Lookup::NoConversation => Err(NO_CONVERSATION),
    }
}

/// The agent's document about the user, or `None` when it has none (memory context).
pub async fn read_optional(state: &AppState, owner: Owner<'_>) -> Result<Option<WorkingMemory>, ServiceError> {
    match state.store.working_memory(Scope::User(owner)).await? {
        Lookup::Found(document) => Ok(Some(document)),
        Lookup::Absent | Lookup::NoConversation => Ok(None),
    }
}

/// Replaces the scope's document with `content` if `condition` holds; `true` with the
/// document when it was created.
pub async fn write(
    state: &AppState,
    scope: Scope<'_>,
    content: &str,
    condition: &Condition,
    actor: Actor,
) -> Result<(bool, WorkingMemory), ServiceError> {
    working_memory::validate(content).map_err(|error| match error {
        ContentError::Nul => ServiceError::invalid(error.to_string()),
        ContentError::TooLarge(_) => ServiceError::TooLarge(error.to_string()),
    })?;
    match state.store.put_working_memory(scope, content, condition, actor).await? {
        Written::Created(document) => Ok((true, document)),
        Written::Replaced(document) => Ok((false, document)),
        Written::Refused => Err(refused(condition)),
        Written::NoConversation => Err(NO_CONVERSATION),
        Written::Contended => Err(CONTENDED),
    }
}

/// Deletes the scope's document if `condition` holds.
pub async fn delete(
    state: &AppState,
    scope: Scope<'_>,
    condition: &Condition,
    actor: Actor,
) -> Result<(), ServiceError> {
    match state.store.delete_working_memory(scope, condition, actor).await? {
        Deleted::Deleted => Ok(()),
        Deleted::Absent => Err(NO_DOCUMENT),
        Deleted::Refused => Err(refused(condition)),
        Deleted::NoConversation => Err(NO_CONVERSATION),
        Deleted::Contended => Err(CONTENDED),
    }
}

/// The 412 of a condition that did not hold, saying which.
fn refused(condition: &Condition) -> ServiceError {
    ServiceError::PreconditionFailed(condition.refusal().into())
}

/// The first `limit` of a person's own documents across agents, by agent id.
pub async fn of_person(
    state: &AppState,
    tenant: &TenantId,
    user: &ExternalRef,
    limit: i64,
) -> Result<Vec<AgentWorkingMemory>, ServiceError> {
    Ok(state.store.person_working_memories(tenant, user, limit).await?)
}
