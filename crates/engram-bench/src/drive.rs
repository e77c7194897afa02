//! What the speed benchmarks share: driving one operation from many tasks at once, for a
//! number of requests or for a time, and summing up what came back (rate, percentiles,
//! errors).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// When a run stops: after `count` requests, at `until` after the start, whichever
/// comes first (at least one of the two is set by every caller).
#[derive(Clone, Copy)]
pub struct Budget {
    pub count: Option<usize>,
    pub until: Option<Duration>,
}

/// What a run measured: the latencies of the requests that succeeded (sorted), the
/// number that failed, and the wall time until the last one came back.
pub struct Outcome {
    latencies: Vec<Duration>,
    pub errors: usize,
    elapsed: Duration,
}

/// Runs `operation(i)` for i = 0, 1, 2… from `concurrency` tasks, each starting its next
/// request when its last one came back, until the budget is spent. `operation` tells
/// whether the request succeeded.
pub async fn drive<F, Fut>(concurrency: usize, budget: Budget, operation: F) -> Outcome
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send,
{
    let started = Instant::now();
    let deadline = budget.until.map(|until| started + until);
    let next = Arc::new(AtomicUsize::new(0));
    let operation = Arc::new(operation);
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (next, operation) = (next.clone(), operation.clone());
        workers.spawn(async move {
            let (mut latencies, mut errors) = (Vec::new(), 0);
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if budget.count.is_some_and(|count| i >= count) || deadline.is_some_and(|d| Instant::now() >= d) {
                    break;
                }
                let sent = Instant::now();
                if operation(i).await {
                    latencies.push(sent.elapsed());
                } else {
                    errors += 1;
                }
            }
            (latencies, errors)
        });
    }
    let (mut latencies, mut errors) = (Vec::new(), 0);
    for (done, failed) in workers.join_all().await {
        latencies.extend(done);
        errors += failed;
    }
    latencies.sort_unstable();
    Outcome { latencies, errors, elapsed: started.elapsed() }
}

impl Outcome {
    /// Requests sent, successful or not.
    pub fn requests(&self) -> usize {
        self.latencies.len() + self.errors
    }

    /// Requests (successful or not) per second of wall time.
    pub fn rate(&self) -> f64 {
        self.requests() as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// The latency under which `p` % of the successful requests came back, in ms.
    pub fn percentile_ms(&self, p: usize) -> f64 {
        let index = (self.latencies.len() * p / 100).min(self.latencies.len().saturating_sub(1));
        self.latencies.get(index).map_or(0.0, |d| d.as_secs_f64() * 1e3)
    }
}

/// Sends a request and reads the whole answer: whether it came and `expected` holds of
/// its status and body.
pub async fn answer(
    request: reqwest::RequestBuilder,
    expected: impl FnOnce(reqwest::StatusCode, &[u8]) -> bool,
) -> bool {
    let Ok(response) = request.send().await else { return false };
    let status = response.status();
    response.bytes().await.is_ok_and(|body| expected(status, &body))
}

/// Sends a request and reads the whole answer: whether it was a success.
pub async fn succeeds(request: reqwest::RequestBuilder) -> bool {
    answer(request, |status, _| status.is_success()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_count_budget_sends_that_many_and_counts_failures() {
        let outcome = drive(3, Budget { count: Some(10), until: None }, |i| async move { i % 5 != 0 }).await;
        assert_eq!(outcome.requests(), 10);
        assert_eq!(outcome.errors, 2);
        assert!(outcome.percentile_ms(99) >= outcome.percentile_ms(50));
    }

    #[tokio::test]
    async fn a_time_budget_stops_in_time() {
        let started = Instant::now();
        let outcome = drive(2, Budget { count: None, until: Some(Duration::from_millis(200)) }, |_| async {
            tokio::time::sleep(Duration::from_millis(10)).await;
            true
        })
        .await;
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(outcome.requests() >= 10 && outcome.errors == 0);
        assert!(outcome.rate() > 0.0);
    }

    #[test]
    fn percentiles_of_nothing_are_zero() {
        let outcome = Outcome { latencies: vec![], errors: 0, elapsed: Duration::ZERO };
        assert_eq!(outcome.percentile_ms(50), 0.0);
        let outcome = Outcome {
            latencies: (1..=100).map(Duration::from_millis).collect(),
            errors: 0,
            elapsed: Duration::from_secs(1),
        };
        assert_eq!(outcome.percentile_ms(50), 51.0);
        assert_eq!(outcome.percentile_ms(99), 100.0);
        assert_eq!(outcome.rate(), 100.0);
    }
}
