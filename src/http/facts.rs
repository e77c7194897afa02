//! `/api/agents/{agent_id}/users/{external_ref}/facts`: what one agent remembers about
//! one end user — list, remember, search, update, delete.

use axum::http::StatusCode;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::ctx::Ctx;
use super::json::{Json, Written};
use super::{
    BodyErrors, CommonErrors, NotFound,
    input::{ApiJson, ApiPath, ApiQuery},
};
use crate::domain::page::Page;
use crate::{
    auth::{MemoryRead, MemoryWrite},
    domain::{
        event::{Actor, FactVersion},
        fact::{Fact, FactInput, FactPatch, Origin, Tag},
        ids::{AgentId, ExternalRef},
    },
    error::{ApiError, ErrorBody},
    service::{
        AppState, FactFilter, events,
        facts::{self, SearchResults},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_facts, remember_fact, delete_facts))
        .routes(routes!(search_facts))
        .routes(routes!(update_fact, delete_fact))
        .routes(routes!(fact_history))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    /// Only facts carrying this tag.
    #[param(value_type = Option<Tag>)]
    tag: Option<String>,
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<i64>,
    /// A previous page's `next_cursor` (opaque: any other value is a 400).
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    cursor: Option<String>,
    /// Also facts a newer fact of the same single-valued slot replaced (default false).
    #[serde(default)]
    include_superseded: bool,
    /// The facts that were current at this time (RFC 3339, e.g. `2026-03-01T12:00:00Z`;
    /// percent-encode a `+` offset) instead of now: said by then (`observed_at`), not yet
    /// replaced (`valid_until` after it), not expired. Not with `include_superseded`.
    as_of: Option<DateTime<Utc>>,
    /// Only facts drawn from this conversation: one of their `source_messages` is in it
    /// (facts drawn from several conversations too; those drawn only from it have no
    /// other). Found whether the conversation still exists or not.
    source_conversation: Option<Uuid>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct SearchParams {
    /// The words to look for (not blank: at least one character that is not white
    /// space; at most 1000 characters, of which the first 64 words count); any of them
    /// may match.
    #[param(
        pattern = "[^\\t-\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]",
        max_length = 1000
    )]
    q: String,
    #[param(minimum = 1, maximum = 200, default = 10)]
    limit: Option<i64>,
    /// Only facts carrying this tag.
    #[param(value_type = Option<Tag>)]
    tag: Option<String>,
    /// Also facts a newer fact of the same single-valued slot replaced (default false).
    #[serde(default)]
    include_superseded: bool,
    /// The facts that were current at this time (RFC 3339, e.g. `2026-03-01T12:00:00Z`;
    /// percent-encode a `+` offset) instead of now: said by then (`observed_at`), not yet
    /// replaced (`valid_until` after it), not expired. Not with `include_superseded`.
    as_of: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Deleted {
    deleted: u64,
}

/// The user's facts known to this agent, newest first: the current ones, or with `as_of`
/// those current at that time. Expired facts are never listed.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/facts", tag = "facts", params(
        ("agent_id" = AgentId, Path),
        ("external_ref" = ExternalRef, Path, description = "The end user's id, percent-encoded"), ListQuery ),
    responses((status = 200, body = Page<Fact>), CommonErrors))]
async fn list_facts(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Written<Page<Fact>>, ApiError> {
    let filter = FactFilter { tag: query.tag.as_deref(), superseded: query.include_superseded, as_of: query.as_of };
    let owner = caller.owner(&agent, &user);
    let page = facts::list(&state, owner, filter, query.source_conversation, query.limit, query.cursor.as_deref());
    Ok(Written(page.await?))
}

/// Remember a fact. 201 with the new fact, or 200 with the stored one when the same
/// fact is already there (compared case-, space- and trailing-punctuation-insensitively).
/// 409 when the user already has `ENGRAM_MAX_FACTS_PER_USER` facts for this agent.
/// `observed_at` says when the person said it; `expires_at` or `ttl_seconds` when it
/// expires (it then leaves every read at once, and the sweeper deletes it).
#[utoipa::path(post, path = "/api/agents/{agent_id}/users/{external_ref}/facts", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path)), request_body = FactInput,
    responses((status = 201, body = Fact, description = "stored"), (status = 200, body = Fact, description = "the same fact was already stored"), CommonErrors, BodyErrors, (status = 409, body = ErrorBody, description = "the user has the maximum number of facts")))]
async fn remember_fact(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiJson(input): ApiJson<FactInput>,
) -> Result<(StatusCode, Written<Fact>), ApiError> {
    let (created, fact) =
        facts::remember(&state, caller.owner(&agent, &user), input, Origin::Manual, Actor::Api).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Written(fact)))
}

/// Search: facts containing any of the query's words (stemmed, stop words ignored), and,
/// when embeddings are on and ready, facts close to the query in meaning; the most
/// relevant first, then the newest. While the agent's memory is on and the user consents,
/// also the user's facts of the agents it reads (`reads_facts_of`), each with its own
/// `agent_id`.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/facts/search", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), SearchParams),
    responses((status = 200, body = SearchResults), CommonErrors))]
async fn search_facts(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> Result<Written<SearchResults>, ApiError> {
    let owner = caller.owner(&agent, &user);
    let filter = FactFilter { tag: params.tag.as_deref(), superseded: params.include_superseded, as_of: params.as_of };
    Ok(Written(facts::search_as_agent(&state, owner, &params.q, params.limit, filter).await?))
}

/// Change a fact's text, tags or score (`null` clears the score). 409 when the new
/// text is the same fact as another stored one.
#[utoipa::path(patch, path = "/api/agents/{agent_id}/users/{external_ref}/facts/{fact_id}", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), ("fact_id" = Uuid, Path)),
    request_body = FactPatch,
    responses((status = 200, body = Fact), CommonErrors, BodyErrors, NotFound, (status = 409, body = ErrorBody, description = "duplicate of another fact")))]
async fn update_fact(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user, id)): ApiPath<(AgentId, ExternalRef, Uuid)>,
    ApiJson(patch): ApiJson<FactPatch>,
) -> Result<Written<Fact>, ApiError> {
    Ok(Written(facts::update(&state, caller.owner(&agent, &user), id, patch, Actor::Api).await?))
}

/// Forget one fact.
#[utoipa::path(delete, path = "/api/agents/{agent_id}/users/{external_ref}/facts/{fact_id}", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), ("fact_id" = Uuid, Path)),
    responses((status = 204), CommonErrors, NotFound))]
async fn delete_fact(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user, id)): ApiPath<(AgentId, ExternalRef, Uuid)>,
) -> Result<StatusCode, ApiError> {
    facts::forget(&state, caller.owner(&agent, &user), id, Actor::Api).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every version of a fact, oldest first: its text, score, tags and `superseded_by` after
/// each change, who made the change (`api`, `agent`, `admin`, or an `extraction` job with
/// its id) and when. The history goes with the fact when it is deleted.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/facts/{fact_id}/history", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), ("fact_id" = Uuid, Path)),
    responses((status = 200, body = History), CommonErrors, NotFound))]
async fn fact_history(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user, id)): ApiPath<(AgentId, ExternalRef, Uuid)>,
) -> Result<Json<History>, ApiError> {
    let items = events::fact_history(&state, caller.owner(&agent, &user), id).await?;
    Ok(Json(History { items }))
}

#[derive(Debug, Serialize, ToSchema)]
struct History {
    /// Oldest first.
    items: Vec<FactVersion>,
}

/// Forget every fact this agent holds about the user.
#[utoipa::path(delete, path = "/api/agents/{agent_id}/users/{external_ref}/facts", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path)),
    responses((status = 200, body = Deleted), CommonErrors))]
async fn delete_facts(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
) -> Result<Json<Deleted>, ApiError> {
    let deleted = facts::forget_all(&state, caller.owner(&agent, &user), Actor::Api).await?;
    Ok(Json(Deleted { deleted }))
}
