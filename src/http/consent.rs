//! `/api/users/{external_ref}/consent`: whether an end user's data may be sent to an LLM.

use axum::{Json, extract::State};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    AppState,
    extract::{ApiJson, ApiPath},
};
use crate::{
    auth::{Caller, Scope},
    domain::ids::ExternalRef,
    error::{ApiError, ErrorBody},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_consent, put_consent))
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Consent {
    pub external_ref: ExternalRef,
    pub ai_consent: bool,
    /// Null when the user never said (the configured default applies).
    pub updated_at: Option<DateTime<Utc>>,
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsentBody {
    pub ai_consent: bool,
}

/// Set an end user's AI consent. `false` cancels their queued extraction jobs.
#[utoipa::path(put, path = "/api/users/{external_ref}/consent", tag = "consent",
    params(("external_ref" = String, Path, description = "The end user's id, percent-encoded")),
    request_body = ConsentBody,
    responses((status = 200, body = Consent), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
async fn put_consent(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(user): ApiPath<ExternalRef>,
    ApiJson(body): ApiJson<ConsentBody>,
) -> Result<Json<Consent>, ApiError> {
    caller.require(Scope::MemoryWrite)?;
    let updated_at = state.store.set_consent(&caller.tenant, &user, body.ai_consent).await?;
    Ok(Json(Consent { external_ref: user, ai_consent: body.ai_consent, updated_at: Some(updated_at) }))
}

/// An end user's AI consent; a user never set has the configured default and a null `updated_at`.
#[utoipa::path(get, path = "/api/users/{external_ref}/consent", tag = "consent",
    params(("external_ref" = String, Path)),
    responses((status = 200, body = Consent), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)),
    security(("bearer" = [])))]
async fn get_consent(
    State(state): State<AppState>,
    caller: Caller,
    ApiPath(user): ApiPath<ExternalRef>,
) -> Result<Json<Consent>, ApiError> {
    caller.require(Scope::MemoryRead)?;
    let stored = state.store.get_consent(&caller.tenant, &user).await?;
    Ok(Json(consent_view(&state, &user, stored)))
}

/// The user's consent as the API shows it: the stored record, or the configured default.
pub(super) fn consent_view(state: &AppState, user: &ExternalRef, stored: Option<(bool, DateTime<Utc>)>) -> Consent {
    let (ai_consent, updated_at) = match stored {
        Some((consent, at)) => (consent, Some(at)),
        None => (state.config.default_ai_consent, None),
    };
    Consent { external_ref: user.clone(), ai_consent, updated_at }
}
