//! Webhooks: subscriptions a tenant makes to have its events pushed, their deliveries, and
//! the Standard Webhooks signature (<https://www.standardwebhooks.com/>) a receiver checks
//! them with: `webhook-signature: v1,<base64 of HMAC-SHA256(key, "{id}.{timestamp}.{body}")>`,
//! where the key is the secret `whsec_<base64>` decoded.

use base64::{Engine, engine::general_purpose::STANDARD};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::event::EventType;

/// Subscriptions a tenant may hold: every event is one delivery per matching
/// subscription, so this bounds what one change costs.
pub const MAX_SUBSCRIPTIONS: i64 = 25;

/// The longest receiver URL.
pub const MAX_URL_CHARS: usize = 2048;

/// What creating a subscription takes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionInput {
    /// Where deliveries are POSTed: `http` or `https`, at most 2048 characters, no user
    /// name or password. Its host must resolve to public addresses only (unless the
    /// server sets `ENGRAM_WEBHOOK_ALLOW_PRIVATE`).
    #[schema(max_length = 2048, pattern = "^https?://", example = "https://crm.example.com/engram-events")]
    pub url: String,
    /// The event types to deliver (see the events reference); empty or absent: all.
    #[serde(default)]
    pub event_types: Vec<EventType>,
    /// Default true.
    pub enabled: Option<bool>,
}

/// What a change to a subscription takes; absent fields keep their value. Enabling a
/// disabled subscription clears its failure and resumes its pending deliveries.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionPatch {
    #[schema(max_length = 2048, pattern = "^https?://")]
    pub url: Option<String>,
    pub event_types: Option<Vec<EventType>>,
    pub enabled: Option<bool>,
}

/// A subscription's URL, checked for its form (its address is checked where it is
/// resolved).
pub fn parse_url(raw: &str) -> Result<url::Url, String> {
    if raw.chars().count() > MAX_URL_CHARS {
        return Err(format!("url must be at most {MAX_URL_CHARS} characters"));
    }
    // As the spec's pattern says, in lower case (the parser would take `HTTP:` too).
    if !(raw.starts_with("http://") || raw.starts_with("https://")) {
        return Err("url must start with http:// or https://".into());
    }
    let url = url::Url::parse(raw).map_err(|_| "url is not a valid absolute URL".to_owned())?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err("url must not carry a user name or password: receivers check the signature".into());
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err("url must name a host".into());
    }
    Ok(url)
}

/// A new signing secret: `whsec_` and 32 random bytes in base64, as Standard Webhooks
/// libraries read it.
pub fn new_secret() -> String {
    format!("whsec_{}", STANDARD.encode(crate::crypto::random_bytes(32)))
}

/// The `webhook-signature` value of a message; `None` for a secret that is not
/// `whsec_<base64>` (never stored: secrets are made by [`new_secret`]).
pub fn signature(secret: &str, message_id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let key = STANDARD.decode(secret.strip_prefix("whsec_")?).ok()?;
    let mut signed = format!("{message_id}.{timestamp}.").into_bytes();
    signed.extend_from_slice(body);
    Some(format!("v1,{}", STANDARD.encode(crate::crypto::hmac_sha256(&key, &signed))))
}

/// A subscription, as the API shows it (never with its secret, but at creation).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Subscription {
    pub id: Uuid,
    pub url: String,
    /// Empty: every type.
    pub event_types: Vec<String>,
    pub enabled: bool,
    /// Why the server disabled it (its deliveries kept failing), until it is enabled again.
    pub disabled_reason: Option<String>,
    /// Since when its deliveries fail without one success (null when the last succeeded).
    pub failing_since: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// One event's delivery to one subscription.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Delivery {
    pub event_id: i64,
    pub event_type: String,
    /// `queued`, `running`, `failed` (to be retried at `next_attempt_at`), `delivered`,
    /// or `dead` (no attempt left: redeliver it by hand).
    pub status: String,
    pub attempts: i32,
    /// The last failure, by kind (`HTTP 500`, `request timed out`…).
    pub last_error: Option<String>,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub delivered_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

/// One attempt at a delivery.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Attempt {
    pub attempt: i32,
    pub attempted_at: DateTime<Utc>,
    /// The receiver's status, when it answered.
    pub status_code: Option<i32>,
    pub error: Option<String>,
    pub duration_ms: i64,
}

/// A delivery of one of the person's events, as the GDPR export holds it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ExportedDelivery {
    pub subscription_id: Uuid,
    pub event_id: i64,
    pub status: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test vector of the Standard Webhooks reference libraries.
    #[test]
    fn signatures_match_the_standard_webhooks_test_vector() {
        let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
        let signed = signature(secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, br#"{"test": 2432232314}"#);
        assert_eq!(signed.as_deref(), Some("v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="));
        assert_eq!(signature("not-a-secret", "m", 1, b""), None);
        let fresh = new_secret();
        assert!(fresh.starts_with("whsec_") && fresh.len() > 40, "{fresh}");
        assert!(signature(&fresh, "m", 1, b"{}").is_some());
    }

    #[test]
    fn urls_must_be_http_with_a_host_and_no_credentials() {
        assert!(parse_url("https://hooks.example.com/engram?x=1").is_ok());
        for bad in [
            "ftp://example.com/",
            "https://user:pw@example.com/",
            "example.com/hook",
            "file:///etc/passwd",
            "HTTP://a.b/",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        assert!(parse_url(&format!("https://example.com/{}", "a".repeat(MAX_URL_CHARS))).is_err());
    }
}
