//! `/api/events`: the tenant's change feed, and `/api/agents/{agent_id}/users/{external_ref}/events`,
//! one person's (the one a user-bound token may read). Followed by long polling (`wait`):
//! a plain JSON GET that any HTTP client, proxy and serverless runtime handles, that
//! resumes from the cursor it returned, and that holds no database connection while it
//! waits. A Server-Sent Events stream would hold a connection per follower and needs a
//! client that reconnects with `Last-Event-ID`; the cursor gives the same resume.

use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::ctx::Ctx;
use super::json::Json;
use super::{
    CommonErrors,
    input::{ApiPath, ApiQuery},
};
use crate::{
    auth::MemoryRead,
    domain::ids::{AgentId, ExternalRef},
    error::{ApiError, ErrorBody},
    service::{
        AppState,
        events::{self, EventPage, FeedQuery},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_events)).routes(routes!(list_person_events))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct PageQuery {
    /// The last event id already read (a previous page's `next_cursor`); 0 or absent
    /// for the oldest event kept.
    #[param(minimum = 0, maximum = 9007199254740991_i64)]
    after: Option<i64>,
    /// Only these event types, comma-separated without spaces
    /// (`fact.added,fact.superseded`); empty or absent: every type.
    #[param(
        pattern = "^(?:(?:fact\\.added|fact\\.updated|fact\\.superseded|fact\\.restored|fact\\.deleted|facts\\.forgotten|conversation\\.created|conversation\\.ended|conversation\\.cleared|conversation\\.deleted|conversation\\.summarized|job\\.succeeded|job\\.dead|consent\\.changed|agent\\.settings_changed|person\\.erased|working_memory\\.written|working_memory\\.deleted)(?:,(?:fact\\.added|fact\\.updated|fact\\.superseded|fact\\.restored|fact\\.deleted|facts\\.forgotten|conversation\\.created|conversation\\.ended|conversation\\.cleared|conversation\\.deleted|conversation\\.summarized|job\\.succeeded|job\\.dead|consent\\.changed|agent\\.settings_changed|person\\.erased|working_memory\\.written|working_memory\\.deleted))*)?$"
    )]
    types: Option<String>,
    #[param(minimum = 1, maximum = 1000, default = 100)]
    limit: Option<i64>,
    /// Seconds to wait for the first event when there is none yet (0–30, default 0):
    /// the answer comes as soon as one is written, or empty when the time is up. At most
    /// `ENGRAM_EVENT_WAITERS_PER_TENANT` reads of a tenant wait at once (429 beyond).
    #[param(minimum = 0, maximum = 30, default = 0)]
    wait: Option<u64>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct PersonFilter {
    /// Only events of this agent.
    #[param(value_type = Option<AgentId>)]
    agent_id: Option<String>,
    /// Only events about this person.
    #[param(value_type = Option<ExternalRef>)]
    external_ref: Option<String>,
}

/// The tenant's change feed, oldest first: every change to memory (facts, conversations,
/// jobs, consent, agent settings, erasures, working memory) is one event, written with
/// the change itself. Page with `after=next_cursor`; `wait` long-polls. 410 when the
/// cursor is older than the retention (events after it were deleted). A user-bound
/// token reads its person's feed instead (`…/users/{external_ref}/events`).
#[utoipa::path(get, path = "/api/events", tag = "events", params(PageQuery, PersonFilter),
    responses((status = 200, body = EventPage), CommonErrors,
        (status = 410, body = ErrorBody, description = "`gone`: events after the cursor were deleted by the retention")))]
async fn list_events(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiQuery(page): ApiQuery<PageQuery>,
    ApiQuery(query): ApiQuery<PersonFilter>,
) -> Result<Json<EventPage>, ApiError> {
    if let Some(agent) = &query.agent_id {
        AgentId::parse(agent.clone()).map_err(ApiError::InvalidRequest)?;
    }
    if let Some(user) = &query.external_ref {
        ExternalRef::parse(user.clone()).map_err(ApiError::InvalidRequest)?;
    }
    let feed = FeedQuery {
        agent_id: query.agent_id.as_deref(),
        external_ref: query.external_ref.as_deref(),
        ..page_query(&page)
    };
    Ok(Json(events::feed(&state, &caller.tenant, feed).await?))
}

/// One person's events as this agent's memory of them changed (the tenant feed filtered
/// to them; what a user-bound token may read).
#[utoipa::path(get, path = "/api/agents/{agent_id}/users/{external_ref}/events", tag = "events",
    params(("agent_id" = AgentId, Path), ("external_ref" = ExternalRef, Path), PageQuery),
    responses((status = 200, body = EventPage), CommonErrors,
        (status = 410, body = ErrorBody, description = "`gone`: events after the cursor were deleted by the retention")))]
async fn list_person_events(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath((agent, user)): ApiPath<(AgentId, ExternalRef)>,
    ApiQuery(query): ApiQuery<PageQuery>,
) -> Result<Json<EventPage>, ApiError> {
    let feed = FeedQuery { agent_id: Some(agent.as_str()), external_ref: Some(user.as_str()), ..page_query(&query) };
    Ok(Json(events::feed(&state, &caller.tenant, feed).await?))
}

fn page_query(query: &PageQuery) -> FeedQuery<'_> {
    FeedQuery {
        after: query.after,
        types: query.types.as_deref(),
        limit: query.limit,
        wait: query.wait,
        ..FeedQuery::default()
    }
}
