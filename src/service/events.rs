//! The event feed and fact history: the REST routes (tenant-wide and per person) and the
//! admin panel read them here. A read may wait for the next event (long polling), so a
//! follower learns of a change within moments without holding a database connection.

use std::time::Duration;

use serde::Serialize;
use tokio::{sync::Notify, time::Instant};
use utoipa::ToSchema;
use uuid::Uuid;

use super::AppState;
use crate::{
    domain::{
        event::{ActorView, Event, FactVersion, parse_types, types_key},
        ids::TenantId,
        owner::Owner,
        page::limit,
    },
    service::error::ServiceError,
    store::{
        event_waiters::Waiting,
        events::{EventFilter, Feed},
    },
};

/// The largest event id a cursor may name: 2^53 − 1, the largest integer every JSON
/// client reads exactly (the spec's `maximum`).
pub const MAX_ID: i64 = (1 << 53) - 1;

/// The longest a read may wait for an event (`wait`, seconds).
pub const MAX_WAIT_SECS: u64 = 30;

/// How often a waiting read looks again when no commit of this process woke it, so that
/// events written by another replica are seen: every [`POLL`], and less often as more
/// reads wait, so that the process looks at most about [`POLLS_PER_SEC`] times a second
/// in all (a thousand reads polling every 500 ms were 2 000 queries a second).
const POLL: Duration = Duration::from_millis(500);
const POLLS_PER_SEC: u32 = 100;

fn poll_every(waiting: usize) -> Duration {
    let waiting = u32::try_from(waiting).unwrap_or(u32::MAX);
    POLL.max(Duration::from_secs(1).saturating_mul(waiting) / POLLS_PER_SEC)
}

/// How long a read waits, at most, for events held back by older transactions still
/// running (PostgreSQL's horizon: see `store::events`), and how often it looks again
/// meanwhile. Memory's own transactions last milliseconds; past this, something else
/// holds a transaction open and the read answers with what is settled.
const SETTLE: Duration = Duration::from_secs(2);
const SETTLE_STEP: Duration = Duration::from_millis(5);

/// A page of the feed.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventPage {
    /// Oldest first.
    pub items: Vec<Event>,
    /// The id of the last event read (or the `after` given, when none was): the next
    /// call's `after`. Events are never skipped: the next page starts right after it.
    pub next_cursor: i64,
}

/// What a feed read asks for: after which id, of which types (comma-separated, empty for
/// all), of which agent and person, how many, and how long to wait for the first.
#[derive(Debug, Default)]
pub struct FeedQuery<'a> {
    pub after: Option<i64>,
    pub types: Option<&'a str>,
    pub agent_id: Option<&'a str>,
    pub external_ref: Option<&'a str>,
    pub limit: Option<i64>,
    pub wait: Option<u64>,
}

/// The tenant's events after the cursor (`limit` 1–1000, default 100); with `wait`, waits
/// up to that many seconds (at most 30, and less than the request time limit) for the
/// first one. A `gone` when events after the cursor were deleted by the retention.
pub async fn feed(state: &AppState, tenant: &TenantId, query: FeedQuery<'_>) -> Result<EventPage, ServiceError> {
    if query.after.is_some_and(|after| !(0..=MAX_ID).contains(&after)) {
        return Err(ServiceError::invalid(format!("after must be 0-{MAX_ID}")));
    }
    let types = types_key(&parse_types(query.types.unwrap_or_default()).map_err(ServiceError::Invalid)?);
    let limit = limit(query.limit, 100, 1000)?;
    let wait = query.wait.unwrap_or(0);
    if wait > MAX_WAIT_SECS {
        return Err(ServiceError::invalid(format!("wait must be 0-{MAX_WAIT_SECS} seconds")));
    }
    // A wait ends a second before the request's own time limit would cut it off.
    let most = state.config.request_timeout().saturating_sub(Duration::from_secs(1));
    let started = Instant::now();
    let deadline = started + Duration::from_secs(wait).min(most);
    let settle_deadline = started + SETTLE.min(most);
    let after = query.after;
    let filter = EventFilter { after, types: &types, agent_id: query.agent_id, external_ref: query.external_ref };
    // A read that may wait counts against its tenant's waiters from the start; one that
    // does not wait has nothing to be woken by.
    let waiting = match wait {
        0 => None,
        _ => Some(state.store.event_waiters().join(tenant.as_str(), state.config.event_waiters_per_tenant).ok_or(
            ServiceError::TooMany(
                "too many reads of this tenant are waiting for events (ENGRAM_EVENT_WAITERS_PER_TENANT)",
            ),
        )?),
    };
    let never = Notify::new();
    let signal = waiting.as_ref().map_or(&never, Waiting::signal);
    loop {
        let written = signal.notified();
        tokio::pin!(written);
        written.as_mut().enable();
        let (items, held_back) = match state.store.list_events(tenant, filter, limit).await? {
            Feed::Expired(pruned) => {
                let after = query.after.unwrap_or_default();
                return Err(ServiceError::Gone(format!(
                    "events after {after} up to {pruned} were deleted by the retention \
                     (ENGRAM_EVENT_RETENTION); start again from after={pruned}"
                )));
            }
            Feed::Events { items, held_back } => (items, held_back),
        };
        let now = Instant::now();
        if held_back && now < settle_deadline {
            tokio::time::sleep(SETTLE_STEP).await;
            continue;
        }
        if !items.is_empty() || now >= deadline {
            let next_cursor = items.last().map_or(after.unwrap_or(0), |event| event.id);
            return Ok(EventPage { items, next_cursor });
        }
        tokio::select! {
            () = &mut written => {}
            () = tokio::time::sleep(poll_every(state.store.event_waiters().total()).min(deadline - now)) => {}
        }
    }
}

/// Every version of the owner's fact, oldest first; a fact stored before history was
/// kept has one version, as it is now, by an `unrecorded` actor.
pub async fn fact_history(state: &AppState, owner: Owner<'_>, id: Uuid) -> Result<Vec<FactVersion>, ServiceError> {
    let versions = state.store.fact_history(owner, id).await?;
    if !versions.is_empty() {
        return Ok(versions);
    }
    let fact = state.store.facts_by_id(owner, &[id]).await?.pop().ok_or(ServiceError::NotFound("fact"))?;
    Ok(vec![FactVersion {
        version: 1,
        change: "fact.added".into(),
        created_at: fact.created_at,
        actor: ActorView { kind: "unrecorded".into(), job_id: None },
        fact: serde_json::to_value(&fact).map_err(|e| ServiceError::Internal(e.into()))?,
    }])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waiting_reads_poll_less_often_as_more_wait() {
        assert_eq!(poll_every(0), POLL);
        assert_eq!(poll_every(50), POLL);
        assert_eq!(poll_every(100), Duration::from_secs(1));
        assert_eq!(poll_every(1000), Duration::from_secs(10), "100 polls a second in all");
        assert_eq!(poll_every(usize::MAX), Duration::from_secs(u64::from(u32::MAX)) / 100);
    }
}
