//! `/api/users/{external_ref}/consent`: whether an end user's data may be sent to an LLM.

use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::ctx::Ctx;
use super::input::{ApiJson, ApiPath};
use super::json::Json;
use super::{BodyErrors, CommonErrors};
use crate::domain::event::Actor;
use crate::{
    auth::{MemoryRead, MemoryWrite},
    domain::ids::ExternalRef,
    domain::policy::Consent,
    error::ApiError,
    service::{AppState, consent},
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_consent, put_consent))
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsentBody {
    pub ai_consent: bool,
}

/// Set an end user's AI consent. `false` cancels their queued extraction jobs.
#[utoipa::path(put, path = "/api/users/{external_ref}/consent", tag = "consent",
    params(("external_ref" = ExternalRef, Path, description = "The end user's id, percent-encoded")),
    request_body = ConsentBody, responses((status = 200, body = Consent), CommonErrors, BodyErrors))]
async fn put_consent(
    Ctx { state, caller }: Ctx<MemoryWrite>,
    ApiPath(user): ApiPath<ExternalRef>,
    ApiJson(body): ApiJson<ConsentBody>,
) -> Result<Json<Consent>, ApiError> {
    Ok(Json(consent::set(&state, &caller.tenant, &user, body.ai_consent, Actor::Api).await?))
}

/// An end user's AI consent; a user never set has the configured default and a null `updated_at`.
#[utoipa::path(get, path = "/api/users/{external_ref}/consent", tag = "consent",
    params(("external_ref" = ExternalRef, Path, description = "The end user's id, percent-encoded")),
    responses((status = 200, body = Consent), CommonErrors))]
async fn get_consent(
    Ctx { state, caller }: Ctx<MemoryRead>,
    ApiPath(user): ApiPath<ExternalRef>,
) -> Result<Json<Consent>, ApiError> {
    Ok(Json(consent::get(&state, &caller.tenant, &user).await?))
}
