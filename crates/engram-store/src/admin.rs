//! Reads that only the admin panel needs: a tenant's job counts by status, and the
//! agents that hold anything about one end user, and how much is held about them.

use super::{Result, Store, with_pool};
use crate::domain::ids::{AgentId, ExternalRef, TenantId};

impl Store {
    /// The tenant's jobs by status (statuses without jobs are absent).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "tenant_job_counts", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn tenant_job_counts(&self, tenant: &TenantId) -> Result<Vec<(String, i64)>> {
        // Uses jobs_tenant_id.
        let sql = "SELECT status, count(*) FROM jobs WHERE tenant_id = $1 GROUP BY status ORDER BY status";
        with_pool!(self, pool => sqlx::query_as(sql).bind(tenant.as_str()).fetch_all(pool).await)
    }

    /// The agents that hold facts or conversations about `user`, by `agent_id`.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "agents_of_user", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn agents_of_user(&self, tenant: &TenantId, user: &ExternalRef) -> Result<Vec<AgentId>> {
        // Uses facts_tenant_ref and conversations_tenant_ref_updated.
        let sql = "SELECT agent_id FROM facts WHERE tenant_id = $1 AND external_ref = $2 \
                   UNION SELECT agent_id FROM conversations WHERE tenant_id = $1 AND external_ref = $2 \
                   ORDER BY agent_id";
        with_pool!(self, pool => {
            sqlx::query_scalar(sql).bind(tenant.as_str()).bind(user.as_str()).fetch_all(pool).await
        })
    }

    /// How many facts, conversations, messages and working memory documents are held
    /// about `user`: what an erasure would delete, counted without reading them.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "person_footprint", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn person_footprint(&self, tenant: &TenantId, user: &ExternalRef) -> Result<(i64, i64, i64, i64)> {
        let sql = "SELECT \
             (SELECT count(*) FROM facts WHERE tenant_id = $1 AND external_ref = $2), \
             (SELECT count(*) FROM conversations WHERE tenant_id = $1 AND external_ref = $2), \
             (SELECT count(*) FROM messages WHERE tenant_id = $1 AND conversation_id IN \
                (SELECT id FROM conversations WHERE tenant_id = $1 AND external_ref = $2)), \
             (SELECT count(*) FROM working_memories WHERE tenant_id = $1 AND external_ref = $2)";
        with_pool!(self, pool => sqlx::query_as(sql).bind(tenant.as_str()).bind(user.as_str()).fetch_one(pool).await)
    }
}
