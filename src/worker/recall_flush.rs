//! Writes the recall counts that reads gathered in memory
//! ([`crate::service::recall_counts`]) every `ENGRAM_RECALL_FLUSH_SECS`, and once more
//! at shutdown, after the last request was answered.

use std::time::Duration;

use tokio::sync::watch;

use crate::service::AppState;

/// Facts updated per transaction: a short hold of SQLite's write lock.
const BATCH: usize = 500;

/// Flushes every `ENGRAM_RECALL_FLUSH_SECS` until `stop` turns true, then a last time.
pub async fn run(state: AppState, mut stop: watch::Receiver<bool>) {
    let mut ticks = super::every(Duration::from_secs(state.config.recall_flush_secs));
    while super::tick(&mut ticks, &mut stop).await {
        flush(&state).await;
    }
    flush(&state).await;
}

/// Writes what was gathered, a batch per transaction. A batch that fails is dropped with
/// a warning: counts are advisory, and retrying them would let them pile up while the
/// database is down.
async fn flush(state: &AppState) {
    let recalls = state.recall_counts.take();
    for batch in recalls.chunks(BATCH) {
        // Worker-only: requests only buffer recall counts; they are written here, in batches.
        match state.store.add_recalls(batch).await {
            Ok(updated) => tracing::debug!(updated, "recall counts written"),
            Err(error) => {
                metrics::counter!("engram_recalls_dropped_total").increment(batch.len() as u64);
                tracing::warn!(error = format!("{error:#}"), facts = batch.len(), "recall counts lost");
            }
        }
    }
}
