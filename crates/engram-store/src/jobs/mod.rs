//! Jobs: their rows as the API reads them and the wake-up that tells workers a job is
//! queued; the queue's claims, leases and retries ([`queue`]); the extraction job's reads
//! and fenced write ([`extraction`]).

pub mod extraction;
pub mod queue;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Result, Store, Tx, with_pool, with_tx, with_writer};
use crate::domain::{
    ids::{AgentId, ExternalRef, TenantId},
    job::{Job, JobKind, JobStatus},
    usage::OverBudget,
};

/// What became of a retry request.
#[derive(Debug)]
pub enum Retry {
    Requeued(Job),
    /// The job is in this other state.
    NotRetryable(JobStatus),
    NotFound,
}

#[derive(sqlx::FromRow)]
struct JobRow {
    id: Uuid,
    kind: String,
    status: String,
    attempts: i32,
    agent_id: AgentId,
    external_ref: ExternalRef,
    conversation_id: Uuid,
    from_seq: i64,
    through_seq: i64,
    facts_added: Option<i32>,
    input_tokens: i64,
    output_tokens: i64,
    over_budget: Option<String>,
    last_error: Option<String>,
    run_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<JobRow> for Job {
    type Error = sqlx::Error;
    fn try_from(row: JobRow) -> Result<Job> {
        let decode = |e: String| sqlx::Error::Decode(e.into());
        Ok(Job {
            id: row.id,
            kind: JobKind::parse(&row.kind).ok_or_else(|| decode(format!("unknown job kind {:?}", row.kind)))?,
            status: JobStatus::parse(&row.status)
                .ok_or_else(|| decode(format!("unknown job status {:?}", row.status)))?,
            attempts: row.attempts,
            agent_id: row.agent_id,
            external_ref: row.external_ref,
            conversation_id: row.conversation_id,
            from_seq: row.from_seq,
            through_seq: row.through_seq,
            facts_added: row.facts_added,
            input_tokens: row.input_tokens,
            output_tokens: row.output_tokens,
            over_budget: match row.over_budget {
                Some(text) => {
                    Some(OverBudget::parse(&text).ok_or_else(|| decode(format!("unknown over_budget {text:?}")))?)
                }
                None => None,
            },
            last_error: row.last_error,
            run_at: row.run_at,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

macro_rules! job_columns {
    () => {
        "id, kind, status, attempts, agent_id, external_ref, conversation_id, from_seq, through_seq, facts_added, \
         input_tokens, output_tokens, over_budget, last_error, run_at, created_at, updated_at"
    };
}

/// Filters of the jobs list; `None` matches everything.
#[derive(Debug, Default)]
pub struct JobFilter {
    pub status: Option<JobStatus>,
    pub conversation_id: Option<Uuid>,
}

/// What a queued job is about.
pub(super) struct NewJob<'a> {
    pub kind: JobKind,
    pub tenant: &'a TenantId,
    pub agent_id: &'a str,
    pub external_ref: &'a str,
    pub conversation_id: Uuid,
    /// An extraction's segment starts after this `seq` (its earlier messages are read as
    /// context only); 0 for a summary, which folds from the conversation's summary mark.
    pub from_seq: i64,
    pub through_seq: i64,
}

impl Tx {
    /// Queues a job in this transaction (the one that changed the state causing it) and
    /// wakes the workers at commit. `None` when a job of this kind through this seq of
    /// the conversation exists already: the unique `(conversation_id, kind, through_seq)`
    /// makes a trigger that fires twice queue once.
    pub(super) async fn queue_job(&mut self, job: &NewJob<'_>, now: DateTime<Utc>) -> Result<Option<Uuid>> {
        let sql = "INSERT INTO jobs (id, tenant_id, kind, status, attempts, agent_id, external_ref, \
               conversation_id, through_seq, run_at, created_at, updated_at, from_seq) \
             VALUES ($1, $2, $3, $4, 0, $5, $6, $7, $8, $9, $9, $9, $10) \
             ON CONFLICT (conversation_id, kind, through_seq) DO NOTHING RETURNING id";
        let id: Option<Uuid> = with_tx!(self, tx => {
            sqlx::query_scalar(sql)
                .bind(Uuid::now_v7())
                .bind(job.tenant.as_str())
                .bind(job.kind.as_str())
                .bind(JobStatus::Queued.as_str())
                .bind(job.agent_id)
                .bind(job.external_ref)
                .bind(job.conversation_id)
                .bind(job.through_seq)
                .bind(now)
                .bind(job.from_seq)
                .fetch_optional(&mut **tx)
                .await?
        });
        if id.is_some() {
            self.wake_workers().await?;
        }
        Ok(id)
    }
}

impl Store {
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_job", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn get_job(&self, tenant: &TenantId, id: Uuid) -> Result<Option<Job>> {
        let sql = concat!("SELECT ", job_columns!(), " FROM jobs WHERE id = $1 AND tenant_id = $2");
        let row: Option<JobRow> = with_pool!(self, pool => {
            sqlx::query_as(sql).bind(id).bind(tenant.as_str()).fetch_optional(pool).await?
        });
        row.map(Job::try_from).transpose()
    }

    /// Requeues a `dead` or `failed` job with fresh attempts and a fresh time budget (its
    /// `started_at` is set again by the next claim); the job is returned as
    /// requeued, since a worker may claim it the next moment.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "retry_job", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn retry_job(&self, tenant: &TenantId, id: Uuid) -> Result<Retry> {
        let now = super::now();
        let sql = concat!(
            "UPDATE jobs SET status = 'queued', attempts = 0, run_at = $3, last_error = NULL, updated_at = $3, started_at = NULL \
             WHERE id = $1 AND tenant_id = $2 AND status IN ('dead', 'failed') RETURNING ",
            job_columns!()
        );
        let mut tx = self.begin_write().await?;
        let requeued: Option<JobRow> = with_tx!(tx, tx => {
            sqlx::query_as(sql).bind(id).bind(tenant.as_str()).bind(now).fetch_optional(&mut **tx).await?
        });
        if requeued.is_some() {
            tx.wake_workers().await?;
        }
        tx.commit().await?;
        Ok(match requeued {
            Some(row) => Retry::Requeued(row.try_into()?),
            None => self.get_job(tenant, id).await?.map_or(Retry::NotFound, |job| Retry::NotRetryable(job.status)),
        })
    }

    /// One page, newest first (ids are UUIDv7, so id order is creation order), after
    /// the id `after`.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_jobs", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_jobs(
        &self,
        tenant: &TenantId,
        filter: &JobFilter,
        after: Option<Uuid>,
        limit: i64,
    ) -> Result<Vec<Job>> {
        // Uses jobs_tenant_id.
        let sql = concat!(
            "SELECT ",
            job_columns!(),
            " FROM jobs WHERE tenant_id = $1 \
               AND ($2 IS NULL OR status = $2) \
               AND ($3 IS NULL OR conversation_id = $3) \
               AND ($4 IS NULL OR id < $4) \
             ORDER BY id DESC LIMIT $5"
        );
        let rows: Vec<JobRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(tenant.as_str())
                .bind(filter.status.map(JobStatus::as_str))
                .bind(filter.conversation_id)
                .bind(after)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        rows.into_iter().map(Job::try_from).collect()
    }

    /// Deletes succeeded and cancelled jobs last updated before `before`, across all
    /// tenants: their rows name end users, and a finished job has nothing left to say
    /// after a while. Dead and failed jobs stay for an admin to look at or retry.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_finished_jobs", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_finished_jobs(&self, before: DateTime<Utc>) -> Result<u64> {
        // Uses jobs_finished.
        let sql = "DELETE FROM jobs WHERE status IN ('succeeded', 'cancelled') AND updated_at < $1";
        with_writer!(self, conn => Ok(sqlx::query(sql).bind(before).execute(conn).await?.rows_affected()))
    }
}
