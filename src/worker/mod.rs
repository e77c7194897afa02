//! Background tasks that run inside `engram serve`: the job workers (extraction and
//! rolling summaries), the PostgreSQL notification listener that wakes them, the
//! idle-conversation sweeper, the embedding worker, the recall-count flusher, the webhook
//! senders, the purge after erasures and SQLite's WAL checkpointer.
//!
//! What a worker shares with a request (ending a conversation, retrying a job, recall) it
//! does through `service`. The store calls left here are the queue's and the sweeps' own
//! (claim, lease, release, fail, deliver, checkpoint, prune, forget): no other door makes
//! them, so a service function in between would only pass them through.

use std::{sync::Arc, time::Duration};

use tokio::{sync::watch, task::JoinHandle};

use crate::{extract::Extractor, service::AppState, store::Store};

mod budget;
pub mod checkpoint;
pub mod embedding;
pub mod extract_facts;
pub mod jobs;
pub mod purge;
pub mod recall_flush;
pub mod runner;
pub mod summarize;
pub mod sweeper;
pub mod webhooks;

/// Starts the background tasks; each stops when `stop` turns true.
pub fn spawn(state: AppState, extractor: Arc<Extractor>, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
    let mut tasks = vec![
        tokio::spawn(sweeper::run(state.clone(), stop.clone())),
        tokio::spawn(embedding::run(state.clone(), stop.clone())),
        tokio::spawn(recall_flush::run(state.clone(), stop.clone())),
        tokio::spawn(purge::run(state.store.clone(), stop.clone())),
    ];
    // Worker-only: which backend runs picks the tasks to start: a property of the store, no data read.
    if state.store.is_embedded() {
        tasks.push(tokio::spawn(checkpoint::run(state.store.clone(), stop.clone())));
    } else {
        tasks.push(tokio::spawn(listen(state.store.clone(), state.job_wakeup.clone(), stop.clone())));
    }
    let client = webhooks::client(&state);
    tasks.push(tokio::spawn(webhooks::run(state.clone(), client, stop.clone())));
    for _ in 0..state.config.workers {
        tasks.push(tokio::spawn(runner::run_worker(state.clone(), extractor.clone(), stop.clone())));
    }
    tasks
}

/// The clock of a task that runs every `period`: a tick missed while the task was busy
/// is waited out, not made up in a burst.
fn every(period: Duration) -> tokio::time::Interval {
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticks
}

/// Waits for the next tick; false once `stop` turned true, or its sender was dropped
/// (nobody can stop the task any more, so it stops too).
async fn tick(ticks: &mut tokio::time::Interval, stop: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = ticks.tick() => {}
        _ = stop.changed() => {}
    }
    !*stop.borrow() && stop.has_changed().is_ok()
}

/// Turns the store's job notifications (sent at commit by whoever queued a job, on any
/// replica) into an in-memory wake-up. If the connection drops, workers still poll.
async fn listen(store: Store, wakeup: Arc<tokio::sync::Notify>, mut stop: watch::Receiver<bool>) {
    while !*stop.borrow() {
        // Worker-only: only the worker listens for queued jobs.
        let mut notifications = match store.job_notifications().await {
            Ok(Some(notifications)) => notifications,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(error = %e, "job notifications unavailable; workers poll");
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(5)) => continue,
                    _ = stop.changed() => return,
                }
            }
        };
        loop {
            tokio::select! {
                received = notifications.recv() => match received {
                    Ok(()) => wakeup.notify_waiters(),
                    Err(e) => {
                        tracing::warn!(error = %e, "job notification connection lost");
                        break;
                    }
                },
                _ = stop.changed() => return,
            }
        }
    }
}
