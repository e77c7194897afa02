//! What a job of any kind ends an attempt with, and what the job loop
//! ([`super::runner`]) does with it: stored, summarised, waiting for the token budget,
//! cancelled, fenced, or failed (retried, or given back while the database is away). The
//! kinds' own code (`extract_facts`, `summarize`) returns these.

use std::time::Duration;

use crate::{
    extract::ExtractError,
    service::{AppState, error::ServiceError},
    store::jobs::queue::ClaimedJob,
};

/// How a job of any kind ended one attempt.
#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Facts stored (this many new ones).
    Stored(u64),
    /// The LLM extractor gave up for `reason` (never personal data) and the builtin
    /// rules' facts were stored instead (this many new ones).
    FellBack { added: u64, reason: String },
    /// A summary stored, folding this many messages (0: a newer summary got there first).
    Summarized(u64),
    /// The tenant's daily token budget is spent: the job is queued again for the next
    /// UTC day, its attempt not counted.
    WaitingForBudget,
    /// Nothing to do, and the job is now `cancelled` for this reason.
    Cancelled(&'static str),
    /// The job lost its lease or was cancelled while it ran: nothing was stored.
    Fenced,
}

/// A failed attempt: retried with backoff. `message` never holds personal data.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub retry_after: Option<Duration>,
    /// The database was unreachable or busy: not the job's fault, so the attempt is
    /// given back rather than counted.
    pub database_unavailable: bool,
}

impl From<ExtractError> for Failure {
    fn from(error: ExtractError) -> Failure {
        let retry_after = match &error {
            ExtractError::RateLimited { retry_after } => *retry_after,
            // A local server keeps generating the answer Engram gave up on; asked again at
            // once, it would queue the same long generation behind that one and time out
            // again. Waiting as long as the call did gives it that time to finish (the
            // completion limit bounds it) and a slow server as long again to recover.
            ExtractError::TimedOut { after } => Some(*after),
            _ => None,
        };
        Failure { message: error.to_string(), retry_after, database_unavailable: false }
    }
}

impl From<sqlx::Error> for Failure {
    fn from(error: sqlx::Error) -> Failure {
        // sqlx errors name tables and constraints, never bound values.
        let database_unavailable = crate::service::error::is_unavailable(&error);
        Failure { message: format!("database error: {error}"), retry_after: None, database_unavailable }
    }
}

impl From<ServiceError> for Failure {
    fn from(error: ServiceError) -> Failure {
        let database_unavailable = matches!(error, ServiceError::Unavailable(_));
        Failure { message: error.for_log(), retry_after: None, database_unavailable }
    }
}

/// Ends the job as `cancelled` for `reason`, unless it lost its lease meanwhile.
pub(super) async fn cancel(state: &AppState, job: &ClaimedJob, reason: &'static str) -> Result<Outcome, Failure> {
    // Worker-only: only the worker holding a job's lease ends it.
    if state.store.cancel_job(job, reason).await? { Ok(Outcome::Cancelled(reason)) } else { Ok(Outcome::Fenced) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timed_out_call_is_not_asked_again_before_as_long_has_passed() {
        let after = Duration::from_secs(30);
        assert_eq!(Failure::from(ExtractError::TimedOut { after }).retry_after, Some(after));
        assert_eq!(Failure::from(ExtractError::Transient("HTTP 503".into())).retry_after, None);
    }

    /// A service call that met a busy database gives the attempt back; a bug is a failure
    /// whose message keeps its cause for the job's `last_error`.
    #[test]
    fn a_busy_database_behind_a_service_call_is_told_from_a_bug() {
        let busy = Failure::from(ServiceError::from(sqlx::Error::PoolTimedOut));
        assert!(busy.database_unavailable, "{}", busy.message);
        let bug = Failure::from(ServiceError::from(sqlx::Error::RowNotFound));
        assert!(!bug.database_unavailable);
        assert!(bug.message.contains("database query failed"), "{}", bug.message);
    }
}
