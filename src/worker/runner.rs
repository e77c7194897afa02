//! The job loop: `ENGRAM_WORKERS` tasks claim due jobs, run each with the code of its
//! kind under a renewed lease, and record the outcome. Woken by LISTEN/NOTIFY (PostgreSQL) or in memory (SQLite),
//! with polling as the fallback. A panicking job is caught and counts as a failure.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use tokio::sync::watch;

use super::{
    extract_facts,
    jobs::{Failure, Outcome},
    summarize,
};
use crate::{domain::job::JobKind, extract::Extractor, service::AppState, store::jobs::queue::ClaimedJob};

/// The longest a retry is pushed back.
const MAX_BACKOFF: Duration = Duration::from_secs(3600);

/// The longest a worker waits between claims while the database is unreachable.
const MAX_OUTAGE_BACKOFF: Duration = Duration::from_secs(30);

pub async fn run_worker(state: AppState, extractor: Arc<Extractor>, mut stop: watch::Receiver<bool>) {
    let poll = Duration::from_millis(state.config.job_poll_ms);
    // Consecutive failed claims: while the database is down the worker waits longer
    // and longer (capped) instead of hammering it every poll.
    let mut failed_claims = 0;
    while !*stop.borrow() {
        let wakeup = state.job_wakeup.clone();
        let notified = wakeup.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let lease_until = Utc::now() + state.config.job_lease();
        // Worker-only: only the worker claims jobs.
        let wait = match state.store.claim_job(lease_until).await {
            Ok(Some(job)) => {
                failed_claims = 0;
                run_claimed(&state, &extractor, job, &mut stop).await;
                continue;
            }
            Ok(None) => {
                failed_claims = 0;
                poll
            }
            Err(e) => {
                failed_claims += 1;
                tracing::warn!(error = %e, failed_claims, "claiming a job failed");
                backoff(u64::try_from(poll.as_millis()).unwrap_or(u64::MAX), failed_claims).min(MAX_OUTAGE_BACKOFF)
            }
        };
        tokio::select! {
            () = &mut notified, if failed_claims == 0 => {},
            () = tokio::time::sleep(wait) => {},
            _ = stop.changed() => {},
        }
    }
}

async fn run_claimed(state: &AppState, extractor: &Arc<Extractor>, job: ClaimedJob, stop: &mut watch::Receiver<bool>) {
    let kind = JobKind::parse(&job.kind).map_or("unknown", JobKind::as_str);
    metrics::counter!("engram_job_attempts_total", "kind" => kind).increment(1);
    if job.attempts > state.config.job_max_attempts {
        // A job whose workers kept dying: give up rather than loop forever.
        record_failure(state, &job, kind, "worker lost the job too many times", None).await;
        return;
    }
    let started = std::time::Instant::now();
    let task = {
        let (state, extractor, job) = (state.clone(), extractor.clone(), job.clone());
        tokio::spawn(async move { run_job(&state, &extractor, &job).await })
    };
    let abort = task.abort_handle();
    let heartbeat = heartbeat(state, &job);
    tokio::pin!(task, heartbeat);
    let result = tokio::select! {
        joined = &mut task => Some(joined),
        () = &mut heartbeat => {
            tracing::warn!(job_id = %job.id, "lease lost: abandoning the job");
            abort.abort();
            None
        }
        _ = stop.changed() => {
            match tokio::time::timeout(Duration::from_secs(state.config.shutdown_grace_secs), &mut task).await {
                Ok(joined) => Some(joined),
                Err(_) => {
                    abort.abort();
                    // Worker-only: only the worker holding a job's lease releases it.
                    if let Err(e) = state.store.release_job(&job).await {
                        tracing::warn!(job_id = %job.id, error = %e, "releasing a job at shutdown failed");
                    }
                    None
                }
            }
        }
    };
    let Some(joined) = result else { return };
    metrics::histogram!("engram_job_duration_seconds", "kind" => kind, "extractor" => extractor.name())
        .record(started.elapsed().as_secs_f64());
    match joined {
        Ok(Ok(Outcome::Stored(added))) => {
            metrics::counter!("engram_jobs_finished_total", "kind" => kind, "outcome" => "succeeded").increment(1);
            metrics::counter!("engram_facts_added_total", "extractor" => extractor.name()).increment(added);
            tracing::info!(job_id = %job.id, kind, facts_added = added, "extraction succeeded");
        }
        Ok(Ok(Outcome::FellBack { added, reason })) => {
            metrics::counter!("engram_jobs_finished_total", "kind" => kind, "outcome" => "fallback").increment(1);
            metrics::counter!("engram_facts_added_total", "extractor" => "builtin").increment(added);
            tracing::warn!(
                job_id = %job.id,
                kind,
                facts_added = added,
                reason,
                "the LLM extractor gave up: the builtin extractor's facts were stored"
            );
        }
        Ok(Ok(Outcome::Summarized(folded))) => {
            metrics::counter!("engram_jobs_finished_total", "kind" => kind, "outcome" => "succeeded").increment(1);
            tracing::info!(job_id = %job.id, kind, messages_folded = folded, "summary succeeded");
        }
        Ok(Ok(Outcome::WaitingForBudget)) => {
            tracing::info!(job_id = %job.id, kind, "the tenant's daily token budget is spent: the job waits for the next UTC day");
        }
        Ok(Ok(Outcome::Cancelled(reason))) => {
            metrics::counter!("engram_jobs_finished_total", "kind" => kind, "outcome" => "cancelled").increment(1);
            tracing::info!(job_id = %job.id, kind, reason, "job cancelled");
        }
        Ok(Ok(Outcome::Fenced)) => {
            tracing::info!(job_id = %job.id, "job was cancelled or re-leased while running: nothing stored");
        }
        Ok(Err(failure)) if failure.database_unavailable => {
            // Not the job's fault: give the attempt back; the job is claimed again when
            // the database answers (or, if this release cannot reach it either, when
            // its lease runs out).
            tracing::warn!(job_id = %job.id, error = failure.message, "database unavailable: job released");
            // Worker-only: only the worker holding a job's lease releases it.
            if let Err(e) = state.store.release_job(&job).await {
                tracing::warn!(job_id = %job.id, error = %e, "releasing the job failed; its lease will expire");
            }
        }
        Ok(Err(failure)) => record_failure(state, &job, kind, &failure.message, failure.retry_after).await,
        Err(join_error) => {
            let message = if join_error.is_panic() { "the job panicked" } else { "the job was aborted" };
            record_failure(state, &job, kind, message, None).await;
        }
    }
}

/// Runs the job its kind names.
async fn run_job(state: &AppState, extractor: &Extractor, job: &ClaimedJob) -> Result<Outcome, Failure> {
    match JobKind::parse(&job.kind) {
        Some(JobKind::ExtractFacts) => extract_facts::run(state, extractor, job).await,
        Some(JobKind::Summarize) => summarize::run(state, extractor, job).await,
        None => Err(Failure {
            message: format!("unknown job kind {:?}", job.kind),
            retry_after: None,
            database_unavailable: false,
        }),
    }
}

/// Renews the lease every third of its length; resolves only when the lease is lost.
async fn heartbeat(state: &AppState, job: &ClaimedJob) {
    let lease = state.config.job_lease();
    loop {
        tokio::time::sleep(lease / 3).await;
        // Worker-only: only the worker holding a lease renews it.
        match state.store.renew_lease(job, Utc::now() + lease).await {
            Ok(true) => {}
            Ok(false) => return,
            // A database hiccup: keep working, the next beat retries before the lease ends.
            Err(e) => tracing::warn!(job_id = %job.id, error = %e, "renewing a lease failed"),
        }
    }
}

async fn record_failure(
    state: &AppState,
    job: &ClaimedJob,
    kind: &'static str,
    message: &str,
    retry_after: Option<Duration>,
) {
    let delay = backoff(state.config.job_retry_base_ms, job.attempts).max(retry_after.unwrap_or_default());
    let retry_at = Utc::now() + delay;
    let dead = job.attempts >= state.config.job_max_attempts;
    let outcome = if dead { "dead" } else { "failed" };
    metrics::counter!("engram_jobs_finished_total", "kind" => kind, "outcome" => outcome).increment(1);
    tracing::warn!(job_id = %job.id, kind, attempts = job.attempts, dead, error = message, "job failed");
    // Worker-only: only the worker holding a job's lease records its failure.
    if let Err(e) = state.store.fail_job(job, message, retry_at, state.config.job_max_attempts).await {
        tracing::warn!(job_id = %job.id, error = %e, "recording a job failure failed; its lease will expire");
    }
}

/// Exponential backoff with full jitter on top: `base · 2^(attempt-1) + rand(0..base)`,
/// capped, so replicas retrying after a shared outage do not stampede together.
pub fn backoff(base_ms: u64, attempt: i32) -> Duration {
    let exponent = u32::try_from(attempt.saturating_sub(1)).unwrap_or(0).min(20);
    let exp = base_ms.saturating_mul(1u64 << exponent);
    let jitter = crate::crypto::random_below(base_ms.max(1));
    Duration::from_millis(exp.saturating_add(jitter)).min(MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_exponentially_with_bounded_jitter() {
        for attempt in 1..=5 {
            let d = backoff(100, attempt).as_millis() as u64;
            let floor = 100 * (1 << (attempt - 1));
            assert!((floor..floor + 100).contains(&d), "attempt {attempt}: {d}");
        }
        assert_eq!(backoff(2000, 60), MAX_BACKOFF);
    }
}
