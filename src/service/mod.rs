//! The application layer: the state every door shares and one home for each operation
//! that more than one door starts. The doors — REST handlers (`http/`), memory tools
//! (`http/tools/`, MCP), the admin panel (`admin/`) and the background workers
//! (`worker/`) — read their input, check the caller's scope, call an operation here and
//! shape its answer; the rules live here and below (`domain/`, `store/`), never in a
//! door. It sits below all of them, so no door imports another.

use std::sync::Arc;

use axum::extract::FromRef;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::{Notify, Semaphore};

pub mod agents;
pub mod consent;
pub mod conversations;
pub mod erasure;
pub mod error;
pub mod events;
pub mod export;
pub mod facts;
pub mod gdpr_export;
pub mod health;
pub mod import;
pub mod jobs;
pub mod memory_context;
pub mod recall;
pub mod recall_counts;
pub mod tools;
pub mod usage;
pub mod vectors;
pub mod webhooks;
pub mod working_memory;

use crate::{
    auth::Guard,
    config::{Secret, ServeConfig},
    embed::Embedder,
    store::Store,
};

/// The store's query and answer shapes that the doors name: a door reaches them here,
/// never in the store, which it does not use.
pub use crate::store::{
    conversations::{ConversationFilter, EndTrigger},
    facts::FactFilter,
    gdpr::{ErasedCounts, Receipt},
    jobs::JobFilter,
    messages::Window,
};

/// Everything a handler or worker may need, behind one `Arc`: axum clones the state
/// several times per request, and one count beats a dozen shared by every core
/// (docs/decisions/request-overhead.md). Fields are read through `Deref`.
#[derive(Clone)]
pub struct AppState(Arc<Shared>);

/// What [`AppState`] holds.
pub struct Shared {
    pub store: Store,
    /// Token verification and the per-tenant rate limit.
    pub guard: Guard,
    pub config: Arc<ServeConfig>,
    pub metrics: PrometheusHandle,
    /// Wakes this process's idle job workers when a job was queued (after commit).
    pub job_wakeup: Arc<Notify>,
    /// Key of the erasure receipts' subject hash.
    pub receipt_key: Arc<Secret>,
    /// Turns facts and queries into vectors (`ENGRAM_EMBEDDINGS`).
    pub embedder: Arc<Embedder>,
    /// Wakes the embedding worker when facts were written or the model became ready.
    pub embedding_wakeup: Arc<Notify>,
    /// One permit: at most one fact is embedded on its write at a time; under load the
    /// others are left to the worker, whose batches cost less per fact.
    pub inline_embedding: Semaphore,
    /// Which facts reads returned, until the flusher writes them (`ENGRAM_RECALL_TRACKING`).
    pub recall_counts: Arc<recall_counts::RecallCounts>,
}

impl AppState {
    pub fn new(shared: Shared) -> AppState {
        AppState(Arc::new(shared))
    }
}

impl std::ops::Deref for AppState {
    type Target = Shared;

    fn deref(&self) -> &Shared {
        &self.0
    }
}

impl FromRef<AppState> for Guard {
    fn from_ref(state: &AppState) -> Guard {
        state.guard.clone()
    }
}

/// Tells the embedding worker that facts were stored or changed, so their vectors
/// follow within moments (the write itself never waits for, nor fails on, an embedding).
pub fn facts_changed(state: &AppState) {
    state.embedding_wakeup.notify_one();
}

/// Whether a page read with a limit of `size` rows came back full: there may be more
/// after its last row.
fn is_full_page<T>(page: &[T], size: i64) -> bool {
    i64::try_from(page.len()).is_ok_and(|n| n == size)
}
