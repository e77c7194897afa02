//! The job queue's mechanics: claiming a due job under a lease, renewing the lease,
//! rescheduling failures, manual retry, and releasing on shutdown. Every write after the
//! claim is fenced by the lease token, so a worker that lost its lease (expired, or the
//! job cancelled by a consent refusal or an erasure) changes nothing.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::event::{Actor, EventData, EventType};
use crate::domain::ids::{AgentId, ExternalRef, TenantId};
use crate::domain::job::JobKind;
use crate::domain::owner::Owner;
use crate::{Result, Store, with_pool, with_tx, with_writer};

/// A job this worker holds, with what running it needs to know.
#[derive(Debug, Clone, sqlx::FromRow)]
pub struct ClaimedJob {
    pub id: Uuid,
    /// The job's kind as stored (see [`JobKind::parse`](crate::domain::job::JobKind::parse)).
    pub kind: String,
    pub tenant_id: TenantId,
    pub agent_id: AgentId,
    pub external_ref: ExternalRef,
    pub conversation_id: Uuid,
    /// An extraction's segment is `(from_seq, through_seq]` (see `NewJob`).
    pub from_seq: i64,
    pub through_seq: i64,
    pub attempts: i32,
    pub lease_token: Uuid,
    /// When the job's first attempt began (kept across retries and restarts).
    pub started_at: DateTime<Utc>,
}

impl ClaimedJob {
    /// Whose facts the job writes.
    pub fn owner(&self) -> Owner<'_> {
        Owner::new(&self.tenant_id, &self.agent_id, &self.external_ref)
    }
}

/// Claims the oldest due job: queued or failed with `run_at` passed, or running with
/// an expired lease (its worker died). `$1` lease token, `$2` lease end, `$3` now. The
/// first claim sets `started_at`.
/// `{lock}`: PostgreSQL skips rows other workers hold, so replicas never take the same
/// job; SQLite's write transaction already serialises claims.
///
/// A conversation's extraction segments run one at a time, in order: a segment waits
/// while an earlier one is pending (queued, failed, running), so its extractor is shown
/// the facts the earlier one stored (an LLM can update them), and the conversation's
/// `extracted_through_seq` only ever moves over segments that are done. A dead or
/// cancelled segment holds nothing up. Uses the unique `(conversation_id, kind,
/// through_seq)`.
const CLAIM: &str = "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_token = $1, locked_until = $2, \
       updated_at = $3, started_at = COALESCE(started_at, $3) \
     WHERE id = (SELECT id FROM jobs j \
                 WHERE ((j.status IN ('queued', 'failed') AND j.run_at <= $3) \
                        OR (j.status = 'running' AND j.locked_until < $3)) \
                   AND NOT (j.kind = 'extract_facts' AND EXISTS (SELECT 1 FROM jobs e \
                        WHERE e.conversation_id = j.conversation_id AND e.kind = 'extract_facts' \
                          AND e.through_seq < j.through_seq AND e.status IN ('queued', 'failed', 'running'))) \
                 ORDER BY j.run_at LIMIT 1 {lock}) \
     RETURNING id, kind, tenant_id, agent_id, external_ref, conversation_id, from_seq, through_seq, attempts, \
       lease_token, started_at";
static CLAIM_PG: LazyLock<String> = LazyLock::new(|| CLAIM.replace("{lock}", "FOR UPDATE SKIP LOCKED"));
static CLAIM_SQLITE: LazyLock<String> = LazyLock::new(|| CLAIM.replace("{lock}", ""));

impl Store {
    /// Claims the oldest due job, in a write transaction.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "claim_job", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn claim_job(&self, lease_until: DateTime<Utc>) -> Result<Option<ClaimedJob>> {
        let token = Uuid::now_v7();
        let now = crate::now();
        let sql = self.dialect(CLAIM_PG.as_str(), CLAIM_SQLITE.as_str());
        let mut tx = self.begin_write().await?;
        let job: Option<ClaimedJob> = with_tx!(tx, tx => {
            sqlx::query_as(sql).bind(token).bind(lease_until).bind(now).fetch_optional(&mut **tx).await?
        });
        tx.commit().await?;
        Ok(job)
    }

    /// Extends the lease; false when it was lost (the job must stop).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "renew_lease", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn renew_lease(&self, job: &ClaimedJob, lease_until: DateTime<Utc>) -> Result<bool> {
        let sql = "UPDATE jobs SET locked_until = $3 WHERE id = $1 AND lease_token = $2 AND status = 'running'";
        let done = with_writer!(self, conn => {
            sqlx::query(sql).bind(job.id).bind(job.lease_token).bind(lease_until).execute(conn).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Records a failed attempt: retried at `retry_at`, or `dead` once `max_attempts`
    /// are used. `error` must not hold personal data.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "fail_job", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn fail_job(
        &self,
        job: &ClaimedJob,
        error: &str,
        retry_at: DateTime<Utc>,
        max_attempts: i32,
    ) -> Result<bool> {
        let sql = "UPDATE jobs SET status = CASE WHEN attempts >= $5 THEN 'dead' ELSE 'failed' END, \
                   last_error = $3, run_at = $4, lease_token = NULL, locked_until = NULL, updated_at = $6 \
                   WHERE id = $1 AND lease_token = $2 AND status = 'running' RETURNING status";
        let actor = match JobKind::parse(&job.kind) {
            Some(JobKind::Summarize) => Actor::Summary(job.id),
            _ => Actor::Extraction(job.id),
        };
        let mut tx = self.begin_change(actor).await?;
        let status: Option<String> = with_tx!(tx, tx => {
            sqlx::query_scalar(sql)
                .bind(job.id)
                .bind(job.lease_token)
                .bind(error)
                .bind(retry_at)
                .bind(max_attempts)
                .bind(crate::now())
                .fetch_optional(&mut **tx)
                .await?
        });
        if status.as_deref() == Some("dead") {
            let data = EventData {
                job_id: Some(job.id),
                job_kind: Some(job.kind.clone()),
                conversation_id: Some(job.conversation_id),
                ..EventData::default()
            };
            tx.record_fact(job.owner(), EventType::JobDead, data);
        }
        tx.commit().await?;
        Ok(status.is_some())
    }

    /// Ends a job without running it (its conversation is gone, or the user refused
    /// consent or opted the conversation out since it was queued).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "cancel_job", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn cancel_job(&self, job: &ClaimedJob, reason: &str) -> Result<bool> {
        let sql = "UPDATE jobs SET status = 'cancelled', last_error = $3, lease_token = NULL, locked_until = NULL, \
                   updated_at = $4 WHERE id = $1 AND lease_token = $2 AND status = 'running'";
        let done = with_writer!(self, conn => {
            sqlx::query(sql).bind(job.id).bind(job.lease_token).bind(reason).bind(crate::now()).execute(conn).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Gives a job back at shutdown without counting the interrupted attempt.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "release_job", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn release_job(&self, job: &ClaimedJob) -> Result<bool> {
        let sql = "UPDATE jobs SET status = 'queued', attempts = attempts - 1, lease_token = NULL, locked_until = NULL, \
                   updated_at = $3 WHERE id = $1 AND lease_token = $2 AND status = 'running'";
        let done = with_writer!(self, conn => {
            sqlx::query(sql).bind(job.id).bind(job.lease_token).bind(crate::now()).execute(conn).await?.rows_affected()
        });
        Ok(done == 1)
    }

    /// Jobs by status, for the `engram_jobs` gauge.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "count_jobs_by_status", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn count_jobs_by_status(&self) -> Result<Vec<(String, i64)>> {
        let sql = "SELECT status, count(*) FROM jobs GROUP BY status";
        with_pool!(self, pool => sqlx::query_as(sql).fetch_all(pool).await)
    }
}
