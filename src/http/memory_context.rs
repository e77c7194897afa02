//! `/api/agents/{agent_id}/users/{external_ref}/memory-context`: the facts and prompt
//! block an agent puts into its system prompt at the start of a conversation. The hot
//! path: two database round trips (the agent's switch with the user's consent, then the
//! facts), one when memory is off.

use axum::{Json, extract::State};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    AppState,
    extract::{ApiPath, ApiQuery},
    facts::owner,
};
use crate::{
    auth::{Caller, Scope},
    domain::{
        ids::{AgentId, ExternalRef},
        memory_context::{ContextRequest, MemoryContext},
    },
    error::{ApiError, ErrorBody},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(memory_context))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ContextParams {
    /// What the conversation is about: matching facts come first. Blank means none.
    query: Option<String>,
    /// 1–100; default the agent's `max_injected_facts`.
    max_facts: Option<i64>,
    /// At least 1. Tokens ≈ characters / 4; the lowest-scored facts (unscored = 0.5)
    /// are dropped until the prompt fits.
    token_budget: Option<i64>,
}

/// The memory context: without `query` the most recent facts; with it the most
/// relevant first, then the most recent, up to `max_facts`. Empty and `enabled: false`
/// when the agent's memory is off or the user refused consent.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/memory-context", tag = "facts",
    params(("agent_id" = String, Path), ("external_ref" = String, Path), ContextParams),
    responses(
        (status = 200, body = MemoryContext),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)
    ),
    security(("bearer" = [])))]
async fn memory_context(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiQuery(params): ApiQuery<ContextParams>,
) -> Result<Json<MemoryContext>, ApiError> {
    caller.require(Scope::MemoryRead)?;
    let request = ContextRequest::parse(params.query.as_deref(), params.max_facts, params.token_budget)
        .map_err(ApiError::InvalidRequest)?;
    let owner = owner(&caller, &agent, &user);
    let Some(default_max) = state.store.memory_gate(owner).await?.open(state.config.default_ai_consent) else {
        return Ok(Json(MemoryContext::disabled()));
    };
    let max_facts = request.max_facts.unwrap_or(default_max);
    let limit = i64::try_from(max_facts).unwrap_or(i64::MAX);
    let candidates = state.store.context_facts(owner, request.query.as_ref(), limit).await?;
    Ok(Json(MemoryContext::assemble(candidates, max_facts, request.token_budget)))
}
