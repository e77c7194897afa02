//! `/admin/webhooks`: the tenant's webhook subscriptions, each one's latest deliveries
//! with their attempts, and redelivery of a failed or dead one.

use askama::Template;
use axum::extract::{Query, State};
use serde::Deserialize;
use uuid::Uuid;

use super::{
    AdminPath, AdminResult, Layout, render, see_other,
    session::{Guarded, NoFields, Operator},
    when,
};
use crate::{
    auth::{Admin, Scope},
    domain::webhook::{Attempt, Delivery, Subscription},
    service::{AppState, webhooks},
};

/// Deliveries shown per page.
const PAGE: i64 = 50;

#[derive(Template)]
#[template(path = "admin/webhooks.html")]
struct WebhooksPage {
    layout: Layout,
    subscriptions: Vec<SubscriptionView>,
}

struct SubscriptionView {
    subscription: Subscription,
    types: String,
    failing_since: Option<String>,
}

impl From<Subscription> for SubscriptionView {
    fn from(subscription: Subscription) -> SubscriptionView {
        let types = if subscription.event_types.is_empty() {
            "every type".to_owned()
        } else {
            subscription.event_types.join(", ")
        };
        SubscriptionView { failing_since: subscription.failing_since.as_ref().map(when), types, subscription }
    }
}

#[derive(Template)]
#[template(path = "admin/webhook.html")]
struct WebhookPage {
    layout: Layout,
    view: SubscriptionView,
    deliveries: Vec<DeliveryView>,
    next: Option<String>,
}

struct DeliveryView {
    delivery: Delivery,
    retryable: bool,
    created: String,
    next_attempt: Option<String>,
    delivered: Option<String>,
}

#[derive(Deserialize)]
pub struct DeliveriesQuery {
    done: Option<String>,
    before: Option<i64>,
}

pub async fn list(State(state): State<AppState>, operator: Operator) -> AdminResult {
    operator.require(Scope::Admin)?;
    let subscriptions = webhooks::list(&state, operator.tenant()).await?;
    render(&WebhooksPage {
        layout: operator.layout("Webhooks", "webhooks", None),
        subscriptions: subscriptions.into_iter().map(SubscriptionView::from).collect(),
    })
}

pub async fn show(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath(id): AdminPath<Uuid>,
    Query(q): Query<DeliveriesQuery>,
) -> AdminResult {
    operator.require(Scope::Admin)?;
    let subscription = webhooks::get(&state, operator.tenant(), id).await?;
    let page = webhooks::deliveries(&state, operator.tenant(), id, None, q.before, Some(PAGE)).await?;
    render(&WebhookPage {
        layout: operator.layout("Webhook", "webhooks", q.done.as_deref()),
        view: subscription.into(),
        deliveries: page
            .items
            .into_iter()
            .map(|delivery| DeliveryView {
                retryable: matches!(delivery.status.as_str(), "failed" | "dead"),
                created: when(&delivery.created_at),
                next_attempt: delivery.next_attempt_at.as_ref().map(when),
                delivered: delivery.delivered_at.as_ref().map(when),
                delivery,
            })
            .collect(),
        next: page.next_before.map(|before| format!("/admin/webhooks/{id}?before={before}")),
    })
}

#[derive(Template)]
#[template(path = "admin/delivery.html")]
struct DeliveryPage {
    layout: Layout,
    subscription_id: Uuid,
    delivery: Delivery,
    retryable: bool,
    attempts: Vec<AttemptView>,
}

struct AttemptView {
    attempt: Attempt,
    at: String,
}

/// One delivery and every attempt at it.
pub async fn delivery(
    State(state): State<AppState>,
    operator: Operator,
    AdminPath((id, event_id)): AdminPath<(Uuid, i64)>,
) -> AdminResult {
    operator.require(Scope::Admin)?;
    let detail = webhooks::delivery(&state, operator.tenant(), id, event_id).await?;
    render(&DeliveryPage {
        layout: operator.layout("Delivery", "webhooks", None),
        subscription_id: id,
        retryable: matches!(detail.delivery.status.as_str(), "failed" | "dead"),
        delivery: detail.delivery,
        attempts: detail
            .attempt_log
            .into_iter()
            .map(|attempt| AttemptView { at: when(&attempt.attempted_at), attempt })
            .collect(),
    })
}

/// Sends a failed or dead delivery again now, as `POST …/deliveries/{event_id}/retry` does.
pub async fn redeliver(
    State(state): State<AppState>,
    AdminPath((id, event_id)): AdminPath<(Uuid, i64)>,
    Guarded { operator, .. }: Guarded<NoFields, Admin>,
) -> AdminResult {
    webhooks::redeliver(&state, operator.tenant(), id, event_id).await?;
    see_other(&format!("/admin/webhooks/{id}?done=redelivered"))
}
