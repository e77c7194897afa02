//! Erasure: everything held about a person in a tenant, deleted in one store transaction,
//! and the receipt that proves it without the identifier. The API route and the admin
//! panel both come here, so their receipts hash the person alike.

use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{
        event::Actor,
        ids::{AgentId, ExternalRef, TenantId},
    },
    service::error::ServiceError,
    store::gdpr::Receipt,
};

/// Erases the person (see [`crate::store::Store::erase_user`]) and writes the receipt.
pub async fn erase(
    state: &AppState,
    tenant: &TenantId,
    user: &ExternalRef,
    actor: Actor,
) -> Result<Receipt, ServiceError> {
    // Tenant and identifier are joined with a NUL, which neither can contain, so two
    // different pairs never hash the same input.
    let input = format!("{tenant}\u{0}{}", user.as_str());
    let subject_hash = crate::crypto::hmac_sha256_hex(state.receipt_key.0.as_bytes(), input.as_bytes());
    Ok(state.store.erase_user(tenant, user, &subject_hash, actor).await?)
}

/// One of the tenant's erasure receipts; `not_found` for another tenant's.
pub async fn receipt(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<Receipt, ServiceError> {
    state.store.get_receipt(tenant, id).await?.ok_or(ServiceError::NotFound("receipt"))
}

/// What an erasure of the person would delete, for the panel to say before it does.
#[derive(Debug)]
pub struct Footprint {
    pub facts: i64,
    pub conversations: i64,
    pub messages: i64,
    pub working_memories: i64,
    /// The agents holding facts or conversations of the person.
    pub agents: Vec<AgentId>,
    /// Whether the person refused consent: the refusal outlives the erasure.
    pub consent_refused: bool,
}

/// Counts what [`erase`] would delete of the person, and whether their refusal stays.
pub async fn footprint(state: &AppState, tenant: &TenantId, user: &ExternalRef) -> Result<Footprint, ServiceError> {
    let (facts, conversations, messages, working_memories) = state.store.person_footprint(tenant, user).await?;
    let agents = super::agents::of_user(state, tenant, user).await?;
    let consent = state.store.get_consent(tenant, user).await?;
    Ok(Footprint {
        facts,
        conversations,
        messages,
        working_memories,
        agents,
        consent_refused: consent.is_some_and(|(consent, _)| !consent),
    })
}
