//! Webhook subscriptions and their deliveries. Every write here is a write transaction
//! (on SQLite it waits its turn in the writers' queue): the senders write at the pace of
//! their deliveries, and a write on the pool would meet them in SQLite's busy handler,
//! which does not take turns (the contract test saw a subscription's PATCH starve for
//! 10 s). Deliveries are queued by the event's own
//! statement (see [`super::events`]) and run like jobs: claimed under a lease, every later
//! write fenced by its token, retried with backoff until `dead`, redelivered by hand. A
//! subscription has at most one delivery running at a time, and a tenant a bounded share
//! (the claim skips the others), and the oldest due is claimed first, so a receiver that
//! keeps up gets its events in order and one that hangs holds back no one else's.

use std::sync::LazyLock;

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Result, Store, events::EventRow, with_pool, with_tx};
use crate::domain::{
    event::{Event, types_of_key},
    ids::TenantId,
    webhook::{Attempt, Delivery, MAX_SUBSCRIPTIONS, Subscription},
};

#[derive(sqlx::FromRow)]
struct SubscriptionRow {
    id: Uuid,
    url: String,
    event_types: String,
    enabled: bool,
    disabled_reason: Option<String>,
    failing_since: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl From<SubscriptionRow> for Subscription {
    fn from(row: SubscriptionRow) -> Subscription {
        Subscription {
            id: row.id,
            url: row.url,
            event_types: types_of_key(&row.event_types),
            enabled: row.enabled,
            disabled_reason: row.disabled_reason,
            failing_since: row.failing_since,
            created_at: row.created_at,
            updated_at: row.updated_at,
        }
    }
}

const SUBSCRIPTION_COLUMNS: &str =
    "id, url, event_types, enabled, disabled_reason, failing_since, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    event_id: i64,
    event_type: String,
    status: String,
    attempts: i32,
    last_error: Option<String>,
    run_at: DateTime<Utc>,
    delivered_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
}

impl From<DeliveryRow> for Delivery {
    fn from(row: DeliveryRow) -> Delivery {
        let pending = matches!(row.status.as_str(), "queued" | "failed");
        Delivery {
            event_id: row.event_id,
            event_type: row.event_type,
            status: row.status,
            attempts: row.attempts,
            last_error: row.last_error,
            next_attempt_at: pending.then_some(row.run_at),
            delivered_at: row.delivered_at,
            created_at: row.created_at,
        }
    }
}

/// `$1` tenant, `$2` subscription, then a filter.
const DELIVERY_SELECT: &str = "SELECT d.event_id, e.type AS event_type, d.status, d.attempts, d.last_error, d.run_at, \
       d.delivered_at, d.created_at \
     FROM webhook_deliveries d JOIN events e ON e.tenant_id = d.tenant_id AND e.id = d.event_id \
     WHERE d.tenant_id = $1 AND d.subscription_id = $2";

/// A page of deliveries, newest first: `$3` status (or NULL), `$4` before this event id
/// (or NULL), `$5` limit.
static LIST_DELIVERIES: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{DELIVERY_SELECT} AND ($3 IS NULL OR d.status = $3) AND ($4 IS NULL OR d.event_id < $4) \
         ORDER BY d.event_id DESC LIMIT $5"
    )
});
static ONE_DELIVERY: LazyLock<String> = LazyLock::new(|| format!("{DELIVERY_SELECT} AND d.event_id = $3"));

/// Claims the oldest due delivery of an enabled subscription that has none running, of a
/// tenant with fewer than `$4` running: `$1` lease token, `$2` lease end, `$3` now. The two
/// caps are what makes the senders fair: a receiver that hangs holds one of them, and one
/// tenant's receivers at most `$4`, so the others' deliveries still find a sender
/// (`webhook_deliveries_running` counts them). PostgreSQL locks the subscription row
/// (skipping one another replica is claiming for), so two claims never run one
/// subscription's deliveries at once; SQLite's write transaction serialises claims. The
/// delivery's own row is tested again: on PostgreSQL a claim whose snapshot predates
/// another's commit finds the row that one just claimed, and must not take it a second
/// time.
const CLAIM: &str = "UPDATE webhook_deliveries SET status = 'running', attempts = attempts + 1, lease_token = $1, \
       locked_until = $2, updated_at = $3 \
     WHERE (subscription_id, event_id) = ( \
       SELECT d.subscription_id, d.event_id FROM webhook_deliveries d \
       JOIN webhook_subscriptions s ON s.id = d.subscription_id \
       WHERE s.enabled \
         AND ((d.status IN ('queued', 'failed') AND d.run_at <= $3) OR (d.status = 'running' AND d.locked_until < $3)) \
         AND NOT EXISTS (SELECT 1 FROM webhook_deliveries r WHERE r.tenant_id = d.tenant_id \
                         AND r.subscription_id = d.subscription_id AND r.status = 'running' AND r.locked_until >= $3) \
         AND (SELECT count(*) FROM webhook_deliveries t WHERE t.tenant_id = d.tenant_id \
              AND t.status = 'running' AND t.locked_until >= $3) < $4 \
       ORDER BY d.run_at, d.event_id LIMIT 1 {lock}) \
       AND ((status IN ('queued', 'failed') AND run_at <= $3) OR (status = 'running' AND locked_until < $3)) \
     RETURNING subscription_id, tenant_id, event_id, attempts";
static CLAIM_PG: LazyLock<String> = LazyLock::new(|| CLAIM.replace("{lock}", "FOR UPDATE OF s SKIP LOCKED"));
static CLAIM_SQLITE: LazyLock<String> = LazyLock::new(|| CLAIM.replace("{lock}", ""));

/// What a claim reads beside the delivery: the subscription's receiver and key, and the event.
#[derive(sqlx::FromRow)]
struct ClaimRow {
    url: String,
    secret: String,
    #[sqlx(flatten)]
    event: EventRow,
}

/// What sending a claimed delivery needs: where, the key, and the event.
#[derive(Debug)]
pub struct ClaimedDelivery {
    pub subscription_id: Uuid,
    pub tenant_id: String,
    pub event_id: i64,
    /// This attempt's number.
    pub attempts: i32,
    pub lease_token: Uuid,
    pub url: String,
    pub secret: String,
    pub event: Event,
}

/// How an attempt ended.
#[derive(Debug)]
pub struct AttemptOutcome<'a> {
    pub status_code: Option<i32>,
    /// `None`: delivered.
    pub error: Option<&'a str>,
    pub duration_ms: i64,
}

/// What recording a failed attempt did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Failed {
    pub dead: bool,
    /// The subscription was disabled by this failure.
    pub disabled: bool,
}

impl Store {
    /// Creates a subscription; `None` when the tenant holds [`MAX_SUBSCRIPTIONS`] already.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "create_subscription", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn create_subscription(
        &self,
        tenant: &TenantId,
        url: &str,
        event_types: &str,
        enabled: bool,
        secret: &str,
    ) -> Result<Option<Subscription>> {
        let sql = format!(
            "INSERT INTO webhook_subscriptions (id, tenant_id, url, event_types, enabled, secret, created_at, updated_at) \
             SELECT $1, $2, $3, $4, $5, $6, $7, $7 \
             WHERE (SELECT count(*) FROM webhook_subscriptions WHERE tenant_id = $2) < $8 \
             RETURNING {SUBSCRIPTION_COLUMNS}"
        );
        let mut tx = self.begin_write().await?;
        let row: Option<SubscriptionRow> = with_tx!(tx, tx => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(Uuid::now_v7())
                .bind(tenant.as_str())
                .bind(url)
                .bind(event_types)
                .bind(enabled)
                .bind(secret)
                .bind(super::now())
                .bind(MAX_SUBSCRIPTIONS)
                .fetch_optional(&mut **tx)
                .await?
        });
        tx.commit().await?;
        if row.is_some() {
            self.subscriptions.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(row.map(Subscription::from))
    }

    /// The tenant's subscriptions, oldest first (at most [`MAX_SUBSCRIPTIONS`]).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_subscriptions", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_subscriptions(&self, tenant: &TenantId) -> Result<Vec<Subscription>> {
        let sql = format!("SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE tenant_id = $1 ORDER BY id");
        let rows: Vec<SubscriptionRow> = with_pool!(self, pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant.as_str()).fetch_all(pool).await?
        });
        super::counted(&rows);
        Ok(rows.into_iter().map(Subscription::from).collect())
    }

    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "get_subscription", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn get_subscription(&self, tenant: &TenantId, id: Uuid) -> Result<Option<Subscription>> {
        let sql = format!("SELECT {SUBSCRIPTION_COLUMNS} FROM webhook_subscriptions WHERE tenant_id = $1 AND id = $2");
        let row: Option<SubscriptionRow> = with_pool!(self, pool => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(tenant.as_str()).bind(id).fetch_optional(pool).await?
        });
        Ok(row.map(Subscription::from))
    }

    /// Changes a subscription (`None` fields keep their value). Enabling one clears its
    /// failure, so its pending deliveries are claimed again.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "update_subscription", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn update_subscription(
        &self,
        tenant: &TenantId,
        id: Uuid,
        url: Option<&str>,
        event_types: Option<&str>,
        enabled: Option<bool>,
    ) -> Result<Option<Subscription>> {
        let sql = format!(
            "UPDATE webhook_subscriptions SET url = COALESCE($3, url), event_types = COALESCE($4, event_types), \
               enabled = COALESCE($5, enabled), \
               failing_since = CASE WHEN $5 THEN NULL ELSE failing_since END, \
               disabled_reason = CASE WHEN $5 THEN NULL ELSE disabled_reason END, updated_at = $6 \
             WHERE tenant_id = $1 AND id = $2 RETURNING {SUBSCRIPTION_COLUMNS}"
        );
        let mut tx = self.begin_write().await?;
        let row: Option<SubscriptionRow> = with_tx!(tx, tx => {
            sqlx::query_as(sqlx::AssertSqlSafe(sql))
                .bind(tenant.as_str())
                .bind(id)
                .bind(url)
                .bind(event_types)
                .bind(enabled)
                .bind(super::now())
                .fetch_optional(&mut **tx)
                .await?
        });
        tx.commit().await?;
        Ok(row.map(Subscription::from))
    }

    /// Deletes a subscription with its deliveries; whether it existed.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delete_subscription", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delete_subscription(&self, tenant: &TenantId, id: Uuid) -> Result<bool> {
        let sql = "DELETE FROM webhook_subscriptions WHERE tenant_id = $1 AND id = $2";
        let mut tx = self.begin_write().await?;
        let done = with_tx!(tx, tx => {
            sqlx::query(sql).bind(tenant.as_str()).bind(id).execute(&mut **tx).await?.rows_affected()
        });
        tx.commit().await?;
        self.note_subscriptions().await?;
        Ok(done > 0)
    }

    /// Replaces a subscription's secret; whether it existed.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "rotate_secret", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn rotate_secret(&self, tenant: &TenantId, id: Uuid, secret: &str) -> Result<bool> {
        let sql = "UPDATE webhook_subscriptions SET secret = $3, updated_at = $4 WHERE tenant_id = $1 AND id = $2";
        let mut tx = self.begin_write().await?;
        let done = with_tx!(tx, tx => {
            sqlx::query(sql).bind(tenant.as_str()).bind(id).bind(secret).bind(super::now()).execute(&mut **tx).await?.rows_affected()
        });
        tx.commit().await?;
        Ok(done > 0)
    }

    /// A page of a subscription's deliveries, newest first.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_deliveries", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_deliveries(
        &self,
        tenant: &TenantId,
        subscription: Uuid,
        status: Option<&str>,
        before: Option<i64>,
        limit: i64,
    ) -> Result<Vec<Delivery>> {
        let rows: Vec<DeliveryRow> = with_pool!(self, pool => {
            sqlx::query_as(LIST_DELIVERIES.as_str())
                .bind(tenant.as_str())
                .bind(subscription)
                .bind(status)
                .bind(before)
                .bind(limit)
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        Ok(rows.into_iter().map(Delivery::from).collect())
    }

    /// One delivery and its attempts, oldest first.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delivery", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delivery(
        &self,
        tenant: &TenantId,
        subscription: Uuid,
        event_id: i64,
    ) -> Result<Option<(Delivery, Vec<Attempt>)>> {
        let attempts_sql = "SELECT attempt, attempted_at, status_code, error, duration_ms FROM webhook_attempts \
                            WHERE subscription_id = $1 AND event_id = $2 ORDER BY attempt";
        type AttemptRow = (i32, DateTime<Utc>, Option<i32>, Option<String>, i64);
        let found: Option<(DeliveryRow, Vec<AttemptRow>)> = with_pool!(self, pool => {
            let row: Option<DeliveryRow> = sqlx::query_as(ONE_DELIVERY.as_str())
                .bind(tenant.as_str())
                .bind(subscription)
                .bind(event_id)
                .fetch_optional(pool)
                .await?;
            match row {
                None => None,
                Some(row) => Some((
                    row,
                    sqlx::query_as(attempts_sql).bind(subscription).bind(event_id).fetch_all(pool).await?,
                )),
            }
        });
        Ok(found.map(|(row, attempts)| {
            let attempts = attempts
                .into_iter()
                .map(|(attempt, attempted_at, status_code, error, duration_ms)| Attempt {
                    attempt,
                    attempted_at,
                    status_code,
                    error,
                    duration_ms,
                })
                .collect();
            (Delivery::from(row), attempts)
        }))
    }

    /// Queues a delivery again now (one more attempt, whatever its state but running);
    /// `None` when there is no such delivery or it is running.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "redeliver", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn redeliver(&self, tenant: &TenantId, subscription: Uuid, event_id: i64) -> Result<Option<Delivery>> {
        let sql = "UPDATE webhook_deliveries SET status = 'queued', run_at = $4, updated_at = $4 \
                   WHERE tenant_id = $1 AND subscription_id = $2 AND event_id = $3 AND status <> 'running'";
        let mut tx = self.begin_write().await?;
        let done = with_tx!(tx, tx => {
            sqlx::query(sql).bind(tenant.as_str()).bind(subscription).bind(event_id).bind(super::now())
                .execute(&mut **tx).await?.rows_affected()
        });
        tx.commit().await?;
        if done == 0 {
            return Ok(None);
        }
        Ok(self.delivery(tenant, subscription, event_id).await?.map(|(delivery, _)| delivery))
    }

    /// Whether a delivery is due (or its lease ran out): a read, so that an idle sender
    /// polls without taking SQLite's write lock.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delivery_due", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delivery_due(&self, now: DateTime<Utc>) -> Result<bool> {
        let sql = "SELECT EXISTS (SELECT 1 FROM webhook_deliveries \
                     WHERE (status IN ('queued', 'failed') AND run_at <= $1) OR (status = 'running' AND locked_until < $1))";
        with_pool!(self, pool => sqlx::query_scalar(sql).bind(now).fetch_one(pool).await)
    }

    /// Claims the next due delivery (see [`CLAIM`]) of a tenant with fewer than
    /// `per_tenant` in flight, with what sending it needs.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "claim_delivery", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn claim_delivery(&self, lease_until: DateTime<Utc>, per_tenant: i64) -> Result<Option<ClaimedDelivery>> {
        let token = Uuid::now_v7();
        let claim = self.dialect(CLAIM_PG.as_str(), CLAIM_SQLITE.as_str());
        let read = "SELECT s.url, s.secret, e.id, e.type, e.created_at, e.agent_id, e.external_ref, e.actor, \
                      e.actor_job_id, e.data \
                    FROM webhook_subscriptions s JOIN events e ON e.tenant_id = $1 AND e.id = $2 WHERE s.id = $3";
        let mut tx = self.begin_write().await?;
        let claimed: Option<(Uuid, String, i64, i32, ClaimRow)> = with_tx!(tx, tx => {
            let claimed: Option<(Uuid, String, i64, i32)> =
                sqlx::query_as(claim)
                    .bind(token)
                    .bind(lease_until)
                    .bind(super::now())
                    .bind(per_tenant)
                    .fetch_optional(&mut **tx)
                    .await?;
            match claimed {
                None => None,
                Some((subscription, tenant, event_id, attempts)) => {
                    let row: ClaimRow =
                        sqlx::query_as(read).bind(&tenant).bind(event_id).bind(subscription).fetch_one(&mut **tx).await?;
                    Some((subscription, tenant, event_id, attempts, row))
                }
            }
        });
        tx.commit().await?;
        Ok(claimed.map(|(subscription_id, tenant_id, event_id, attempts, row)| ClaimedDelivery {
            subscription_id,
            tenant_id,
            event_id,
            attempts,
            lease_token: token,
            url: row.url,
            secret: row.secret,
            event: Event::from(row.event),
        }))
    }

    /// Records a delivered attempt: the delivery is done and its subscription no longer
    /// failing. `false` when the lease was lost meanwhile (nothing is written).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delivered", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delivered(&self, claim: &ClaimedDelivery, outcome: &AttemptOutcome<'_>) -> Result<bool> {
        let now = super::now();
        let done_sql = "UPDATE webhook_deliveries SET status = 'delivered', delivered_at = $4, last_error = NULL, \
                        lease_token = NULL, locked_until = NULL, updated_at = $4 \
                        WHERE subscription_id = $1 AND event_id = $2 AND lease_token = $3 AND status = 'running'";
        let healthy_sql =
            "UPDATE webhook_subscriptions SET failing_since = NULL WHERE id = $1 AND failing_since IS NOT NULL";
        let mut tx = self.begin_write().await?;
        let done = with_tx!(tx, tx => {
            sqlx::query(done_sql).bind(claim.subscription_id).bind(claim.event_id).bind(claim.lease_token).bind(now)
                .execute(&mut **tx).await?.rows_affected()
        });
        if done != 1 {
            return Ok(false);
        }
        with_tx!(tx, tx => sqlx::query(healthy_sql).bind(claim.subscription_id).execute(&mut **tx).await.map(drop))?;
        record_attempt(&mut tx, claim, outcome, now).await?;
        tx.commit().await?;
        Ok(true)
    }

    /// Records a failed attempt: retried at `retry_at`, or `dead` once `max_attempts` are
    /// used. The subscription is failing since its first failure after a success, and is
    /// disabled once that is `disable_after` ago. `None` when the lease was lost.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "delivery_failed", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn delivery_failed(
        &self,
        claim: &ClaimedDelivery,
        outcome: &AttemptOutcome<'_>,
        retry_at: DateTime<Utc>,
        max_attempts: i32,
        disable_after: chrono::TimeDelta,
    ) -> Result<Option<Failed>> {
        let now = super::now();
        let fail_sql = "UPDATE webhook_deliveries SET status = CASE WHEN attempts >= $5 THEN 'dead' ELSE 'failed' END, \
                        last_error = $4, run_at = $6, lease_token = NULL, locked_until = NULL, updated_at = $7 \
                        WHERE subscription_id = $1 AND event_id = $2 AND lease_token = $3 AND status = 'running' \
                        RETURNING status";
        let failing_sql = "UPDATE webhook_subscriptions SET failing_since = COALESCE(failing_since, $2) WHERE id = $1 \
                           RETURNING failing_since, enabled";
        let disable_sql = "UPDATE webhook_subscriptions SET enabled = FALSE, disabled_reason = $2, updated_at = $3 \
                           WHERE id = $1 AND enabled";
        let mut tx = self.begin_write().await?;
        let status: Option<String> = with_tx!(tx, tx => {
            sqlx::query_scalar(fail_sql)
                .bind(claim.subscription_id)
                .bind(claim.event_id)
                .bind(claim.lease_token)
                .bind(outcome.error)
                .bind(max_attempts)
                .bind(retry_at)
                .bind(now)
                .fetch_optional(&mut **tx)
                .await?
        });
        let Some(status) = status else { return Ok(None) };
        let (since, enabled): (DateTime<Utc>, bool) = with_tx!(tx, tx => {
            sqlx::query_as(failing_sql).bind(claim.subscription_id).bind(now).fetch_one(&mut **tx).await?
        });
        let mut failed = Failed { dead: status == "dead", disabled: false };
        if enabled && now - since >= disable_after {
            let reason = format!(
                "disabled at {}: every delivery failed since {} (last: {})",
                now.to_rfc3339(),
                since.to_rfc3339(),
                outcome.error.unwrap_or("failed")
            );
            with_tx!(tx, tx => {
                sqlx::query(disable_sql).bind(claim.subscription_id).bind(&reason).bind(now).execute(&mut **tx).await.map(drop)
            })?;
            failed.disabled = true;
        }
        record_attempt(&mut tx, claim, outcome, now).await?;
        tx.commit().await?;
        Ok(Some(failed))
    }
}

/// Writes one attempt's row.
async fn record_attempt(
    tx: &mut super::Tx,
    claim: &ClaimedDelivery,
    outcome: &AttemptOutcome<'_>,
    now: DateTime<Utc>,
) -> Result<()> {
    let sql = "INSERT INTO webhook_attempts (subscription_id, event_id, attempt, attempted_at, status_code, error, \
               duration_ms) VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING";
    with_tx!(tx, tx => {
        sqlx::query(sql)
            .bind(claim.subscription_id)
            .bind(claim.event_id)
            .bind(claim.attempts)
            .bind(now)
            .bind(outcome.status_code)
            .bind(outcome.error)
            .bind(outcome.duration_ms)
            .execute(&mut **tx)
            .await
            .map(drop)
    })
}
