//! `/api/agents/{agent_id}/users/{external_ref}/memory-context`: the facts and prompt
//! block an agent puts into its system prompt at the start of a conversation (built by
//! [`crate::service::memory_context`]).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::ctx::Ctx;
use super::json::Written;
use super::{
    CommonErrors,
    input::{ApiPath, ApiQuery},
};
use crate::{
    auth::MemoryRead,
    domain::{
        ids::{AgentId, ExternalRef},
        memory_context::{ContextRequest, MemoryContext},
    },
    error::ApiError,
    service::{AppState, memory_context},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(memory_context))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContextParams {
    /// What the conversation is about: matching facts come first. Blank means none; at
    /// most 1000 characters, of which the first 64 words count.
    #[param(max_length = 1000)]
    query: Option<String>,
    /// Default: the agent's `max_injected_facts`.
    #[param(minimum = 1, maximum = 100)]
    max_facts: Option<i64>,
    /// Tokens ≈ characters / 4; the lowest-scored facts (unscored = 0.5) are dropped
    /// until the prompt fits.
    #[param(minimum = 1)]
    token_budget: Option<i64>,
    /// Also the agent's working memory document about the user, in `working_memory`
    /// and as a `<working-memory>` block at the end of `prompt`.
    working_memory: Option<bool>,
    /// The facts that were current at this time (RFC 3339; percent-encode a `+` offset)
    /// instead of now: said by then, not yet replaced, not expired.
    as_of: Option<DateTime<Utc>>,
}

/// The memory context: without `query` the most recent facts; with it the most
/// relevant first, then the most recent, up to `max_facts`; with `as_of`, of the facts
/// current at that time. Expired facts are never in it. Empty and `enabled: false`
/// when the agent's memory is off or the user refused consent.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/memory-context", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), ContextParams),
    responses((status = 200, body = MemoryContext), CommonErrors))]
async fn memory_context(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiQuery(params): ApiQuery<ContextParams>,
) -> Result<Written<MemoryContext>, ApiError> {
    let request = ContextRequest::parse(
        params.query.as_deref(),
        params.max_facts,
        params.token_budget,
        params.working_memory.unwrap_or(false),
    )
    .map_err(ApiError::InvalidRequest)?;
    let request = ContextRequest { as_of: params.as_of, ..request };
    Ok(Written(memory_context::read(&state, caller.owner(&agent, &user), request).await?))
}
