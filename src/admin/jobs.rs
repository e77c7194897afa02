//! `/admin/jobs`: the tenant's jobs by status, the list filtered by status with each
//! failure's error, and retry of a dead or failed job.

use askama::Template;
use axum::extract::{Query, State};
use serde::Deserialize;
use uuid::Uuid;

use super::{
    AdminError, AdminPath, AdminResult, Layout, encode_segment, render, see_other,
    session::{Guarded, NoFields, Operator},
    when,
};
use crate::{
    auth::{Admin, Scope},
    domain::job::{Job, JobStatus},
    service::{AppState, JobFilter, jobs},
};

const PAGE: i64 = 50;

struct JobRow {
    job: Job,
    retryable: bool,
    conversation_path: String,
    updated: String,
    run_at: String,
}

/// A status to filter by, with its count.
struct Filter {
    status: &'static str,
    count: i64,
    current: bool,
}

#[derive(Template)]
#[template(path = "admin/jobs.html")]
struct JobsPage {
    layout: Layout,
    filters: Vec<Filter>,
    status: Option<&'static str>,
    rows: Vec<JobRow>,
    next: Option<String>,
}

#[derive(Deserialize)]
pub struct ListQuery {
    done: Option<String>,
    status: Option<String>,
    after: Option<Uuid>,
}

pub async fn list(State(state): State<AppState>, operator: Operator, Query(q): Query<ListQuery>) -> AdminResult {
    operator.require(Scope::Admin)?;
    let status = match q.status.as_deref().filter(|s| !s.is_empty()) {
        Some(text) => {
            Some(JobStatus::parse(text).ok_or_else(|| AdminError::BadRequest(format!("unknown status {text:?}")))?)
        }
        None => None,
    };
    let filter = JobFilter { status, conversation_id: None };
    let mut jobs = jobs::list(&state, operator.tenant(), &filter, q.after, PAGE + 1).await?;
    let mut next = None;
    if jobs.len() > PAGE as usize {
        jobs.truncate(PAGE as usize);
        let status = status.map_or(String::new(), |s| format!("status={}&", s.as_str()));
        next = jobs.last().map(|job| format!("/admin/jobs?{status}after={}", job.id));
    }
    let rows = jobs
        .into_iter()
        .map(|job| JobRow {
            retryable: matches!(job.status, JobStatus::Dead | JobStatus::Failed),
            conversation_path: format!(
                "/admin/people/{}/conversations/{}",
                encode_segment(job.external_ref.as_str()),
                job.conversation_id
            ),
            updated: when(&job.updated_at),
            run_at: when(&job.run_at),
            job,
        })
        .collect();
    render(&JobsPage {
        layout: operator.layout("Jobs", "jobs", q.done.as_deref()),
        filters: jobs::counts(&state, operator.tenant())
            .await?
            .into_iter()
            .map(|(s, count)| Filter { status: s, count, current: status.is_some_and(|f| f.as_str() == s) })
            .collect(),
        status: status.map(JobStatus::as_str),
        rows,
        next,
    })
}

/// Runs a dead or failed job again, as `POST /api/jobs/{id}/retry` does.
pub async fn retry(
    State(state): State<AppState>,
    AdminPath(id): AdminPath<Uuid>,
    Guarded { operator, .. }: Guarded<NoFields, Admin>,
) -> AdminResult {
    jobs::retry(&state, operator.tenant(), id).await?;
    see_other("/admin/jobs?done=retried")
}
