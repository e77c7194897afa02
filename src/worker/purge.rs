//! The purge after erasures (`Store::purge_erasures`): tried every [`EVERY`] while one is
//! owed, that is when an erasure's own try (SQLite) was held back by a reader, after
//! every erasure on PostgreSQL, whose vacuum runs here rather than in the request, and
//! at start for receipts a stopped process left undated.

use std::time::Duration;

use tokio::sync::watch;

use crate::store::Store;

/// How often an owed purge is tried: each SQLite try holds every writer back up to a
/// quarter of a second, and each PostgreSQL try that passes its readers vacuums the
/// erased tables. When nothing is owed a tick costs an atomic load.
const EVERY: Duration = Duration::from_secs(1);

/// Purges until `stop` turns true.
pub async fn run(store: Store, mut stop: watch::Receiver<bool>) {
    let mut ticks = super::every(EVERY);
    while super::tick(&mut ticks, &mut stop).await {
        // Worker-only: erased rows are purged in the background, never on a request.
        if let Err(error) = store.purge_erasures().await {
            tracing::warn!(error = %error, "the purge after an erasure failed; retrying");
        }
    }
}
