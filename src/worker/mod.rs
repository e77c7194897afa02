//! Background tasks that run inside `engram serve`.

use tokio::{sync::watch, task::JoinHandle};

use crate::http::AppState;

pub mod sweeper;

/// Starts the background tasks; each stops when `stop` turns true.
pub fn spawn(state: AppState, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
    vec![tokio::spawn(sweeper::run(state, stop))]
}
