//! End users' AI consent records.

use chrono::{DateTime, Utc};

use super::{Result, Store, with_pool, with_tx};
use crate::domain::{
    event::{Actor, EventData, EventType},
    ids::{ExternalRef, TenantId},
};

/// A user's consent and when it was set; binds the tenant and external_ref.
pub(super) const SELECT_CONSENT: &str =
    "SELECT ai_consent, updated_at FROM user_consents WHERE tenant_id = $1 AND external_ref = $2";

impl Store {
    /// The stored consent and when it was set, or `None` when the user never said.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_consent", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn get_consent(&self, tenant: &TenantId, user: &ExternalRef) -> Result<Option<(bool, DateTime<Utc>)>> {
        with_pool!(self, pool => {
            sqlx::query_as(SELECT_CONSENT).bind(tenant.as_str()).bind(user.as_str()).fetch_optional(pool).await
        })
    }

    /// Stores consent. A refusal also cancels the user's queued and running jobs
    /// (extractions and summaries) in the same transaction, so nothing of theirs reaches
    /// an LLM after this returns.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "set_consent", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn set_consent(
        &self,
        tenant: &TenantId,
        user: &ExternalRef,
        consent: bool,
        actor: Actor,
    ) -> Result<DateTime<Utc>> {
        let now = super::now();
        let mut tx = self.begin_change(actor).await?;
        tx.write_consent(tenant, user, consent, now).await?;
        tx.commit().await?;
        Ok(now)
    }
}

impl super::Tx {
    /// Stores consent as set at `at`, with its event. A refusal also cancels the user's
    /// queued and running jobs, in this transaction (see [`Store::set_consent`]).
    pub(super) async fn write_consent(
        &mut self,
        tenant: &TenantId,
        user: &ExternalRef,
        consent: bool,
        at: DateTime<Utc>,
    ) -> Result<()> {
        with_tx!(self, tx => {
            sqlx::query(
                "INSERT INTO user_consents (tenant_id, external_ref, ai_consent, updated_at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (tenant_id, external_ref) DO UPDATE SET ai_consent = $3, updated_at = $4",
            )
            .bind(tenant.as_str())
            .bind(user.as_str())
            .bind(consent)
            .bind(at)
            .execute(&mut **tx)
            .await?;
            if !consent {
                sqlx::query(
                    "UPDATE jobs SET status = 'cancelled', last_error = 'consent refused', locked_until = NULL, \
                     lease_token = NULL, updated_at = $3 \
                     WHERE tenant_id = $1 AND external_ref = $2 AND status IN ('queued', 'failed', 'running')",
                )
                .bind(tenant.as_str())
                .bind(user.as_str())
                .bind(super::now())
                .execute(&mut **tx)
                .await?;
            }
        });
        let data = EventData { consent: Some(consent), ..EventData::default() };
        self.record_person(tenant, None, user, EventType::ConsentChanged, data);
        Ok(())
    }
}
