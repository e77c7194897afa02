//! Background tasks that run inside `engram serve`.

use tokio::{sync::watch, task::JoinHandle};

use crate::http::AppState;

/// Starts the background tasks; each stops when `stop` turns true.
pub fn spawn(_state: AppState, _stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
    Vec::new()
}
