//! The memory context: the facts and prompt block an agent puts into its system prompt.
//! The REST route and the `memory_context` tool come here. The hot path: two database
//! round trips (the agent's switch with the user's consent, then the facts; on SQLite a
//! query's facts take two, see `store::facts`), one when memory is off; with
//! `working_memory=true` the document is read beside the facts.

use super::{AppState, working_memory};
use crate::{
    domain::{
        fact::storable,
        memory_context::{ContextRequest, MemoryContext, default_max_facts},
        owner::{Owner, OwnerSet},
        policy::Policy,
    },
    service::error::ServiceError,
};

/// Reads the owner's policy, then builds the context under it.
pub async fn read(state: &AppState, owner: Owner<'_>, request: ContextRequest) -> Result<MemoryContext, ServiceError> {
    let policy = state.store.policy(owner).await?;
    build(state, owner, &policy, request).await
}

/// The memory context under a `policy` the caller already read for this owner (the tools
/// read it first to refuse a call while memory is off).
pub async fn build(
    state: &AppState,
    owner: Owner<'_>,
    policy: &Policy,
    request: ContextRequest,
) -> Result<MemoryContext, ServiceError> {
    request.as_of.map(|t| storable("as_of", t)).transpose().map_err(ServiceError::Invalid)?;
    let Some(default_max) = default_max_facts(policy, state.config.default_ai_consent) else {
        return Ok(MemoryContext::disabled());
    };
    let max_facts = request.max_facts.unwrap_or(default_max);
    let limit = i64::try_from(max_facts).unwrap_or(i64::MAX);
    // Shared memory: the facts of the agents it reads too, in the same reads.
    let owners = OwnerSet::new(owner, policy.shared_agents(state.config.default_ai_consent));
    let recalled = super::recall::for_context(state, owners, request.query.as_ref(), request.as_of, limit);
    let context = if request.working_memory {
        // Asked for: the document is read beside the facts, not after them.
        let (candidates, document) = tokio::try_join!(recalled, working_memory::read_optional(state, owner))?;
        MemoryContext::assemble(candidates, max_facts, request.token_budget, Some(document))
    } else {
        MemoryContext::assemble(recalled.await?, max_facts, request.token_budget, None)
    };
    // The facts the agent is given are the ones recalled (not the candidates left out).
    state.recall_counts.note(context.facts.iter().map(|fact| fact.id));
    Ok(context)
}
