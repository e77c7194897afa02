//! The idle sweeper: ends conversations nobody wrote to for `ENGRAM_IDLE_END_SECS`
//! (with the same decision and transaction as `POST …/end`), forgets idempotency keys
//! past their 24 hours, deletes finished jobs past `ENGRAM_JOB_RETENTION_SECS`, events
//! past `ENGRAM_EVENT_RETENTION` and expired facts (with their vectors and history; reads
//! leave them out from the moment they expire, so the sweep only frees the rows), applies
//! the agents' forgetting policies and message retention (see [`apply_agent_policies`]), and on
//! SQLite merges the full-text index a step towards one segment, which searches read
//! faster than the many that writes leave.
//!
//! Safe with several replicas on one database: each conversation is ended in its own
//! transaction that re-checks, under the row lock, that it is still open and idle, so
//! a replica that lost the race (or an append that came in between) skips it.

use std::time::Duration;

use chrono::TimeDelta;
use tokio::sync::watch;

use crate::domain::event::Actor;
use crate::{
    service::{AppState, conversations, error::ServiceError},
    store::{
        conversations::EndTrigger,
        forgetting::{FactPolicy, PolicyAgent},
    },
};

/// Conversations ended per query; the sweep repeats until a batch comes back short.
const BATCH: i64 = 100;

/// Expired facts deleted per transaction: one event each, well under what one
/// transaction may write (`store::events::PER_TRANSACTION`), and a short hold of SQLite's
/// write lock.
const EXPIRED_BATCH: i64 = 500;

/// Sweeps every `ENGRAM_SWEEP_INTERVAL_SECS` until `stop` turns true.
pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let mut ticks = super::every(Duration::from_secs(state.config.sweep_interval_secs));
    while super::tick(&mut ticks, &mut stop).await {
        if let Err(error) = end_idle_conversations(&state, &stop).await {
            // The kind tells a busy database (`unavailable`) from a bug (`internal`).
            tracing::warn!(
                kind = error.kind(),
                error = error.for_log(),
                "idle sweep failed; retrying at the next interval"
            );
        }
        // Worker-only: expired idempotency keys are swept in the background only.
        match state.store.delete_expired_idempotency_keys().await {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "expired idempotency keys deleted"),
            Err(error) => tracing::warn!(error = format!("{error:#}"), "idempotency key cleanup failed"),
        }
        let retention = TimeDelta::seconds(i64::try_from(state.config.job_retention_secs).unwrap_or(i64::MAX));
        // Worker-only: finished jobs past their retention are swept here only.
        match state.store.delete_finished_jobs(crate::store::now() - retention).await {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "finished jobs deleted"),
            Err(error) => tracing::warn!(error = format!("{error:#}"), "finished job cleanup failed"),
        }
        match delete_expired_facts(&state, &stop).await {
            Ok(0) => {}
            // Counts only: the facts are what people said.
            Ok(deleted) => tracing::info!(deleted, "expired facts deleted"),
            Err(error) => tracing::warn!(error = format!("{error:#}"), "expired fact cleanup failed"),
        }
        match apply_agent_policies(&state, &stop).await {
            // Counts only, never what was deleted.
            Ok(swept) if swept.any() => tracing::info!(
                facts = swept.facts,
                messages = swept.messages,
                conversations = swept.conversations,
                "deleted by the agents' forgetting and retention settings"
            ),
            Ok(_) => {}
            Err(error) => tracing::warn!(error = format!("{error:#}"), "forgetting and retention sweep failed"),
        }
        let retention = TimeDelta::from_std(state.config.event_retention).unwrap_or(TimeDelta::MAX);
        // Worker-only: events past their retention are pruned here only.
        match state.store.prune_events(crate::store::now() - retention).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "events past their retention deleted"),
            Err(error) => tracing::warn!(error = format!("{error:#}"), "event cleanup failed"),
        }
        // Worker-only: search-index maintenance runs in the background only.
        if let Err(error) = state.store.merge_search_index().await {
            tracing::warn!(error = format!("{error:#}"), "full-text index merge failed");
        }
    }
}

/// Deletes the facts expired by now, a batch per transaction, until a batch comes back
/// short; returns how many. Each is counted in `engram_facts_expired_total`.
async fn delete_expired_facts(state: &AppState, stop: &watch::Receiver<bool>) -> sqlx::Result<u64> {
    let now = crate::store::now();
    let mut total = 0;
    loop {
        // Worker-only: expired facts are deleted in the background (reads already skip them).
        let deleted = state.store.delete_expired_facts(now, EXPIRED_BATCH).await?;
        metrics::counter!("engram_facts_expired_total").increment(deleted);
        total += deleted;
        if deleted < EXPIRED_BATCH.unsigned_abs() || *stop.borrow() {
            return Ok(total);
        }
    }
}

/// What one sweep deleted by the agents' settings.
#[derive(Debug, Default)]
struct Swept {
    facts: u64,
    messages: u64,
    conversations: u64,
}

impl Swept {
    fn any(&self) -> bool {
        self.facts + self.messages + self.conversations > 0
    }
}

/// Applies every agent's forgetting policies (`forget_extracted_after_days`,
/// `forget_unrecalled_after_days`, `keep_best_facts`) and message retention
/// (`max_messages_per_conversation`, `delete_conversations_after_days`), each in batches
/// of [`EXPIRED_BATCH`] per transaction, until a batch comes back short. Counted in
/// `engram_facts_forgotten_total{reason}`, `engram_messages_trimmed_total` and
/// `engram_conversations_retention_deleted_total`.
async fn apply_agent_policies(state: &AppState, stop: &watch::Receiver<bool>) -> sqlx::Result<Swept> {
    let mut swept = Swept::default();
    let mut after = None;
    loop {
        // Worker-only: only the sweep walks every agent's retention policy.
        let agents = state.store.policy_agents(after.as_ref().map(|(t, a)| (t, a)), BATCH).await?;
        for agent in &agents {
            if *stop.borrow() {
                return Ok(swept);
            }
            swept.facts += forget_facts(state, agent, stop).await?;
            let (messages, conversations) = apply_retention(state, agent, stop).await?;
            swept.messages += messages;
            swept.conversations += conversations;
        }
        match agents.last() {
            Some(last) if i64::try_from(agents.len()).unwrap_or(i64::MAX) == BATCH => {
                after = Some((last.tenant.clone(), last.agent.clone()));
            }
            _ => return Ok(swept),
        }
    }
}

/// The days of a setting before `now`; `None` when the setting is off (0).
fn days_before(now: chrono::DateTime<chrono::Utc>, days: i32) -> Option<chrono::DateTime<chrono::Utc>> {
    (days > 0).then(|| now - TimeDelta::days(i64::from(days)))
}

/// Applies the agent's fact policies that are on; returns how many facts they deleted.
async fn forget_facts(state: &AppState, agent: &PolicyAgent, stop: &watch::Receiver<bool>) -> sqlx::Result<u64> {
    let now = crate::store::now();
    let forgetting = agent.forgetting;
    let policies = [
        days_before(now, forgetting.extracted_after_days).map(FactPolicy::MaxAge),
        days_before(now, forgetting.unrecalled_after_days).map(FactPolicy::Unrecalled),
        (forgetting.keep_best > 0).then_some(FactPolicy::KeepBest(i64::from(forgetting.keep_best))),
    ];
    let mut total = 0;
    for policy in policies.into_iter().flatten() {
        loop {
            // Worker-only: an agent's forgetting policy is applied by this sweep only.
            let deleted = state.store.forget_facts(agent, policy, now, EXPIRED_BATCH).await?;
            metrics::counter!("engram_facts_forgotten_total", "reason" => policy.reason()).increment(deleted);
            total += deleted;
            if deleted < EXPIRED_BATCH.unsigned_abs() || *stop.borrow() {
                break;
            }
        }
    }
    Ok(total)
}

/// Applies the agent's message retention; returns the messages trimmed and the
/// conversations deleted.
async fn apply_retention(
    state: &AppState,
    agent: &PolicyAgent,
    stop: &watch::Receiver<bool>,
) -> sqlx::Result<(u64, u64)> {
    let (mut messages, mut conversations) = (0, 0);
    if agent.retention.max_messages > 0 {
        let max = i64::from(agent.retention.max_messages);
        let mut after = None;
        loop {
            // Worker-only: only the message-cap sweep looks for conversations over the cap.
            let batch = state.store.long_conversations(agent, max, after, BATCH).await?;
            for id in &batch {
                loop {
                    if *stop.borrow() {
                        return Ok((messages, conversations));
                    }
                    // Worker-only: conversations over the message cap are trimmed by this sweep only.
                    let trimmed =
                        state.store.trim_conversation(&agent.tenant, *id, max, agent.summarizes, EXPIRED_BATCH).await?;
                    metrics::counter!("engram_messages_trimmed_total").increment(trimmed);
                    messages += trimmed;
                    if trimmed < EXPIRED_BATCH.unsigned_abs() {
                        break;
                    }
                }
            }
            match batch.last() {
                Some(last) if i64::try_from(batch.len()).unwrap_or(i64::MAX) == BATCH => after = Some(*last),
                _ => break,
            }
        }
    }
    if let Some(before) = days_before(crate::store::now(), agent.retention.conversations_after_days) {
        loop {
            // Worker-only: ended conversations past retention are deleted by this sweep only.
            let deleted = state.store.delete_ended_conversations(agent, before, BATCH).await?;
            metrics::counter!("engram_conversations_retention_deleted_total").increment(deleted);
            conversations += deleted;
            if deleted < BATCH.unsigned_abs() || *stop.borrow() {
                break;
            }
        }
    }
    Ok((messages, conversations))
}

async fn end_idle_conversations(state: &AppState, stop: &watch::Receiver<bool>) -> Result<(), ServiceError> {
    let idle = TimeDelta::seconds(i64::try_from(state.config.idle_end_secs).unwrap_or(i64::MAX));
    let idle_before = crate::store::now() - idle;
    loop {
        // Worker-only: only the idle sweep looks for conversations to end (ending them is the service's).
        let batch = state.store.idle_conversations(idle_before, BATCH).await?;
        for (tenant, id) in &batch {
            if *stop.borrow() {
                return Ok(());
            }
            let trigger = EndTrigger::Idle { idle_before };
            if let Some(ended) = conversations::end(state, tenant, *id, trigger, Actor::Sweeper).await? {
                tracing::info!(
                    conversation_id = %id,
                    queued = ended.extraction.queued,
                    reason = ?ended.extraction.reason,
                    "idle conversation ended"
                );
            }
        }
        if i64::try_from(batch.len()).unwrap_or(i64::MAX) < BATCH {
            return Ok(());
        }
    }
}
