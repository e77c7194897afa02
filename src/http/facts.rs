//! `/api/agents/{agent_id}/users/{external_ref}/facts`: what one agent remembers about
//! one end user — list, remember, search, update, delete.

use axum::{Json, http::StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::ctx::Ctx;
use super::{
    BodyErrors, CommonErrors, NotFound,
    extract::{ApiJson, ApiPath, ApiQuery},
    pagination::{Page, decode_cursor, limit},
};
use crate::{
    auth::{Caller, MemoryRead, MemoryWrite},
    domain::{
        fact::{Fact, FactInput, FactPatch, Origin, Tag, validate_tag},
        ids::{AgentId, ExternalRef},
        search_query::SearchQuery,
    },
    error::{ApiError, ErrorBody},
    service::AppState,
    store::facts::{FactFilter, Owner, Remembered, UpdateError},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_facts, remember_fact, delete_facts))
        .routes(routes!(search_facts))
        .routes(routes!(update_fact, delete_fact))
}

/// The owner of the facts a request is about: the caller's tenant and the path's agent
/// and user.
pub(super) fn owner<'a>(caller: &'a Caller, agent: &'a AgentId, user: &'a ExternalRef) -> Owner<'a> {
    Owner { tenant: &caller.tenant, agent, user }
}

/// Checks the optional `tag` filter with the same rule as a fact's tags.
fn tag_filter(tag: Option<&str>) -> Result<Option<&str>, ApiError> {
    tag.map(|t| validate_tag(t).map(|()| t)).transpose().map_err(ApiError::InvalidRequest)
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
}

/// A search hit: the fact and its relevance.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct ScoredFact {
    #[serde(flatten)]
    fact: Fact,
    /// How well the fact answers the query, in [0, 1]; higher is more relevant. Without
    /// embeddings (or when no fact is close in meaning): the share of the query's words
    /// (after stemming, stop words ignored) the fact contains. With them: 0.6 × the rarity
    /// of the query words the fact contains (the sum over them of 1 / the number of the
    /// user's matching facts holding the word) relative to the best full-text hit's, plus
    /// 0.4 × the cosine similarity of the fact's and the query's vectors above 0.25,
    /// relative to the most similar fact's (similarities under 0.25 count as 0).
    relevance: f64,
}

#[derive(Debug, Serialize, ToSchema)]
pub(super) struct SearchResults {
    /// Most relevant first; equally relevant facts newest first.
    items: Vec<ScoredFact>,
}

#[derive(Debug, Serialize, ToSchema)]
struct Deleted {
    deleted: u64,
}

/// The user's facts known to this agent, newest first.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/facts", tag = "facts", params(
        ("agent_id" = AgentId, Path),
        ("external_ref" = ExternalRef, Path, description = "The end user's id, percent-encoded"), ListQuery ),
    responses((status = 200, body = Page<Fact>), CommonErrors))]
async fn list_facts(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Page<Fact>>, ApiError> {
    let filter = FactFilter { tag: query.tag.as_deref(), superseded: query.include_superseded };
    let page = list(&state, owner(&caller, &agent, &user), filter, query.limit, query.cursor.as_deref());
    Ok(Json(page.await?))
}

/// One page of the owner's facts, newest first: the list route and the `list_memories` tool.
pub(super) async fn list(
    state: &AppState,
    owner: Owner<'_>,
    filter: FactFilter<'_>,
    limit: Option<i64>,
    cursor: Option<&str>,
) -> Result<Page<Fact>, ApiError> {
    let limit = self::limit(limit, 50, 200)?;
    let before: Option<Uuid> = decode_cursor(cursor)?;
    let filter = FactFilter { tag: tag_filter(filter.tag)?, ..filter };
    let rows = state.store.list_facts(owner, filter, before, limit + 1).await?;
    Ok(Page::from_rows(rows, limit, |f| f.id))
}

/// Remember a fact. 201 with the new fact, or 200 with the stored one when the same
/// fact is already there (compared case-, space- and trailing-punctuation-insensitively).
/// 409 when the user already has `ENGRAM_MAX_FACTS_PER_USER` facts for this agent.
#[utoipa::path(post, path = "/api/agents/{agent_id}/users/{external_ref}/facts", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path)), request_body = FactInput,
    responses((status = 201, body = Fact, description = "stored"), (status = 200, body = Fact, description = "the same fact was already stored"), CommonErrors, BodyErrors, (status = 409, body = ErrorBody, description = "the user has the maximum number of facts")))]
async fn remember_fact(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiJson(input): ApiJson<FactInput>,
) -> Result<(StatusCode, Json<Fact>), ApiError> {
    let (created, fact) = remember(&state, owner(&caller, &agent, &user), input, Origin::Manual).await?;
    Ok((if created { StatusCode::CREATED } else { StatusCode::OK }, Json(fact)))
}

/// Stores a fact unless the same one is there (then `false` and the stored one): the
/// remember route (manual facts) and the `remember` tool (agent facts).
pub(super) async fn remember(
    state: &AppState,
    owner: Owner<'_>,
    input: FactInput,
    origin: Origin,
) -> Result<(bool, Fact), ApiError> {
    let fact = input.validate().map_err(ApiError::InvalidRequest)?;
    let cap = state.config.max_facts_per_user;
    match state.store.remember_fact(owner, &fact, origin, cap).await? {
        Remembered::Created(fact) => {
            state.facts_changed();
            Ok((true, fact))
        }
        Remembered::Existing(fact) => Ok((false, fact)),
        Remembered::Full => {
            Err(ApiError::Conflict(format!("this user already has the maximum of {cap} facts for this agent")))
        }
    }
}

/// Search: facts containing any of the query's words (stemmed, stop words ignored), and,
/// when embeddings are on and ready, facts close to the query in meaning; the most
/// relevant first, then the newest.
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/facts/search", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), SearchParams),
    responses((status = 200, body = SearchResults), CommonErrors))]
async fn search_facts(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> Result<Json<SearchResults>, ApiError> {
    let owner = owner(&caller, &agent, &user);
    let filter = FactFilter { tag: params.tag.as_deref(), superseded: params.include_superseded };
    Ok(Json(search(&state, owner, &params.q, params.limit, filter).await?))
}

/// The facts most relevant to `q`: the search route and the `recall` tool.
pub(super) async fn search(
    state: &AppState,
    owner: Owner<'_>,
    q: &str,
    limit: Option<i64>,
    filter: FactFilter<'_>,
) -> Result<SearchResults, ApiError> {
    let query = SearchQuery::parse(q).map_err(ApiError::InvalidRequest)?;
    let limit = self::limit(limit, 10, 200)?;
    let filter = FactFilter { tag: tag_filter(filter.tag)?, ..filter };
    let hits = state.search_facts(owner, &query, filter, limit).await?;
    let items = hits.into_iter().map(|hit| ScoredFact { fact: hit.fact, relevance: hit.relevance }).collect();
    Ok(SearchResults { items })
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
) -> Result<Json<Fact>, ApiError> {
    Ok(Json(update(&state, owner(&caller, &agent, &user), id, patch).await?))
}

/// Changes one fact: the update route and the `update_memory` tool.
pub(super) async fn update(state: &AppState, owner: Owner<'_>, id: Uuid, patch: FactPatch) -> Result<Fact, ApiError> {
    let changes = patch.validate().map_err(ApiError::InvalidRequest)?;
    match state.store.update_fact(owner, id, &changes).await? {
        Ok(fact) => {
            state.facts_changed();
            Ok(fact)
        }
        Err(UpdateError::NotFound) => Err(ApiError::NotFound("fact")),
        Err(UpdateError::Duplicate) => {
            Err(ApiError::Conflict("another stored fact of this user is the same fact".into()))
        }
    }
}

/// Forget one fact.
#[utoipa::path(delete, path = "/api/agents/{agent_id}/users/{external_ref}/facts/{fact_id}", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), ("fact_id" = Uuid, Path)),
    responses((status = 204), CommonErrors, NotFound))]
async fn delete_fact(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user, id)): ApiPath<(AgentId, ExternalRef, Uuid)>,
) -> Result<StatusCode, ApiError> {
    forget(&state, owner(&caller, &agent, &user), id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Deletes one fact: the delete route and the `forget` tool.
pub(super) async fn forget(state: &AppState, owner: Owner<'_>, id: Uuid) -> Result<(), ApiError> {
    if state.store.delete_fact(owner, id).await? { Ok(()) } else { Err(ApiError::NotFound("fact")) }
}

/// Forget every fact this agent holds about the user.
#[utoipa::path(delete, path = "/api/agents/{agent_id}/users/{external_ref}/facts", tag = "facts",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path)),
    responses((status = 200, body = Deleted), CommonErrors))]
async fn delete_facts(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
) -> Result<Json<Deleted>, ApiError> {
    let deleted = state.store.delete_facts(owner(&caller, &agent, &user)).await?;
    Ok(Json(Deleted { deleted }))
}
