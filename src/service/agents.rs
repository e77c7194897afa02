//! Per-agent settings: the REST routes and the admin panel's agent pages change them
//! here, so a setting is checked by one rule whichever door sets it.

use super::AppState;
use crate::{
    domain::{
        agent_config::{AgentConfig, ConfigPatch},
        event::Actor,
        ids::{AgentId, ExternalRef, TenantId},
    },
    service::error::ServiceError,
};

/// Applies a partial update (absent fields keep their value, or their default for an
/// agent never configured) and returns the stored settings. The agents `reads_facts_of`
/// names must be configured in the caller's tenant: an id of another tenant's agent (or a
/// typo) is refused rather than kept to match an agent created later.
pub async fn configure(
    state: &AppState,
    tenant: &TenantId,
    agent: &AgentId,
    patch: &ConfigPatch,
    actor: Actor,
) -> Result<AgentConfig, ServiceError> {
    patch.validate_for(agent).map_err(ServiceError::Invalid)?;
    if let Some(shared) = patch.reads_facts_of.as_deref().filter(|shared| !shared.is_empty()) {
        let configured = state.store.configured_agents(tenant, shared).await?;
        let unknown: Vec<&str> = shared.iter().filter(|a| !configured.contains(a)).map(AgentId::as_str).collect();
        if !unknown.is_empty() {
            return Err(ServiceError::Invalid(format!(
                "reads_facts_of names agents not configured in this tenant: {}",
                unknown.join(", ")
            )));
        }
    }
    Ok(state.store.upsert_agent_config(tenant, agent, patch, actor).await?)
}

/// Resets an agent's settings to the defaults; `false` when it had none stored.
pub async fn reset(state: &AppState, tenant: &TenantId, agent: &AgentId, actor: Actor) -> Result<bool, ServiceError> {
    Ok(state.store.delete_agent_config(tenant, agent, actor).await?)
}

/// An agent's stored settings; `None` for an agent never configured (the defaults apply).
pub async fn get(state: &AppState, tenant: &TenantId, agent: &AgentId) -> Result<Option<AgentConfig>, ServiceError> {
    Ok(state.store.get_agent_config(tenant, agent).await?)
}

/// One page of the tenant's configured agents, by agent id, after `after`.
pub async fn list(
    state: &AppState,
    tenant: &TenantId,
    after: Option<&str>,
    limit: i64,
) -> Result<Vec<AgentConfig>, ServiceError> {
    Ok(state.store.list_agent_configs(tenant, after, limit).await?)
}

/// The agents holding facts or conversations of the person.
pub async fn of_user(state: &AppState, tenant: &TenantId, user: &ExternalRef) -> Result<Vec<AgentId>, ServiceError> {
    Ok(state.store.agents_of_user(tenant, user).await?)
}
