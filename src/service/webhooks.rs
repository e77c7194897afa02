//! Webhook subscriptions and their deliveries: the REST routes and the admin panel manage
//! them here. A receiver URL is checked when it is set (form, then the addresses its host
//! resolves to) and again by the delivering worker's resolver when it connects.

use std::time::Duration;

use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{
        event::types_key,
        ids::TenantId,
        page::limit,
        webhook::{
            Attempt, Delivery, MAX_SUBSCRIPTIONS, Subscription, SubscriptionInput, SubscriptionPatch, new_secret,
            parse_url,
        },
    },
    service::error::ServiceError,
};

/// How long a receiver's host name may take to resolve when a subscription is saved.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(3);

/// A subscription with its signing secret: shown once, when it is made or rotated.
#[derive(Debug, Serialize, ToSchema)]
pub struct WithSecret {
    #[serde(flatten)]
    pub subscription: Subscription,
    /// Verifies deliveries (Standard Webhooks: `whsec_` and the key in base64). Shown only
    /// now: store it.
    pub secret: String,
}

/// A delivery and its attempts, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryDetail {
    #[serde(flatten)]
    pub delivery: Delivery,
    /// Every attempt, oldest first.
    pub attempt_log: Vec<Attempt>,
}

/// A page of deliveries, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryPage {
    pub items: Vec<Delivery>,
    /// The next page's `before`; null on the last page.
    pub next_before: Option<i64>,
}

const NOT_FOUND: ServiceError = ServiceError::NotFound("webhook subscription");

/// Checks a receiver URL: its form, then (unless `ENGRAM_WEBHOOK_ALLOW_PRIVATE`) that its
/// host is, or resolves to, public addresses only.
async fn destination(state: &AppState, raw: &str) -> Result<String, ServiceError> {
    let url = parse_url(raw).map_err(ServiceError::Invalid)?;
    if !state.config.webhook_allow_private {
        crate::remote_servers::check_public(&url, RESOLVE_TIMEOUT).await.map_err(|why| {
            ServiceError::invalid(format!("url refused: {why} (ENGRAM_WEBHOOK_ALLOW_PRIVATE is off)"))
        })?;
    }
    Ok(url.to_string())
}

pub async fn create(state: &AppState, tenant: &TenantId, input: SubscriptionInput) -> Result<WithSecret, ServiceError> {
    let types = types_key(&input.event_types);
    let url = destination(state, &input.url).await?;
    let secret = new_secret();
    let enabled = input.enabled.unwrap_or(true);
    match state.store.create_subscription(tenant, &url, &types, enabled, &secret).await? {
        Some(subscription) => Ok(WithSecret { subscription, secret }),
        None => {
            Err(ServiceError::Conflict(format!("a tenant may hold at most {MAX_SUBSCRIPTIONS} webhook subscriptions")))
        }
    }
}

pub async fn list(state: &AppState, tenant: &TenantId) -> Result<Vec<Subscription>, ServiceError> {
    Ok(state.store.list_subscriptions(tenant).await?)
}

pub async fn get(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<Subscription, ServiceError> {
    state.store.get_subscription(tenant, id).await?.ok_or(NOT_FOUND)
}

pub async fn update(
    state: &AppState,
    tenant: &TenantId,
    id: Uuid,
    patch: SubscriptionPatch,
) -> Result<Subscription, ServiceError> {
    let types = patch.event_types.as_deref().map(types_key);
    let url = match &patch.url {
        Some(raw) => Some(destination(state, raw).await?),
        None => None,
    };
    let updated = state.store.update_subscription(tenant, id, url.as_deref(), types.as_deref(), patch.enabled);
    updated.await?.ok_or(NOT_FOUND)
}

pub async fn delete(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<(), ServiceError> {
    if state.store.delete_subscription(tenant, id).await? { Ok(()) } else { Err(NOT_FOUND) }
}

/// A new secret; the old one stops signing at once.
pub async fn rotate(state: &AppState, tenant: &TenantId, id: Uuid) -> Result<WithSecret, ServiceError> {
    let secret = new_secret();
    if !state.store.rotate_secret(tenant, id, &secret).await? {
        return Err(NOT_FOUND);
    }
    Ok(WithSecret { subscription: get(state, tenant, id).await?, secret })
}

/// The subscription's deliveries, newest first (`limit` 1–200, default 50), of one status
/// when given, before an event id when given.
pub async fn deliveries(
    state: &AppState,
    tenant: &TenantId,
    id: Uuid,
    status: Option<&str>,
    before: Option<i64>,
    limit: Option<i64>,
) -> Result<DeliveryPage, ServiceError> {
    if let Some(status) = status
        && !["queued", "running", "failed", "delivered", "dead"].contains(&status)
    {
        return Err(ServiceError::invalid("status must be queued, running, failed, delivered or dead"));
    }
    let limit = self::limit(limit, 50, 200)?;
    get(state, tenant, id).await?;
    let mut items = state.store.list_deliveries(tenant, id, status, before, limit + 1).await?;
    let more = items.len() as i64 > limit;
    items.truncate(limit as usize);
    let next_before = if more { items.last().map(|d| d.event_id) } else { None };
    Ok(DeliveryPage { items, next_before })
}

pub async fn delivery(
    state: &AppState,
    tenant: &TenantId,
    id: Uuid,
    event_id: i64,
) -> Result<DeliveryDetail, ServiceError> {
    let (delivery, attempts) =
        state.store.delivery(tenant, id, event_id).await?.ok_or(ServiceError::NotFound("delivery"))?;
    Ok(DeliveryDetail { delivery, attempt_log: attempts })
}

/// Queues a delivery again now (one more attempt); 404 when there is none, 409 while it
/// is being sent.
pub async fn redeliver(state: &AppState, tenant: &TenantId, id: Uuid, event_id: i64) -> Result<Delivery, ServiceError> {
    if let Some(delivery) = state.store.redeliver(tenant, id, event_id).await? {
        state.store.wake_senders();
        return Ok(delivery);
    }
    match state.store.delivery(tenant, id, event_id).await? {
        Some(_) => Err(ServiceError::Conflict("the delivery is being sent; try again when it is done".into())),
        None => Err(ServiceError::NotFound("delivery")),
    }
}
