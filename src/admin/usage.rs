//! `/admin/usage`: the tokens each agent's jobs spent over the last day, week or month,
//! and the tenant's daily token budget: the figures of `GET /api/usage`.

use askama::Template;
use axum::extract::{Query, State};
use serde::Deserialize;

use super::{AdminError, AdminResult, Layout, encode_segment, render, session::Operator};
use crate::{
    auth::Scope,
    domain::usage::{PERIODS, TokenUsage},
    service::{AppState, usage},
};

#[derive(Template)]
#[template(path = "admin/usage.html")]
struct UsagePage {
    layout: Layout,
    periods: [u32; 3],
    usage: TokenUsage,
    /// Each agent's panel path, in the order of `usage.agents`.
    paths: Vec<String>,
}

#[derive(Deserialize)]
pub struct UsageQuery {
    days: Option<u32>,
}

pub async fn page(State(state): State<AppState>, operator: Operator, Query(q): Query<UsageQuery>) -> AdminResult {
    operator.require(Scope::Admin)?;
    let days = q.days.unwrap_or(PERIODS[1]);
    if !PERIODS.contains(&days) {
        return Err(AdminError::BadRequest(format!("the period is one of {PERIODS:?} days")));
    }
    let usage = usage::report(&state, operator.tenant(), days).await?;
    let paths = usage.agents.iter().map(|agent| encode_segment(agent.agent_id.as_str())).collect();
    render(&UsagePage { layout: operator.layout("Usage", "usage", None), periods: PERIODS, usage, paths })
}
