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

/// The facts a read takes: one owner's, and with shared memory the same user's facts of
/// the other agents the owner's agent reads (`reads_facts_of`), in the same tenant. Only
/// reads take one: every write names a single [`Owner`].
#[derive(Debug, Clone, Copy)]
pub struct OwnerSet<'a> {
    owner: Owner<'a>,
    shared: &'a [AgentId],
}

impl<'a> OwnerSet<'a> {
    /// The owner's facts and those of `shared` (agents of the owner's tenant).
    pub fn new(owner: Owner<'a>, shared: &'a [AgentId]) -> OwnerSet<'a> {
        OwnerSet { owner, shared }
    }

    /// The reading owner.
    pub fn owner(&self) -> Owner<'a> {
        self.owner
    }

    /// The other agents whose facts of the same user are read too; empty without sharing.
    pub fn shared(&self) -> &'a [AgentId] {
        self.shared
    }

    /// Every owner of the set, the reading one first.
    pub fn owners(&self) -> impl Iterator<Item = Owner<'a>> + '_ {
        let (tenant, user) = (self.owner.tenant, self.owner.user);
        std::iter::once(self.owner).chain(self.shared.iter().map(move |agent| Owner::new(tenant, agent, user)))
    }
}

impl<'a> From<Owner<'a>> for OwnerSet<'a> {
    fn from(owner: Owner<'a>) -> OwnerSet<'a> {
        OwnerSet { owner, shared: &[] }
    }
}
