//! What the request handlers and the background workers share: the application state
//! and the operations both of them start (ending a conversation is done by the end
//! route and by the idle sweeper alike). It sits below `http/` and `worker/`, so
//! neither has to import the other.

use std::sync::Arc;

use axum::extract::FromRef;
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::Notify;

pub mod export;
pub mod recall;

use crate::{
    auth::Guard,
    config::{Secret, ServeConfig},
    domain::{
        conversation::Ended,
        ids::{ExternalRef, TenantId},
    },
    embed::Embedder,
    store::{Store, conversations::EndTrigger, rgpd::Receipt},
};

/// Everything a handler or worker may need, cloned per request (all fields are cheap
/// handles).
#[derive(Clone)]
pub struct AppState {
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
}

impl FromRef<AppState> for Guard {
    fn from_ref(state: &AppState) -> Guard {
        state.guard.clone()
    }
}

impl AppState {
    /// Ends a conversation (see [`Store::end_conversation`]) and, when that queued an
    /// extraction, wakes a worker. The end route and the idle sweeper both come here.
    pub async fn end_conversation(
        &self,
        tenant: &TenantId,
        id: uuid::Uuid,
        trigger: EndTrigger,
    ) -> sqlx::Result<Option<Ended>> {
        let ended = self.store.end_conversation(tenant, id, trigger, self.config.default_ai_consent).await?;
        if ended.as_ref().is_some_and(|e| e.extraction.queued) {
            self.job_wakeup.notify_one();
        }
        Ok(ended)
    }

    /// Tells the embedding worker that facts were stored or changed, so their vectors
    /// follow within moments (the write itself never waits for, nor fails on, an embedding).
    pub fn facts_changed(&self) {
        self.embedding_wakeup.notify_one();
    }

    /// Erases everything held about a person in the tenant and writes the receipt (see
    /// [`Store::erase_user`]); the API route and the admin panel both come here, so
    /// their receipts hash the person alike.
    pub async fn erase_user(&self, tenant: &TenantId, user: &ExternalRef) -> sqlx::Result<Receipt> {
        // Tenant and identifier are joined with a NUL, which neither can contain, so
        // two different pairs never hash the same input.
        let input = format!("{tenant}\u{0}{}", user.as_str());
        let subject_hash = crate::crypto::hmac_sha256_hex(self.receipt_key.0.as_bytes(), input.as_bytes());
        self.store.erase_user(tenant, user, &subject_hash).await
    }
}
