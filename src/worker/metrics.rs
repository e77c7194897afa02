//! Job gauges, read from the database when `/metrics` is scraped, so every replica
//! reports the queue as it is rather than as it saw it.

use crate::store::Store;

const STATUSES: [&str; 6] = ["queued", "running", "succeeded", "failed", "dead", "cancelled"];

pub async fn refresh_job_gauges(store: &Store) {
    match store.count_jobs_by_status().await {
        Ok(counts) => {
            for status in STATUSES {
                let n = counts.iter().find(|(s, _)| s == status).map_or(0, |(_, n)| *n);
                metrics::gauge!("engram_jobs", "status" => status).set(n as f64);
            }
        }
        Err(e) => tracing::warn!(error = %e, "counting jobs for metrics failed"),
    }
}
