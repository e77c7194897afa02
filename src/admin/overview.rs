//! `/admin`: what an operator checks first — readiness, database, extractor and
//! embedder in use, and the tenant's jobs by status.

use askama::Template;
use axum::extract::{Query, State};
use clap::ValueEnum;

use super::{AdminResult, Done, Layout, render, session::Operator};
use crate::{
    auth::Scope,
    service::{AppState, health, jobs},
};

#[derive(Template)]
#[template(path = "admin/overview.html")]
struct Overview {
    layout: Layout,
    ready: bool,
    database: &'static str,
    extractor: String,
    model: Option<String>,
    embedder: &'static str,
    workers: usize,
    /// `None` without the `admin` scope (the jobs API needs it).
    job_counts: Option<Vec<(&'static str, i64)>>,
}

pub async fn page(State(state): State<AppState>, operator: Operator, Query(q): Query<Done>) -> AdminResult {
    let ready = health::ready(&state).await.is_ok();
    let config = &state.config;
    let extractor = config.extractor.to_possible_value().map_or_else(String::new, |v| v.get_name().to_owned());
    let model = (config.extractor != crate::config::ExtractorKind::Builtin).then(|| config.llm_model.clone()).flatten();
    let job_counts =
        if operator.can(Scope::Admin) { Some(jobs::counts(&state, operator.tenant()).await?) } else { None };
    render(&Overview {
        layout: operator.layout("Overview", "overview", q.done.as_deref()),
        ready,
        database: health::database(&state),
        extractor,
        model,
        embedder: "none",
        workers: config.workers,
        job_counts,
    })
}
