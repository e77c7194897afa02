//! Tokens spent: each job's own, written with its result, and the tenant's per agent and
//! UTC day (`token_usage`), which the daily budget is checked against and the usage views
//! sum. The day rows outlive the finished jobs the sweeper deletes.

use chrono::{DateTime, NaiveDate, Utc};

use super::{Result, Store, Tx, jobs::queue::ClaimedJob, with_pool, with_tx};
use crate::domain::{
    ids::{AgentId, TenantId},
    usage::{AgentUsage, OverBudget},
};

/// What one job cost: the tokens its provider reported, and whether the budget was spent
/// when it was due.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JobCost {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub over_budget: Option<OverBudget>,
}

/// Adds a day's figures to the tenant's and agent's row. Binds: tenant, day, agent, input
/// tokens, output tokens, jobs, over-budget jobs. Uses the primary key.
const ADD_USAGE: &str = "INSERT INTO token_usage (tenant_id, day, agent_id, input_tokens, output_tokens, jobs, over_budget_jobs) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) \
     ON CONFLICT (tenant_id, day, agent_id) DO UPDATE SET \
       input_tokens = token_usage.input_tokens + excluded.input_tokens, \
       output_tokens = token_usage.output_tokens + excluded.output_tokens, \
       jobs = token_usage.jobs + excluded.jobs, \
       over_budget_jobs = token_usage.over_budget_jobs + excluded.over_budget_jobs";

#[derive(sqlx::FromRow)]
struct AgentUsageRow {
    agent_id: AgentId,
    input_tokens: i64,
    output_tokens: i64,
    jobs: i64,
    over_budget_jobs: i64,
}

fn tokens(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Tx {
    /// Writes what the finished `job` cost on it, and adds it, as one finished job, to
    /// today's row of its tenant and agent: in the transaction that stores the job's
    /// result, so a job fenced out counts nothing.
    pub(super) async fn record_job_cost(&mut self, job: &ClaimedJob, cost: &JobCost, now: DateTime<Utc>) -> Result<()> {
        // An earlier wait for the budget stays on the job: `over_budget` only changes to
        // a new value.
        let job_sql = "UPDATE jobs SET input_tokens = $2, output_tokens = $3, over_budget = COALESCE($4, over_budget) \
                       WHERE id = $1";
        let (input, output) = (tokens(cost.input_tokens), tokens(cost.output_tokens));
        with_tx!(self, tx => {
            sqlx::query(job_sql)
                .bind(job.id)
                .bind(input)
                .bind(output)
                .bind(cost.over_budget.map(OverBudget::as_str))
                .execute(&mut **tx)
                .await?;
            sqlx::query(ADD_USAGE)
                .bind(job.tenant_id.as_str())
                .bind(now.date_naive())
                .bind(job.agent_id.as_str())
                .bind(input)
                .bind(output)
                .bind(1_i64)
                .bind(i64::from(cost.over_budget.is_some()))
                .execute(&mut **tx)
                .await?;
        });
        Ok(())
    }
}

impl Store {
    /// Gives `job` back to the queue until `run_at` because its tenant's budget is spent:
    /// queued again without counting the attempt, its time budget started afresh, marked
    /// `waited` with `reason` as its `last_error`, and counted on today's row. Fenced by
    /// the lease like every write of a running job; false when the lease was lost.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "defer_job_over_budget", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn defer_job_over_budget(&self, job: &ClaimedJob, run_at: DateTime<Utc>, reason: &str) -> Result<bool> {
        let now = super::now();
        let sql = "UPDATE jobs SET status = 'queued', attempts = attempts - 1, run_at = $3, last_error = $4, \
                   over_budget = 'waited', lease_token = NULL, locked_until = NULL, started_at = NULL, updated_at = $5 \
                   WHERE id = $1 AND lease_token = $2 AND status = 'running'";
        let mut tx = self.begin_write().await?;
        let deferred = with_tx!(tx, tx => {
            let deferred = sqlx::query(sql)
                .bind(job.id)
                .bind(job.lease_token)
                .bind(run_at)
                .bind(reason)
                .bind(now)
                .execute(&mut **tx)
                .await?
                .rows_affected()
                == 1;
            if deferred {
                sqlx::query(ADD_USAGE)
                    .bind(job.tenant_id.as_str())
                    .bind(now.date_naive())
                    .bind(job.agent_id.as_str())
                    .bind(0_i64)
                    .bind(0_i64)
                    .bind(0_i64)
                    .bind(1_i64)
                    .execute(&mut **tx)
                    .await?;
            }
            deferred
        });
        tx.commit().await?;
        Ok(deferred)
    }

    /// The tokens (input and output) the tenant's jobs spent on `day`. Uses the primary key.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "tokens_spent_on", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn tokens_spent_on(&self, tenant: &TenantId, day: NaiveDate) -> Result<i64> {
        let sql = "SELECT CAST(COALESCE(SUM(input_tokens + output_tokens), 0) AS BIGINT) FROM token_usage \
                   WHERE tenant_id = $1 AND day = $2";
        with_pool!(self, pool => sqlx::query_scalar(sql).bind(tenant.as_str()).bind(day).fetch_one(pool).await)
    }

    /// The tenant's tokens and jobs per agent from `since` on, most tokens first, at most
    /// `limit` agents. Uses the primary key (a tenant's days).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "usage_by_agent", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn usage_by_agent(&self, tenant: &TenantId, since: NaiveDate, limit: i64) -> Result<Vec<AgentUsage>> {
        let sql = "SELECT agent_id, CAST(SUM(input_tokens) AS BIGINT) AS input_tokens, \
                     CAST(SUM(output_tokens) AS BIGINT) AS output_tokens, CAST(SUM(jobs) AS BIGINT) AS jobs, \
                     CAST(SUM(over_budget_jobs) AS BIGINT) AS over_budget_jobs \
                   FROM token_usage WHERE tenant_id = $1 AND day >= $2 \
                   GROUP BY agent_id ORDER BY SUM(input_tokens + output_tokens) DESC, agent_id LIMIT $3";
        let rows: Vec<AgentUsageRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(tenant.as_str()).bind(since).bind(limit).fetch_all(pool).await?
        });
        super::counted(&rows);
        Ok(rows
            .into_iter()
            .map(|row| AgentUsage {
                agent_id: row.agent_id,
                input_tokens: row.input_tokens,
                output_tokens: row.output_tokens,
                jobs: row.jobs,
                over_budget_jobs: row.over_budget_jobs,
            })
            .collect())
    }
}
