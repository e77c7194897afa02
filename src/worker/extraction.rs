//! One `extract_facts` job: read the conversation, ask the extractor, keep what passes
//! the agent's rules, and store it in one transaction fenced by the job's lease.

use std::time::Duration;

use crate::{
    domain::extracted,
    extract::{ExtractError, ExtractionRequest, Extractor, Turn},
    service::AppState,
    store::job_queue::ClaimedJob,
};

#[derive(Debug, PartialEq)]
pub enum Outcome {
    /// Facts stored (this many new ones).
    Stored(u64),
    /// A summary stored, folding this many messages (0: a newer summary got there first).
    Summarized(u64),
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
            _ => None,
        };
        Failure { message: error.to_string(), retry_after, database_unavailable: false }
    }
}

impl From<sqlx::Error> for Failure {
    fn from(error: sqlx::Error) -> Failure {
        // sqlx errors name tables and constraints, never bound values.
        let database_unavailable = crate::error::is_unavailable(&error);
        Failure { message: format!("database error: {error}"), retry_after: None, database_unavailable }
    }
}

pub async fn run(state: &AppState, extractor: &Extractor, job: &ClaimedJob) -> Result<Outcome, Failure> {
    let store = &state.store;
    let Some(input) = store.extraction_input(job).await? else {
        return cancel(state, job, "conversation deleted").await;
    };
    // Consent and memory (the agent's and the conversation's) are checked again here: either may have changed since the job
    // was queued, and a refusal means nothing is sent to an extractor.
    if !input.policy.consent(state.config.default_ai_consent) {
        return cancel(state, job, "consent refused").await;
    }
    let settings = input.policy.settings();
    if !settings.memory_enabled {
        return cancel(state, job, "memory disabled").await;
    }
    if !input.conversation_memory {
        return cancel(state, job, "conversation opted out").await;
    }
    let turns = input
        .messages
        .into_iter()
        .map(|message| Turn { seq: message.seq, role: message.role, text: message.text() })
        .collect();
    let request = ExtractionRequest {
        turns,
        from_seq: input.extracted_through_seq,
        instructions: settings.extraction_instructions,
    };
    let extraction = extractor.extract(&request).await?;
    let kept = extracted::select(extraction.facts, settings.min_confidence);
    let kept = extracted::best(kept, state.config.max_facts_per_job);
    match store.store_extracted_facts(job, &kept, state.config.max_facts_per_user).await? {
        Some(added) => {
            if added > 0 {
                state.facts_changed();
            }
            Ok(Outcome::Stored(added))
        }
        None => Ok(Outcome::Fenced),
    }
}

/// Ends the job as `cancelled` for `reason`, unless it lost its lease meanwhile.
pub(super) async fn cancel(state: &AppState, job: &ClaimedJob, reason: &'static str) -> Result<Outcome, Failure> {
    if state.store.cancel_job(job, reason).await? { Ok(Outcome::Cancelled(reason)) } else { Ok(Outcome::Fenced) }
}
