//! `/api/agents-config`: per-agent memory settings (admin; read also with memory:read).

use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::ctx::Ctx;
use super::json::Json;
use super::{
    BodyErrors, CommonErrors, NotFound,
    input::{ApiJson, ApiPath, ApiQuery},
};
use crate::domain::page::{Page, decode_cursor, limit};
use crate::{
    auth::{Admin, MemoryRead},
    domain::{
        agent_config::{AgentConfig, ConfigPatch},
        event::Actor,
        ids::AgentId,
    },
    error::ApiError,
    service::{AppState, agents},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(put_config, get_config, delete_config)).routes(routes!(list_configs))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListQuery {
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<i64>,
    /// A previous page's `next_cursor` (opaque: any other value is a 400).
    #[param(min_length = 1, pattern = "^[A-Za-z0-9_-]+$")]
    cursor: Option<String>,
}

/// Create or update an agent's configuration. Any subset of the fields may be sent;
/// the others keep their value (or their default on creation). Returns the whole config.
#[utoipa::path(put, path = "/api/agents-config/{agent_id}", tag = "agents-config", params(("agent_id" = AgentId, Path)),
    request_body = ConfigPatch, responses((status = 200, body = AgentConfig), CommonErrors, BodyErrors))]
async fn put_config(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(agent): ApiPath<AgentId>,
    ApiJson(patch): ApiJson<ConfigPatch>,
) -> Result<Json<AgentConfig>, ApiError> {
    Ok(Json(agents::configure(&state, &caller.tenant, &agent, &patch, Actor::Api).await?))
}

/// An agent's configuration; 404 when it was never configured (memory is then off).
#[utoipa::path(get, path = "/api/agents-config/{agent_id}", tag = "agents-config", params(("agent_id" = AgentId, Path)),
    responses((status = 200, body = AgentConfig), CommonErrors, NotFound))]
async fn get_config(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath(agent): ApiPath<AgentId>,
) -> Result<Json<AgentConfig>, ApiError> {
    let config = agents::get(&state, &caller.tenant, &agent).await?;
    config.map(Json).ok_or(ApiError::NotFound("agent config"))
}

/// Delete an agent's configuration: memory is off again; stored data is kept.
#[utoipa::path(delete, path = "/api/agents-config/{agent_id}", tag = "agents-config",
    params(("agent_id" = AgentId, Path)), responses((status = 204), CommonErrors, NotFound))]
async fn delete_config(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(agent): ApiPath<AgentId>,
) -> Result<StatusCode, ApiError> {
    if agents::reset(&state, &caller.tenant, &agent, Actor::Api).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::NotFound("agent config"))
    }
}

/// All configured agents of the tenant, by `agent_id`.
#[utoipa::path(get, path = "/api/agents-config", tag = "agents-config", params(ListQuery),
    responses((status = 200, body = Page<AgentConfig>), CommonErrors))]
async fn list_configs(
    Ctx { state, caller }: Ctx<Admin>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<Page<AgentConfig>>, ApiError> {
    let limit = limit(query.limit, 50, 200)?;
    let after: Option<String> = decode_cursor(query.cursor.as_deref())?;
    let rows = agents::list(&state, &caller.tenant, after.as_deref(), limit + 1).await?;
    Ok(Json(Page::from_rows(rows, limit, |c| c.agent_id.to_string())))
}
