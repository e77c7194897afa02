//! `/api/usage` (admin): what the model cost the tenant, per agent over a period, and its
//! daily token budget; the same figures as the admin panel's usage page.

use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::CommonErrors;
use super::ctx::Ctx;
use super::input::ApiQuery;
use super::json::Json;
use crate::{
    auth::Admin,
    domain::usage::TokenUsage,
    error::ApiError,
    service::{AppState, usage},
};

/// The longest period a read sums, in days.
const MAX_DAYS: u32 = 366;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(get_usage))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct UsageQuery {
    /// The last this many UTC days, today included.
    #[param(minimum = 1, maximum = 366, default = 7)]
    days: Option<u32>,
}

/// The tokens the tenant's extraction and summary jobs spent per agent (those that spent
/// most first, at most 1000), and its daily token budget today.
#[utoipa::path(get, path = "/api/usage", tag = "jobs", params(UsageQuery),
    responses((status = 200, body = TokenUsage), CommonErrors))]
async fn get_usage(
    Ctx { state, caller }: Ctx<Admin>,
    ApiQuery(query): ApiQuery<UsageQuery>,
) -> Result<Json<TokenUsage>, ApiError> {
    let days = query.days.unwrap_or(7);
    if !(1..=MAX_DAYS).contains(&days) {
        return Err(ApiError::invalid(format!("days must be 1-{MAX_DAYS}, got {days}")));
    }
    Ok(Json(usage::report(&state, &caller.tenant, days).await?))
}
