//! Webhook delivery: claims due deliveries, POSTs each event signed the Standard Webhooks
//! way, and records the outcome. At least once: a delivery is done only when the receiver
//! answered 2xx and that was recorded; a process killed mid-send leaves a lease that runs
//! out, and the delivery is sent again. Requests time out, follow no redirect, reach only
//! public addresses unless `ENGRAM_WEBHOOK_ALLOW_PRIVATE` (checked on the resolved
//! address), and never carry more than [`MAX_BODY_BYTES`]. Nothing here runs on a request
//! path: a slow receiver only slows its own deliveries.

use std::time::{Duration, Instant};

use chrono::{TimeDelta, Utc};
use serde_json::{Value, json};
use tokio::{sync::watch, task::JoinSet};

use crate::{
    domain::webhook::signature,
    remote_servers::{self, PublicOnly},
    service::AppState,
    store::webhooks::{AttemptOutcome, ClaimedDelivery},
};

/// The largest body sent: an event over it goes without its `fact` and `settings`, marked
/// `"truncated": true`, and the receiver reads the rest from the API.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// Builds the client deliveries go out with.
pub fn client(state: &AppState) -> reqwest::Client {
    let timeout = Duration::from_secs(state.config.webhook_timeout_secs);
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("Engram-Webhooks/", env!("CARGO_PKG_VERSION")));
    let builder = if state.config.webhook_allow_private { builder } else { builder.dns_resolver(PublicOnly) };
    // A client that cannot be built (no TLS roots) would fail every delivery; the default
    // client reports the same failure per attempt instead of stopping the server.
    builder.build().unwrap_or_default()
}

/// Sends due deliveries until `stop` turns true: claims while fewer than
/// `ENGRAM_WEBHOOK_CONCURRENCY` are in flight, each sent by a task of its own, so a
/// receiver that hangs holds one slot (and a tenant at most its share, see
/// [`Store::claim_delivery`](crate::store::Store::claim_delivery)) instead of a sender
/// every tenant needs.
pub async fn run(state: AppState, client: reqwest::Client, mut stop: watch::Receiver<bool>) {
    let poll = Duration::from_millis(state.config.job_poll_ms);
    let lease = Duration::from_secs(state.config.webhook_timeout_secs * 2 + 10);
    let per_tenant = i64::try_from(state.config.webhook_per_tenant()).unwrap_or(i64::MAX);
    // Dropped on return, which aborts the sends: their leases run out and they are sent again.
    let mut sending = JoinSet::new();
    while !*stop.borrow() {
        // Woken by every commit that queued deliveries, by a manual redelivery and by a
        // send ending; deliveries another replica queued, or retries that became due, are
        // polled for (by a read: the claim's write transaction only when one is due).
        // Worker-only: only the sender waits for queued deliveries.
        let woken = state.store.deliveries_queued().notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        while sending.try_join_next().is_some() {}
        if sending.len() < state.config.webhook_concurrency {
            // Worker-only: only the sender checks for due deliveries.
            let claimed = match state.store.delivery_due(Utc::now()).await {
                // Worker-only: only the sender claims deliveries.
                Ok(true) => state.store.claim_delivery(Utc::now() + lease, per_tenant).await,
                Ok(false) => Ok(None),
                Err(e) => Err(e),
            };
            match claimed {
                Ok(Some(claim)) => {
                    let (state, client) = (state.clone(), client.clone());
                    sending.spawn(async move { deliver(&state, &client, &claim).await });
                    continue;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "claiming a webhook delivery failed"),
            }
        }
        tokio::select! {
            () = &mut woken => {}
            Some(_) = sending.join_next() => {}
            () = tokio::time::sleep(poll) => {}
            _ = stop.changed() => {}
        }
    }
}

/// The body of a delivery: the Standard Webhooks envelope around the event, cut down
/// when over [`MAX_BODY_BYTES`].
pub fn body(event: &crate::domain::event::Event) -> Vec<u8> {
    let envelope = |event: Value| json!({"type": event["type"], "timestamp": event["created_at"], "data": event});
    let full = serde_json::to_value(event).unwrap_or_default();
    let bytes = serde_json::to_vec(&envelope(full.clone())).unwrap_or_default();
    if bytes.len() <= MAX_BODY_BYTES {
        return bytes;
    }
    let mut cut = full;
    if let Some(data) = cut.get_mut("data").and_then(Value::as_object_mut) {
        data.remove("fact");
        data.remove("settings");
    }
    cut["truncated"] = Value::Bool(true);
    serde_json::to_vec(&envelope(cut)).unwrap_or_default()
}

/// One attempt: send, then record it (delivered, or failed with its retry).
async fn deliver(state: &AppState, client: &reqwest::Client, claim: &ClaimedDelivery) {
    let started = Instant::now();
    let Sent { status_code, error, retry_after } = send(state, client, claim).await;
    let took = started.elapsed();
    let outcome = AttemptOutcome {
        status_code: status_code.map(i32::from),
        error: error.as_deref(),
        duration_ms: i64::try_from(took.as_millis()).unwrap_or(i64::MAX),
    };
    metrics::histogram!("engram_webhook_delivery_seconds").record(took.as_secs_f64());
    let (subscription_id, event_id, event_type) = (claim.subscription_id, claim.event_id, claim.event.kind.as_str());
    let Some(error) = &error else {
        metrics::counter!("engram_webhook_deliveries_total", "outcome" => "delivered").increment(1);
        tracing::debug!(%subscription_id, event_id, event_type, "webhook delivered");
        // Worker-only: only the sender records a delivery's outcome.
        if let Err(e) = state.store.delivered(claim, &outcome).await {
            tracing::warn!(%subscription_id, event_id, error = %e, "recording a delivery failed; it will be sent again");
        }
        return;
    };
    let delay =
        super::runner::backoff(state.config.webhook_retry_base_ms, claim.attempts).max(retry_after.unwrap_or_default());
    let disable_after = TimeDelta::seconds(i64::try_from(state.config.webhook_disable_after_secs).unwrap_or(i64::MAX));
    // Worker-only: only the sender records a failed attempt and its retry.
    let recorded = state
        .store
        .delivery_failed(claim, &outcome, Utc::now() + delay, state.config.webhook_max_attempts, disable_after)
        .await;
    match recorded {
        Ok(Some(failed)) => {
            let outcome = if failed.dead { "dead" } else { "failed" };
            metrics::counter!("engram_webhook_deliveries_total", "outcome" => outcome).increment(1);
            tracing::warn!(%subscription_id, event_id, event_type, attempts = claim.attempts, dead = failed.dead, error, "webhook delivery failed");
            if failed.disabled {
                metrics::counter!("engram_webhook_subscriptions_disabled_total").increment(1);
                tracing::warn!(%subscription_id, "webhook subscription disabled: its deliveries kept failing");
            }
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(%subscription_id, event_id, error = %e, "recording a failed delivery failed"),
    }
}

/// How a send went: the receiver's status, what went wrong unless it was a 2xx, and the
/// wait it asked for.
#[derive(Debug, Default)]
struct Sent {
    status_code: Option<u16>,
    error: Option<String>,
    retry_after: Option<Duration>,
}

impl Sent {
    fn failed(error: String) -> Sent {
        Sent { error: Some(error), ..Sent::default() }
    }
}

/// POSTs the event.
async fn send(state: &AppState, client: &reqwest::Client, claim: &ClaimedDelivery) -> Sent {
    let Ok(url) = reqwest::Url::parse(&claim.url) else { return Sent::failed("invalid url".into()) };
    if !state.config.webhook_allow_private && remote_servers::literal_not_public(&url) {
        return Sent::failed(format!("refused: {}", remote_servers::NOT_PUBLIC));
    }
    let body = body(&claim.event);
    let id = format!("msg_{}_{}", claim.subscription_id.simple(), claim.event_id);
    let timestamp = Utc::now().timestamp();
    let Some(signed) = signature(&claim.secret, &id, timestamp, &body) else {
        return Sent::failed("the subscription's secret is unusable; rotate it".into());
    };
    let request = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signed)
        .body(body);
    match request.send().await {
        Ok(response) if response.status().is_success() => {
            Sent { status_code: Some(response.status().as_u16()), ..Sent::default() }
        }
        Ok(response) => {
            let status = response.status();
            let note = if status.is_redirection() { " (redirects are not followed)" } else { "" };
            Sent {
                status_code: Some(status.as_u16()),
                error: Some(format!("HTTP {}{note}", status.as_u16())),
                retry_after: remote_servers::retry_after(response.headers()),
            }
        }
        Err(e) => {
            let refused = e.is_connect() && !state.config.webhook_allow_private;
            let reason = remote_servers::failure(&e).reason;
            let note = if refused { " (or its address is not public)" } else { "" };
            Sent::failed(format!("{reason}{note}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::event::{ActorView, Event};

    fn event(text: &str) -> Event {
        Event {
            id: 7,
            kind: "fact.added".into(),
            created_at: Utc::now(),
            agent_id: Some("bot".into()),
            external_ref: Some("ann".into()),
            actor: ActorView { kind: "api".into(), job_id: None },
            data: json!({"fact_id": "f", "fact": {"fact": text}}),
        }
    }

    #[test]
    fn a_body_over_the_cap_goes_without_the_fact_and_says_so() {
        let small: Value = serde_json::from_slice(&body(&event("Likes tea"))).unwrap();
        assert_eq!(small["type"], "fact.added");
        assert_eq!(small["data"]["data"]["fact"]["fact"], "Likes tea");
        assert!(small["data"].get("truncated").is_none());
        let large = body(&event(&"x".repeat(MAX_BODY_BYTES)));
        assert!(large.len() <= MAX_BODY_BYTES, "{}", large.len());
        let large: Value = serde_json::from_slice(&large).unwrap();
        assert_eq!(large["data"]["truncated"], true);
        assert_eq!(large["data"]["data"]["fact_id"], "f", "the ids stay");
        assert!(large["data"]["data"].get("fact").is_none());
    }
}
