//! SQLite's WAL checkpointer: copies committed pages from the WAL into the main file every
//! [`EVERY`], off the write path. SQLite would otherwise checkpoint inside the commit that
//! fills the WAL (every 1 000 pages by default), holding the write lock while it copies
//! pages and syncs the file: every writer queued behind that commit waits, which showed
//! as the p99 of writes in `engram-bench load`.

use std::time::Duration;

use tokio::sync::watch;

use crate::store::Store;

/// How often the WAL is checkpointed: at a few thousand commits a second the WAL stays
/// well under the backstop of SQLite's own checkpoint. Each checkpoint syncs the files
/// and writers stall behind that sync for a time that grows with the pages it copies, so
/// small and frequent beats large and rare. In `engram-bench load`, each pair run in one
/// session, at the same throughput: remember's p99 went from 30–34 ms at 200 ms to 45–48
/// at 1 s, and, in a later and faster session, from 23–24 ms at 200 ms to 17–19 at 50.
const EVERY: Duration = Duration::from_millis(50);

/// How long the checkpointer waits after finding nothing committed since its last look:
/// an idle server wakes 20 times a second at [`EVERY`] (0.7 % of a core here, against
/// 0.3 % at 200 ms), and the first commit after a pause is at most this far from a
/// checkpoint.
const IDLE: Duration = Duration::from_secs(1);

/// Checkpoints until `stop` turns true (SQLite only).
pub async fn run(store: Store, mut stop: watch::Receiver<bool>) {
    let mut ticks = super::every(EVERY);
    let mut last = None;
    while super::tick(&mut ticks, &mut stop).await {
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
