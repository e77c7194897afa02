//! An end user's AI consent: the REST routes and the admin panel's person page both read
//! and set it here, so both show the configured default alike for a user never asked.

use super::AppState;
use crate::{
    domain::{
        event::Actor,
        ids::{ExternalRef, TenantId},
        policy::Consent,
    },
    service::error::ServiceError,
};

/// The user's consent, or the configured default (with a null `updated_at`) when never set.
pub async fn get(state: &AppState, tenant: &TenantId, user: &ExternalRef) -> Result<Consent, ServiceError> {
    let stored = state.store.get_consent(tenant, user).await?;
    Ok(Consent::view(user, stored, state.config.default_ai_consent))
}

/// Records the user's consent; refusing it cancels their queued extraction jobs.
pub async fn set(
    state: &AppState,
    tenant: &TenantId,
    user: &ExternalRef,
    consent: bool,
    actor: Actor,
) -> Result<Consent, ServiceError> {
    let updated_at = state.store.set_consent(tenant, user, consent, actor).await?;
    Ok(Consent { external_ref: user.clone(), ai_consent: consent, updated_at: Some(updated_at) })
}
