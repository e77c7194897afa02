//! Erasure: everything held about a person in a tenant, deleted in one store transaction,
//! and the receipt that proves it without the identifier. The API route and the admin
//! panel both come here, so their receipts hash the person alike.

use super::AppState;
use crate::{
    domain::{
        event::Actor,
        ids::{ExternalRef, TenantId},
    },
    error::ApiError,
    store::gdpr::Receipt,
};

/// Erases the person (see [`crate::store::Store::erase_user`]) and writes the receipt.
pub async fn erase(state: &AppState, tenant: &TenantId, user: &ExternalRef, actor: Actor) -> Result<Receipt, ApiError> {
    // Tenant and identifier are joined with a NUL, which neither can contain, so two
    // different pairs never hash the same input.
    let input = format!("{tenant}\u{0}{}", user.as_str());
    let subject_hash = crate::crypto::hmac_sha256_hex(state.receipt_key.0.as_bytes(), input.as_bytes());
    Ok(state.store.erase_user(tenant, user, &subject_hash, actor).await?)
}
