//! The embedding worker: gives every fact a current vector. New and edited facts get
//! theirs moments after the write (the write wakes it); facts stored while the embedder was
//! failing or not ready, and every fact after a model change, are backfilled the same way.
//!
//! Its progress is the database itself (facts without a current vector), so it is durable
//! and resumes after a restart or a crash where it stopped, with nothing to recover. With
//! several replicas each may embed the same fact; the store writes a vector only for the
//! text it was made from (see [`Store::store_vectors`](crate::store::Store::store_vectors)),
//! so a slow embedding never overwrites a newer edit.

use std::time::{Duration, Instant};

use tokio::sync::watch;
use uuid::Uuid;

use crate::{
    embed::EmbedError,
    service::{AppState, vectors},
};

/// Facts embedded per call: large enough to amortise a round trip or a model call, small
/// enough that a failure retries little and a stop is seen quickly.
const BATCH: i64 = 32;

/// Wait after a failure without a `Retry-After`.
const RETRY_DELAY: Duration = Duration::from_secs(5);

/// Runs until `stop` turns true: at start, when woken, and every `ENGRAM_SWEEP_INTERVAL_SECS`
/// (facts written by another replica have nobody to wake this one).
pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let Some(model) = state.embedder.model_tag() else { return };
    let interval = Duration::from_secs(state.config.sweep_interval_secs);
    loop {
        if *stop.borrow() || stop.has_changed().is_err() {
            return;
        }
        let delay = if state.embedder.is_ready() { backfill(&state, &model, &stop).await.err() } else { None };
        tokio::select! {
            () = state.embedding_wakeup.notified(), if delay.is_none() => {}
            () = tokio::time::sleep(delay.unwrap_or(interval)) => {}
            _ = stop.changed() => {}
        }
    }
}

/// Embeds every fact without a current vector, in id order. On a failure, returns how
/// long to wait before the next round.
async fn backfill(state: &AppState, model: &str, stop: &watch::Receiver<bool>) -> Result<(), Duration> {
    let mut after = Uuid::nil();
    loop {
        if *stop.borrow() {
            return Ok(());
        }
        // Worker-only: the backfill is the worker's; a request embeds only the fact it writes.
        let batch = state.store.facts_without_vectors(model, after, BATCH).await.map_err(|error| {
            tracing::warn!(%error, "embedding backfill cannot read facts; retrying");
            RETRY_DELAY
        })?;
        let Some(last) = batch.last() else { return Ok(()) };
        after = last.id;
        let texts: Vec<String> = batch.iter().map(|p| p.fact.clone()).collect();
        let started = Instant::now();
        let vectors = state.embedder.embed(&texts).await.map_err(|error| {
            // The error names the failure's kind only, never the texts.
            tracing::warn!(%error, facts = texts.len(), "facts not embedded yet; they will be retried");
            match error {
                EmbedError::RateLimited { retry_after: Some(wait) } => wait.max(Duration::from_secs(1)),
                _ => RETRY_DELAY,
            }
        })?;
        let made: Vec<(Uuid, &str, &[f32])> = batch
            .iter()
            .zip(&vectors)
            .map(|(pending, values)| (pending.id, pending.fact.as_str(), &values[..]))
            .collect();
        let stored = vectors::store(state, model, &made).await.map_err(|error| {
            tracing::warn!(error = error.for_log(), "vectors were not stored; retrying");
            RETRY_DELAY
        })?;
        metrics::counter!("engram_facts_embedded_total").increment(stored);
        tracing::debug!(stored, elapsed_ms = started.elapsed().as_millis() as u64, "facts embedded");
        if batch.len() < BATCH as usize {
            return Ok(());
        }
    }
}
