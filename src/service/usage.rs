//! What the model cost and the daily token budget: the figures the REST read and the
//! admin panel show, and the check a job makes before it calls the LLM.

use chrono::Utc;

use super::AppState;
use crate::{
    config::OverBudgetAction,
    domain::{
        ids::TenantId,
        usage::{self, Budget, OverBudget, TokenUsage},
    },
    service::error::ServiceError,
};

/// The most agents a usage read lists (those that spent most): one answer stays bounded
/// however many agents a tenant has.
pub const MAX_AGENTS: i64 = 1000;

/// The tenant's tokens per agent over the last `days` UTC days, today included, and its
/// budget today.
pub async fn report(state: &AppState, tenant: &TenantId, days: u32) -> Result<TokenUsage, ServiceError> {
    let since = usage::since(Utc::now(), days);
    let agents = state.store.usage_by_agent(tenant, since, MAX_AGENTS).await?;
    Ok(TokenUsage { days, since, agents, budget: budget(state, tenant).await? })
}

/// The tenant's budget and what it spent since midnight UTC.
pub async fn budget(state: &AppState, tenant: &TenantId) -> Result<Budget, ServiceError> {
    let spent_today = state.store.tokens_spent_on(tenant, Utc::now().date_naive()).await?;
    let over_budget = match state.config.over_budget {
        OverBudgetAction::Wait => OverBudget::Waited,
        OverBudgetAction::Builtin => OverBudget::Builtin,
    };
    Ok(Budget { daily_tokens: state.config.daily_tokens(tenant.as_str()), spent_today, over_budget })
}

/// What a job of `tenant` does instead of calling the LLM, when the tenant's budget is
/// spent (see [`usage::within_budget`]); `None` when it may call. Tenants without a
/// budget cost no read.
pub async fn over_budget(state: &AppState, tenant: &TenantId) -> Result<Option<Budget>, ServiceError> {
    if state.config.daily_tokens(tenant.as_str()).is_none() {
        return Ok(None);
    }
    let budget = budget(state, tenant).await?;
    Ok((!usage::within_budget(budget.spent_today, budget.daily_tokens)).then_some(budget))
}
