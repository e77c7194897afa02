//! SQLite's WAL checkpointer: copies committed pages from the WAL into the main file every
//! [`EVERY`], off the write path. SQLite would otherwise checkpoint inside the commit that
//! fills the WAL (every 1 000 pages by default), holding the write lock while it copies
//! pages and syncs the file: every writer queued behind that commit waits, which showed
//! as the p99 of writes in `engram-bench load`.

use std::time::Duration;

use tokio::sync::watch;

use crate::store::Store;

/// How often the WAL is checkpointed: at a few thousand commits a second the WAL stays
/// well under the backstop of SQLite's own checkpoint.
const EVERY: Duration = Duration::from_millis(200);

/// Checkpoints until `stop` turns true (SQLite only).
pub async fn run(store: Store, mut stop: watch::Receiver<bool>) {
    let mut ticks = super::every(EVERY);
    while super::tick(&mut ticks, &mut stop).await {
        if let Err(error) = store.checkpoint_wal().await {
            tracing::warn!(error = %error, "WAL checkpoint failed; retrying");
        }
    }
}
