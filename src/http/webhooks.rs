//! `/api/webhooks` (admin): subscriptions that push the tenant's events to a receiver,
//! signed the Standard Webhooks way, and their deliveries with every attempt.

use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

use super::ctx::Ctx;
use super::json::Json;
use super::{
    BodyErrors, CommonErrors, NotFound,
    input::{ApiJson, ApiPath, ApiQuery},
};
use crate::{
    auth::Admin,
    domain::webhook::{Delivery, Subscription, SubscriptionInput, SubscriptionPatch},
    error::{ApiError, ErrorBody},
    service::{
        AppState,
        events::MAX_ID,
        webhooks::{self, DeliveryDetail, DeliveryPage, WithSecret},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_subscriptions, create_subscription))
        .routes(routes!(get_subscription, update_subscription, delete_subscription))
        .routes(routes!(rotate_secret))
        .routes(routes!(list_deliveries))
        .routes(routes!(get_delivery))
        .routes(routes!(redeliver))
}

#[derive(Serialize, ToSchema)]
struct Subscriptions {
    /// Oldest first.
    items: Vec<Subscription>,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeliveryQuery {
    /// Only deliveries in this state: `queued`, `running`, `failed`, `delivered`, `dead`.
    #[param(pattern = "^(queued|running|failed|delivered|dead)$")]
    status: Option<String>,
    /// Only deliveries of events older than this id (a previous page's `next_before`).
    #[param(minimum = 1, maximum = 9007199254740991_i64)]
    before: Option<i64>,
    #[param(minimum = 1, maximum = 200, default = 50)]
    limit: Option<i64>,
}

/// Subscribe a receiver to the tenant's events. 201 with the subscription and its signing
/// secret, shown only now. Deliveries are POSTed as `{"type", "timestamp", "data": event}`
/// with `webhook-id`, `webhook-timestamp` and `webhook-signature` (Standard Webhooks),
/// retried with backoff until they are answered 2xx. 400 for a URL whose host is not
/// public (unless the server allows private receivers); 409 over 25 subscriptions.
#[utoipa::path(post, path = "/api/webhooks", tag = "webhooks", request_body = SubscriptionInput,
    responses((status = 201, body = WithSecret), CommonErrors, BodyErrors,
        (status = 409, body = ErrorBody, description = "the tenant holds the maximum of 25 subscriptions")))]
async fn create_subscription(
    Ctx { state, caller }: Ctx<Admin>,
    ApiJson(input): ApiJson<SubscriptionInput>,
) -> Result<(StatusCode, Json<WithSecret>), ApiError> {
    Ok((StatusCode::CREATED, Json(webhooks::create(&state, &caller.tenant, input).await?)))
}

/// The tenant's subscriptions (without their secrets).
#[utoipa::path(get, path = "/api/webhooks", tag = "webhooks", responses((status = 200, body = Subscriptions), CommonErrors))]
async fn list_subscriptions(Ctx { state, caller }: Ctx<Admin>) -> Result<Json<Subscriptions>, ApiError> {
    Ok(Json(Subscriptions { items: webhooks::list(&state, &caller.tenant).await? }))
}

/// One subscription: a disabled one says why.
#[utoipa::path(get, path = "/api/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 200, body = Subscription), CommonErrors, NotFound))]
async fn get_subscription(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<Subscription>, ApiError> {
    Ok(Json(webhooks::get(&state, &caller.tenant, id).await?))
}

/// Change a subscription's URL, event types or switch. Enabling a disabled one clears its
/// failure, and its pending deliveries go out again.
#[utoipa::path(patch, path = "/api/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    request_body = SubscriptionPatch,
    responses((status = 200, body = Subscription), CommonErrors, BodyErrors, NotFound))]
async fn update_subscription(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(id): ApiPath<Uuid>,
    ApiJson(patch): ApiJson<SubscriptionPatch>,
) -> Result<Json<Subscription>, ApiError> {
    Ok(Json(webhooks::update(&state, &caller.tenant, id, patch).await?))
}

/// Delete a subscription and its deliveries.
#[utoipa::path(delete, path = "/api/webhooks/{id}", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 204), CommonErrors, NotFound))]
async fn delete_subscription(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<StatusCode, ApiError> {
    webhooks::delete(&state, &caller.tenant, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Replace the signing secret; the new one is shown only now, and signs every delivery
/// from now on.
#[utoipa::path(post, path = "/api/webhooks/{id}/rotate-secret", tag = "webhooks", params(("id" = Uuid, Path)),
    responses((status = 200, body = WithSecret), CommonErrors, NotFound))]
async fn rotate_secret(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(id): ApiPath<Uuid>,
) -> Result<Json<WithSecret>, ApiError> {
    Ok(Json(webhooks::rotate(&state, &caller.tenant, id).await?))
}

/// The subscription's deliveries, newest first.
#[utoipa::path(get, path = "/api/webhooks/{id}/deliveries", tag = "webhooks", params(("id" = Uuid, Path), DeliveryQuery),
    responses((status = 200, body = DeliveryPage), CommonErrors, NotFound))]
async fn list_deliveries(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath(id): ApiPath<Uuid>,
    ApiQuery(query): ApiQuery<DeliveryQuery>,
) -> Result<Json<DeliveryPage>, ApiError> {
    if query.before.is_some_and(|before| !(1..=MAX_ID).contains(&before)) {
        return Err(ApiError::invalid(format!("before must be 1-{MAX_ID}")));
    }
    let page = webhooks::deliveries(&state, &caller.tenant, id, query.status.as_deref(), query.before, query.limit);
    Ok(Json(page.await?))
}

/// One delivery with its attempts (status, error by kind, duration).
#[utoipa::path(get, path = "/api/webhooks/{id}/deliveries/{event_id}", tag = "webhooks",
    params(("id" = Uuid, Path), ("event_id" = i64, Path, minimum = 1)),
    responses((status = 200, body = DeliveryDetail), CommonErrors, NotFound))]
async fn get_delivery(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath((id, event_id)): ApiPath<(Uuid, i64)>,
) -> Result<Json<DeliveryDetail>, ApiError> {
    Ok(Json(webhooks::delivery(&state, &caller.tenant, id, event_id).await?))
}

/// Send a delivery again now (one more attempt), e.g. a `dead` one once the receiver is
/// fixed. 409 while it is being sent.
#[utoipa::path(post, path = "/api/webhooks/{id}/deliveries/{event_id}/retry", tag = "webhooks",
    params(("id" = Uuid, Path), ("event_id" = i64, Path, minimum = 1)),
    responses((status = 202, body = Delivery), CommonErrors, NotFound,
        (status = 409, body = ErrorBody, description = "the delivery is being sent")))]
async fn redeliver(
    Ctx { state, caller }: Ctx<Admin>,
    ApiPath((id, event_id)): ApiPath<(Uuid, i64)>,
) -> Result<(StatusCode, Json<Delivery>), ApiError> {
    Ok((StatusCode::ACCEPTED, Json(webhooks::redeliver(&state, &caller.tenant, id, event_id).await?)))
}
