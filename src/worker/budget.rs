//! The tenant's daily token budget as a job meets it: before a job calls the LLM it asks
//! whether the tenant has spent its budget today, and if so either waits for the next UTC
//! day or has the builtin run instead (`ENGRAM_OVER_BUDGET`). Either way the job says so
//! (its `over_budget`), and `engram_jobs_over_budget_total` counts it: no job is dropped.

use chrono::Utc;

use super::jobs::{Failure, Outcome};
use crate::{
    domain::{
        job::JobKind,
        usage::{self, OverBudget},
    },
    service::{AppState, usage::over_budget},
    store::jobs::queue::ClaimedJob,
};

/// What a job that would call the LLM does about the budget.
pub(super) enum Budgeted {
    /// Call: the tenant has no budget, or some of it is left.
    Call,
    /// The budget is spent: the builtin runs instead, for this reason (no personal data).
    Builtin(String),
    /// The budget is spent and the job went back to the queue until the next UTC day
    /// (or lost its lease meanwhile): this is how its attempt ends.
    Waited(Outcome),
}

/// Checks the tenant's budget before `job` calls the LLM.
pub(super) async fn before_call(state: &AppState, job: &ClaimedJob) -> Result<Budgeted, Failure> {
    let Some(budget) = over_budget(state, &job.tenant_id).await? else { return Ok(Budgeted::Call) };
    let kind = JobKind::parse(&job.kind).map_or("unknown", JobKind::as_str);
    let reason = format!(
        "the tenant's daily token budget of {} tokens is spent ({} today)",
        budget.daily_tokens.unwrap_or_default(),
        budget.spent_today
    );
    let counted = || {
        metrics::counter!("engram_jobs_over_budget_total", "kind" => kind, "action" => budget.over_budget.as_str())
            .increment(1);
    };
    match budget.over_budget {
        OverBudget::Builtin => {
            counted();
            Ok(Budgeted::Builtin(reason))
        }
        OverBudget::Waited => {
            let run_at = usage::next_day(Utc::now());
            let waits = format!("{reason}; waits for the next UTC day");
            // Worker-only: only the worker runs jobs, so only it defers one to the next day.
            if state.store.defer_job_over_budget(job, run_at, &waits).await? {
                counted();
                Ok(Budgeted::Waited(Outcome::WaitingForBudget))
            } else {
                Ok(Budgeted::Waited(Outcome::Fenced))
            }
        }
    }
}
