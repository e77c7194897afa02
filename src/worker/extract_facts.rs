//! One `extract_facts` job: read the conversation (and, for an LLM, the user's known facts
//! it may update or delete), ask the extractor, keep what passes the agent's rules, find
//! which new facts say again what a stored fact says (near-duplicates, with embeddings
//! on), and store it all, with the tokens the job spent, in one transaction fenced by the
//! job's lease. Before an LLM is asked, the tenant's daily token budget is checked
//! ([`budget`]).

use std::{collections::HashMap, time::Duration};

use chrono::{DateTime, Utc};

use super::{
    budget::{self, Budgeted},
    jobs::{Failure, Outcome, cancel},
};
use crate::{
    config::LlmFallback,
    domain::{
        extracted::{self, Candidate, Revision},
        fact::{MAX_SOURCE_MESSAGES, NewFact},
        near_duplicate::{self, Known},
        owner::Owner,
        search_query::{MAX_QUERY_CHARS, SearchQuery},
        usage::OverBudget,
    },
    extract::{Extraction, ExtractionRequest, Extractor, KnownFact, Turn, grounding::Sources},
    service::{AppState, facts_changed, recall, vectors},
    store::{
        facts::FactFilter,
        jobs::{extraction::Found, queue::ClaimedJob},
        usage::JobCost,
    },
};

/// How many of the user's facts an LLM is shown as known, twice: those that match the new
/// lines best, then the newest. Enough to update what the conversation is about, few
/// enough to keep the prompt short for small models.
const KNOWN_FACTS: i64 = 25;

/// Longest the new facts wait for their vectors; past it they are stored without (and
/// embedded later by the backfill) and only exact duplicates are found.
const EMBEDDING_LIMIT: Duration = Duration::from_secs(30);

pub async fn run(state: &AppState, extractor: &Extractor, job: &ClaimedJob) -> Result<Outcome, Failure> {
    let store = &state.store;
    // Worker-only: only an extraction job reads its input, under its lease.
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
    // When each message was written: an extracted fact is observed when it was said.
    let written: HashMap<i64, DateTime<Utc>> = input.messages.iter().map(|m| (m.seq, m.created_at)).collect();
    let turns = input
        .messages
        .into_iter()
        .map(|message| Turn { seq: message.seq, role: message.role, text: message.text() })
        .collect();
    let request = ExtractionRequest { turns, from_seq: job.from_seq, instructions: settings.extraction_instructions };
    let owner = job.owner();
    let budgeted = if extractor.is_llm() { budget::before_call(state, job).await? } else { Budgeted::Call };
    let (extraction, fallback, over_budget) = match budgeted {
        Budgeted::Waited(outcome) => return Ok(outcome),
        Budgeted::Builtin(reason) => {
            (Extractor::Builtin.extract(&request, &[]).await?, Some(reason), Some(OverBudget::Builtin))
        }
        Budgeted::Call => {
            let known = if extractor.is_llm() { known_facts(state, owner, &request).await? } else { vec![] };
            let (extraction, fallback) = extract(state, extractor, job, &request, &known).await?;
            (extraction, fallback, None)
        }
    };
    let usage = extraction.usage.unwrap_or_default();
    let cost = JobCost { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens, over_budget };
    let kept = extracted::select(extraction.facts, settings.min_confidence);
    let mut kept = extracted::best(kept, state.config.max_facts_per_job);
    let mut revisions = extracted::revisions(extraction.changes, settings.min_confidence);
    let sources = Sources::new(&request);
    let replacements = revisions.iter_mut().filter_map(|revision| match revision {
        Revision::Replace { by, .. } => Some(by),
        Revision::Delete { .. } => None,
    });
    for fact in kept.iter_mut().chain(replacements) {
        place(fact, &sources, &written);
    }
    let (candidates, model) = plan(state, owner, kept).await?;
    let found = Found {
        candidates: &candidates,
        revisions: &revisions,
        model: model.as_deref(),
        fallback: fallback.as_deref(),
        cost,
    };
    // Worker-only: only an extraction job writes what it found, fenced by its lease.
    match store.store_extracted_facts(job, &found, state.config.max_facts_per_user).await? {
        Some(stored) => {
            metrics::counter!("engram_facts_refreshed_total").increment(stored.refreshed);
            metrics::counter!("engram_facts_replaced_total").increment(stored.replaced);
            metrics::counter!("engram_facts_deleted_by_extraction_total").increment(stored.deleted);
            if stored != Default::default() {
                facts_changed(state);
            }
            Ok(match fallback {
                None => Outcome::Stored(stored.added),
                Some(reason) => Outcome::FellBack { added: stored.added, reason },
            })
        }
        None => Ok(Outcome::Fenced),
    }
}

/// Says which of the segment's messages `fact` was drawn from, and when it was said: the
/// builtin rules name the user messages they read it in; an LLM's fact is drawn from
/// every new user message that holds one of its content words (the grounding rule that
/// kept it), or, when none does (a replacement put in other words), from all of them. It
/// was said when the newest message holding its words was written; with none, it is
/// stored as observed now. Each message keeps its `seq` only: the words stay in the
/// conversation, so that clearing a message clears them everywhere.
fn place(fact: &mut NewFact, sources: &Sources, written: &HashMap<i64, DateTime<Utc>>) {
    if fact.said_in.is_empty() {
        fact.said_in = sources.all_of(fact.text.text());
    }
    fact.observed_at = fact.said_in.iter().max().and_then(|seq| written.get(seq).copied());
    if fact.said_in.is_empty() {
        fact.said_in = sources.every();
    }
    let cut = fact.said_in.len().saturating_sub(MAX_SOURCE_MESSAGES);
    fact.said_in.drain(..cut);
}

/// The extractor's answer, or, when an LLM extractor gives up on the conversation and
/// `ENGRAM_LLM_FALLBACK` is `builtin`, the builtin rules' facts with the reason it gave up,
/// so that a weak or unreachable model never costs the person their memory.
///
/// The LLM gives up when its answer held facts of which none is usable (nothing survived
/// the parser's salvage, or grounding dropped them all), when asking again cannot help (see
/// [`crate::extract::ExtractError::retry_may_help`]: extraction runs at temperature 0, so the same prompt
/// gets the same unusable answer), when the job would go dead, or when another attempt
/// could not end within the job's time budget ([`within_budget`]). An answer that found
/// nothing to remember is the model's judgement and stands: the operator's extraction
/// instructions, which the rules cannot read, may be why.
async fn extract(
    state: &AppState,
    extractor: &Extractor,
    job: &ClaimedJob,
    request: &ExtractionRequest,
    known: &[KnownFact],
) -> Result<(Extraction, Option<String>), Failure> {
    let answer = extractor.extract(request, known).await;
    if !extractor.is_llm() || state.config.llm_fallback == LlmFallback::None {
        return Ok((answer?, None));
    }
    // The tokens of an answer that was read are counted even when it is not used.
    let (gave_up, spent) = match answer {
        Ok(extraction) if !extraction.nothing_grounded() => return Ok((extraction, None)),
        Ok(extraction) => (
            format!("none of the {} facts it answered is in the user's words", extraction.ungrounded),
            extraction.usage,
        ),
        Err(error)
            if error.retry_may_help() && job.attempts < state.config.job_max_attempts && within_budget(state, job) =>
        {
            return Err(error.into());
        }
        Err(error) => (error.to_string(), None),
    };
    let builtin = Extractor::Builtin.extract(request, &[]).await?;
    Ok((Extraction { usage: spent, ..builtin }, Some(gave_up)))
}

/// Whether another attempt of `job` could still end within `ENGRAM_LLM_JOB_BUDGET_SECS`
/// of its first: the wait before it (at least as long as a timed-out call took) and the
/// call itself, each up to `ENGRAM_LLM_TIMEOUT_SECS`. Past that, the job falls back now
/// rather than keep the person waiting on a model that is not answering.
fn within_budget(state: &AppState, job: &ClaimedJob) -> bool {
    let spent = (chrono::Utc::now() - job.started_at).to_std().unwrap_or_default();
    let config = &state.config;
    retry_fits(spent, Duration::from_secs(config.llm_timeout_secs), Duration::from_secs(config.llm_job_budget_secs))
}

/// Whether a retry (a wait and a call, each up to `timeout`) begun after `spent` ends
/// within `budget`.
fn retry_fits(spent: Duration, timeout: Duration, budget: Duration) -> bool {
    spent + timeout * 2 <= budget
}

/// The user's facts an LLM extractor is shown (see [`KNOWN_FACTS`]): the current facts
/// that best match what the user said in the new lines, then the newest.
async fn known_facts(
    state: &AppState,
    owner: Owner<'_>,
    request: &ExtractionRequest,
) -> Result<Vec<KnownFact>, Failure> {
    let said: Vec<&str> = request.new_user_turns().map(|turn| turn.text.as_str()).collect();
    let said: String = said.join(" ").chars().take(MAX_QUERY_CHARS).collect();
    let query = SearchQuery::parse(&said).ok();
    let facts = recall::by_full_text(state, owner, query.as_ref(), None, KNOWN_FACTS).await?;
    let mut known: Vec<KnownFact> = Vec::with_capacity(facts.len());
    for fact in facts {
        if !known.iter().any(|k| k.id == fact.id) {
            known.push(KnownFact { id: fact.id, text: fact.fact });
        }
    }
    Ok(known)
}

/// The new facts as they will be stored. With embeddings ready, each is embedded (one
/// call) and compared with the user's current facts that have a vector of the same model,
/// to find the one it repeats in other words ([`near_duplicate::plan`]); returns the
/// model too. Without embeddings, or when they fail or take too long, facts repeat
/// nothing and only the exact duplicate rule applies: embedding never fails the job.
async fn plan(
    state: &AppState,
    owner: Owner<'_>,
    facts: Vec<NewFact>,
) -> Result<(Vec<Candidate>, Option<String>), Failure> {
    let texts: Vec<String> = facts.iter().map(|fact| fact.text.text().to_owned()).collect();
    let embedded = if texts.is_empty() { None } else { recall::embed_within(state, &texts, EMBEDDING_LIMIT).await };
    let Some((model, vectors)) = embedded else {
        return Ok((facts.into_iter().map(Candidate::plain).collect(), None));
    };
    let stored = vectors::of_facts(state, owner, &model, FactFilter::CURRENT).await?;
    let known: Vec<Known<'_>> = stored.iter().map(|v| Known { id: v.id, text: &v.fact, vector: &v.values }).collect();
    let planned = near_duplicate::plan(facts.into_iter().zip(vectors.into_iter().map(Some)).collect(), &known);
    Ok((planned, Some(model)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_must_end_within_the_budget() {
        let (timeout, budget) = (Duration::from_secs(30), Duration::from_secs(120));
        assert!(retry_fits(Duration::ZERO, timeout, budget));
        assert!(retry_fits(Duration::from_secs(60), timeout, budget), "60 + 30 waited + 30 called = 120");
        assert!(!retry_fits(Duration::from_secs(61), timeout, budget));
        assert!(!retry_fits(Duration::ZERO, timeout, Duration::from_secs(59)), "no room for one retry");
    }
}
