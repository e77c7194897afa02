//! One `summarize` job: fold the messages after the conversation's summary, up to the
//! job's mark, into a new summary, chunk by chunk, and store it in one transaction fenced
//! by the job's lease. The LLM provider writes it only for a user who consents; anyone
//! else gets the builtin extractive summary, and their messages reach no LLM; so does a
//! tenant whose daily token budget is spent, unless the job waits for the next day.

use super::{
    budget::{self, Budgeted},
    jobs::{Failure, Outcome, cancel},
};
use crate::{
    domain::usage::OverBudget,
    extract::{Extractor, SummaryRequest, Turn, Usage},
    service::AppState,
    store::{jobs::queue::ClaimedJob, usage::JobCost},
};

/// Messages folded per summarising step: one LLM request's transcript stays bounded
/// (each message is also clipped), and so does the memory a step holds.
const CHUNK: i64 = 50;

pub async fn run(state: &AppState, extractor: &Extractor, job: &ClaimedJob) -> Result<Outcome, Failure> {
    let store = &state.store;
    // Worker-only: only a summary job reads its input, under its lease.
    let Some(input) = store.summary_input(job).await? else {
        return cancel(state, job, "conversation deleted").await;
    };
    // Checked again here: the conversation may have opted out since the job was queued
    // (which also cancels the job, but a worker may have claimed it just before).
    if !input.conversation_memory {
        return cancel(state, job, "conversation opted out").await;
    }
    let mut summarizer =
        if input.policy.consent(state.config.default_ai_consent) { extractor } else { &Extractor::Builtin };
    let mut over_budget = None;
    if summarizer.is_llm() {
        match budget::before_call(state, job).await? {
            Budgeted::Call => {}
            Budgeted::Builtin(_) => (summarizer, over_budget) = (&Extractor::Builtin, Some(OverBudget::Builtin)),
            Budgeted::Waited(outcome) => return Ok(outcome),
        }
    }
    let mut spent = Usage::default();
    let from_seq = input.summary_through_seq;
    let (mut summary, mut through_seq, mut folded) = (input.summary, from_seq, 0u64);
    loop {
        // Worker-only: only a summary job pages through the messages it folds.
        let messages = store.summary_messages(job, through_seq, CHUNK).await?;
        let Some(last) = messages.last() else { break };
        through_seq = last.seq;
        folded += messages.len() as u64;
        let turns = messages
            .into_iter()
            .map(|message| Turn { seq: message.seq, role: message.role, text: message.text() })
            .collect();
        let (folded_into, usage) = summarizer.summarize(&SummaryRequest { previous: summary, turns }).await?;
        summary = Some(folded_into);
        spent += usage.unwrap_or_default();
    }
    // With nothing folded (a newer summary got there first), `through_seq` is still
    // `from_seq` and nothing changes; an empty summary (only system or tool messages so
    // far) is stored as none.
    let summary = summary.filter(|text| !text.is_empty());
    let cost = JobCost { input_tokens: spent.input_tokens, output_tokens: spent.output_tokens, over_budget };
    // Worker-only: only a summary job writes its summary, fenced by its lease.
    match store.store_summary(job, from_seq, summary.as_deref(), through_seq, &cost).await? {
        Some(true) => Ok(Outcome::Summarized(folded)),
        // Another summary of this conversation committed first: this one is obsolete.
        Some(false) => Ok(Outcome::Summarized(0)),
        None => Ok(Outcome::Fenced),
    }
}
