//! Whose memory an operation is about: one agent's view of one end user in one tenant.

use super::ids::{AgentId, ExternalRef, TenantId};

/// Every fact, policy read and per-user statement is scoped to an owner. Its fields are
/// private and [`Owner::new`] is the only way to make one, so the tenant always comes
/// from where the door that builds it took it (the verified token, the operator's
/// session, a job row), never from a literal assembled elsewhere.
#[derive(Debug, Clone, Copy)]
pub struct Owner<'a> {
    tenant: &'a TenantId,
    agent: &'a AgentId,
    user: &'a ExternalRef,
}

impl<'a> Owner<'a> {
    pub fn new(tenant: &'a TenantId, agent: &'a AgentId, user: &'a ExternalRef) -> Owner<'a> {
        Owner { tenant, agent, user }
    }

    pub fn tenant(&self) -> &'a TenantId {
        self.tenant
    }

    pub fn agent(&self) -> &'a AgentId {
        self.agent
    }

    pub fn user(&self) -> &'a ExternalRef {
        self.user
    }
}
