//! The idle sweeper: ends conversations nobody wrote to for `ENGRAM_IDLE_END_SECS`
//! (with the same decision and transaction as `POST …/end`), forgets idempotency keys
//! past their 24 hours, deletes finished jobs past `ENGRAM_JOB_RETENTION_SECS`, events
//! past `ENGRAM_EVENT_RETENTION` and expired facts (with their vectors and history; reads
//! leave them out from the moment they expire, so the sweep only frees the rows), and on
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
    service::{AppState, conversations},
    store::conversations::EndTrigger,
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
            tracing::warn!(error = format!("{error:#}"), "idle sweep failed; retrying at the next interval");
        }
        match state.store.delete_expired_idempotency_keys().await {
            Ok(0) => {}
            Ok(deleted) => tracing::debug!(deleted, "expired idempotency keys deleted"),
            Err(error) => tracing::warn!(error = format!("{error:#}"), "idempotency key cleanup failed"),
        }
        let retention = TimeDelta::seconds(i64::try_from(state.config.job_retention_secs).unwrap_or(i64::MAX));
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
        let retention = TimeDelta::from_std(state.config.event_retention).unwrap_or(TimeDelta::MAX);
        match state.store.prune_events(crate::store::now() - retention).await {
            Ok(0) => {}
            Ok(deleted) => tracing::info!(deleted, "events past their retention deleted"),
            Err(error) => tracing::warn!(error = format!("{error:#}"), "event cleanup failed"),
        }
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
        let deleted = state.store.delete_expired_facts(now, EXPIRED_BATCH).await?;
        metrics::counter!("engram_facts_expired_total").increment(deleted);
        total += deleted;
        if deleted < EXPIRED_BATCH.unsigned_abs() || *stop.borrow() {
            return Ok(total);
        }
    }
}

async fn end_idle_conversations(state: &AppState, stop: &watch::Receiver<bool>) -> sqlx::Result<()> {
    let idle = TimeDelta::seconds(i64::try_from(state.config.idle_end_secs).unwrap_or(i64::MAX));
    let idle_before = crate::store::now() - idle;
    loop {
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
