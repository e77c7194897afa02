//! SQLite's WAL checkpointer: copies committed pages from the WAL into the main file every
//! [`EVERY`], off the write path. SQLite would otherwise checkpoint inside the commit that
//! fills the WAL (every 1 000 pages by default), holding the write lock while it copies
//! pages and syncs the file: every writer queued behind that commit waits, which showed
//! as the p99 of writes in `engram-bench load`.

use std::time::Duration;

use tokio::sync::watch;

use crate::store::Store;

/// How often the WAL is checkpointed: writers stall behind each checkpoint's sync for a
/// time that grows with the pages it copies, so small and frequent beats large and rare
/// (docs/decisions/sqlite-checkpoints.md).
const EVERY: Duration = Duration::from_millis(50);

/// How long the checkpointer waits after finding nothing committed since its last look:
/// an idle server need not wake 20 times a second, and the first commit after a pause is
/// at most this far from a checkpoint.
const IDLE: Duration = Duration::from_secs(1);

/// Checkpoints until `stop` turns true (SQLite only).
pub async fn run(store: Store, mut stop: watch::Receiver<bool>) {
    let mut ticks = super::every(EVERY);
    let mut last = None;
    while super::tick(&mut ticks, &mut stop).await {
        // Worker-only: checkpointing SQLite's WAL is background housekeeping, never a request's.
        match store.checkpoint_wal().await {
            Ok(Some(wal)) => {
                if wal.unchanged_since(last) {
                    ticks.reset_after(IDLE);
                }
                last = Some(wal);
            }
            Ok(None) => return,
            Err(error) => tracing::warn!(error = %error, "WAL checkpoint failed; retrying"),
        }
    }
}
