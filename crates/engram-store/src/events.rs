//! The event feed, an outbox: a change's events are gathered on its transaction
//! ([`Outbox`]) and written by [`Tx::commit`] just before the commit, so a change without
//! its event, or an event without its change, cannot be. Writing an event also writes
//! the fact's new version (fact history) and queues one delivery per matching webhook
//! subscription, in the same statement on PostgreSQL.
//!
//! Ids only grow, and a reader paging `id > cursor` must never pass an event that commits
//! later. Each dialect gets there its own way:
//! - SQLite serialises its writers, so an id is the tenant's highest plus one, read by
//!   the event's own statement from `events`' key (or from `event_counters`, where a
//!   delete took the tenant's newest ids: migration 0018).
//! - PostgreSQL commits concurrently, and a counter row locked until commit would
//!   serialise every commit of a tenant (it halved `remember` in `engram-bench load`).
//!   An id is instead the transaction's id times [`PER_TRANSACTION`] plus the event's
//!   place in it, and a reader sees only events of transactions older than every
//!   transaction of this database still running (the feed's *horizon*, from its
//!   snapshot): those can no longer change, and any event still to come has a higher id. Committed events above
//!   the horizon are held back until the transactions before them end ([`Feed::Events`]
//!   says so, and the feed waits for them briefly).

use std::sync::{
    Arc, LazyLock,
    atomic::{AtomicBool, Ordering},
};

use chrono::{DateTime, Utc};
use sqlx::types::Json;
use tokio::sync::Notify;
use uuid::Uuid;

use super::{Result, Store, Tx, event_waiters::EventWaiters, with_pool, with_tx, writer::Ending};
use crate::domain::{
    event::{Actor, ActorView, Event, EventType, FactVersion, NewEvent},
    ids::{ExternalRef, TenantId},
    owner::Owner,
};

/// The events of one transaction's changes, written at its commit.
pub struct Outbox {
    /// Who makes the transaction's changes; set by [`Store::begin_change`]. A transaction
    /// begun otherwise that records an event fails at commit rather than write an event
    /// without its actor.
    actor: Option<Actor>,
    pending: Vec<(String, NewEvent)>,
    /// The events already written by the transaction's own statements (see
    /// [`Tx::inline_event`]).
    written: Flushed,
    event_waiters: Arc<EventWaiters>,
    deliveries_queued: Arc<Notify>,
    /// Whether the store may hold a webhook subscription (see [`Store::note_subscriptions`]).
    subscriptions: Arc<AtomicBool>,
}

/// What writing an outbox wrote.
#[derive(Debug, Default)]
pub(super) struct Flushed {
    types: Vec<EventType>,
    /// Whose events they are: the tenants whose waiting readers to wake.
    tenants: Vec<String>,
    deliveries: u64,
    /// How the last event's statement also ended the writer's part (SQLite writes).
    pub(super) ended: Option<Ending>,
}

impl Outbox {
    /// After the commit: wakes the feed's readers waiting for these tenants' events (and
    /// the webhook senders, when deliveries were queued) and counts what was written.
    pub(super) fn committed(self, flushed: Flushed) {
        if flushed.types.is_empty() {
            return;
        }
        for tenant in &flushed.tenants {
            self.event_waiters.wake(tenant);
        }
        if flushed.deliveries > 0 {
            self.deliveries_queued.notify_waiters();
        }
        for kind in flushed.types {
            metrics::counter!("engram_events_written_total", "type" => kind.as_str()).increment(1);
        }
    }
}

impl Flushed {
    fn wrote(&mut self, kind: EventType, tenant: &str) {
        self.types.push(kind);
        if !self.tenants.iter().any(|t| t == tenant) {
            self.tenants.push(tenant.to_owned());
        }
    }
}

/// The types whose events also write a version of their fact (its history). A deleted
/// fact's history goes with it.
fn writes_version(kind: EventType) -> bool {
    matches!(kind, EventType::FactAdded | EventType::FactUpdated | EventType::FactSuperseded | EventType::FactRestored)
}

/// How many events one PostgreSQL transaction may write: its events' ids are its
/// transaction id times this, plus their place. An extraction job, the largest change,
/// writes at most 2 events per fact found (added or updated, and one it supersedes) for
/// at most 1000 facts, plus its own. 2^12 leaves transaction ids up to 2^41 below the
/// largest id every JSON client reads exactly (2^53).
pub const PER_TRANSACTION: usize = 1 << 12;

/// PostgreSQL's parts of writing one event, as three CTEs: `ev` inserts the event, with
/// an id from the transaction's id and the event's `{place}` in it; `version` inserts the
/// fact's `{version}`th version when `{stored}` holds; `delivery` queues one delivery per
/// enabled subscription of the tenant (`$1`) to the event's type (and returns one row
/// each). Each `{…}` is an SQL expression filled in by the statement using them, and
/// `{from}` the rows they are computed over (none: one row). One template for both
/// statements that write events, so that they cannot drift apart. No lock is taken
/// beyond the rows inserted.
pub(super) fn event_ctes(parts: &[(&str, &str)]) -> String {
    let template = "ev AS ( \
       INSERT INTO events (tenant_id, id, type, created_at, agent_id, external_ref, actor, actor_job_id, data, \
         version_of) \
       SELECT $1, pg_current_xact_id()::text::bigint * {per} + {place}, {type}, {now}, {agent}, {person}, {actor}, \
         {job}, {data}, {fact_id} {from} \
       RETURNING id), \
     version AS ( \
       INSERT INTO fact_versions (tenant_id, fact_id, version, change, created_at, actor, actor_job_id, fact) \
       SELECT $1, {fact_id}, {version}, {type}, {now}, {actor}, {job}, {fact} {from} WHERE {stored}), \
     delivery AS ( \
       INSERT INTO webhook_deliveries (subscription_id, tenant_id, event_id, status, run_at, created_at, updated_at) \
       SELECT s.id, $1, ev.id, 'queued', {now}, {now}, {now} FROM webhook_subscriptions s CROSS JOIN ev \
       WHERE s.tenant_id = $1 AND s.enabled AND (s.event_types = '' OR s.event_types LIKE '%,' || {type} || ',%') \
       RETURNING 1)";
    let per = PER_TRANSACTION.to_string();
    parts
        .iter()
        .chain(&[("per", per.as_str())])
        .fold(template.to_owned(), |sql, (name, expression)| sql.replace(&format!("{{{name}}}"), expression))
}

/// Writes one event and returns how many deliveries it queued: the event (`$1` tenant,
/// `$2` type, `$3` now, `$4` agent, `$5` person, `$6` actor, `$7` actor's job, `$8` data,
/// `$9` the fact whose version it writes, `$11` its place in the transaction) and the
/// fact's next version when `$9` names a fact still stored (`$10` the fact). One round
/// trip.
static WRITE_PG: LazyLock<String> = LazyLock::new(|| {
    let ctes = event_ctes(&[
        ("place", "$11"),
        ("type", "$2"),
        ("now", "$3"),
        ("agent", "$4"),
        ("person", "$5"),
        ("actor", "$6"),
        ("job", "$7"),
        ("data", "$8"),
        ("fact_id", "$9"),
        ("fact", "$10"),
        ("version", "(SELECT COALESCE(max(version), 0) + 1 FROM fact_versions WHERE fact_id = $9)"),
        ("stored", "EXISTS (SELECT 1 FROM facts WHERE id = $9)"),
        ("from", ""),
    ]);
    format!("WITH {ctes} SELECT count(*) FROM delivery")
});

/// SQLite, the same in one statement: the id is the tenant's highest + 1 (SQLite's
/// writers are serialised), the highest being its newest event's or, when deletes took
/// the newest, the one they left in `event_counters` (read, not written: a page less per
/// change, see migration 0018); the migration's triggers write the fact's version and
/// queue the deliveries. `$1` tenant, then as [`WRITE_PG`]'s `$2`–`$9`.
const WRITE_SQLITE: &str = "INSERT INTO events \
     (tenant_id, id, type, created_at, agent_id, external_ref, actor, actor_job_id, data, version_of) \
     VALUES ($1, max(COALESCE((SELECT max(id) FROM events WHERE tenant_id = $1), 0), \
                     COALESCE((SELECT last_id FROM event_counters WHERE tenant_id = $1), 0)) + 1, \
             $2, $3, $4, $5, $6, $7, $8, $9)";
/// [`WRITE_SQLITE`] for a write transaction's last event, and its commit: one round trip
/// to the connection's thread for both (see `store::writer`).
static WRITE_SQLITE_AND_COMMIT: LazyLock<String> =
    LazyLock::new(|| format!("{WRITE_SQLITE}; {}", Ending::Commit.sql()));
static WRITE_SQLITE_AND_RELEASE: LazyLock<String> =
    LazyLock::new(|| format!("{WRITE_SQLITE}; {}", Ending::Release.sql()));

/// A page of the feed: `$1` tenant, `$2` after, `$3` agent (or NULL), `$4` person (or
/// NULL), `$5` types (`types_key` form, '' for all), `$6` limit; each row with the
/// statement's horizon (`{horizon}`: none on SQLite). The primary key `(tenant_id, id)`
/// serves it.
const LIST: &str = "SELECT id, type, created_at, agent_id, external_ref, actor, actor_job_id, data, \
       {horizon} AS horizon FROM events \
     WHERE tenant_id = $1 AND id > $2 AND ($3 IS NULL OR agent_id = $3) AND ($4 IS NULL OR external_ref = $4) \
     AND ($5 = '' OR $5 LIKE '%,' || type || ',%') ORDER BY id LIMIT $6";
/// The lowest id a transaction still running may give an event, in [`WRITE_PG`]'s ids:
/// the oldest transaction the statement's snapshot sees running, or, when none is, the
/// first not yet begun. Transactions running in another database of the server cannot
/// write this one's events and are left out (`pg_stat_activity`, read after the
/// snapshot, names only transactions still running; without the privilege to see another
/// role's sessions, they count, which only delays the feed).
static LIST_PG: LazyLock<String> = LazyLock::new(|| {
    let horizon = format!(
        "(SELECT COALESCE(min(x::text::bigint), max(pg_snapshot_xmax(s)::text::bigint)) * {PER_TRANSACTION} \
          FROM (SELECT pg_current_snapshot() AS s) snapshot \
          LEFT JOIN LATERAL pg_snapshot_xip(s) AS x ON x::text::bigint % 4294967296 NOT IN ( \
            SELECT backend_xid::text::bigint FROM pg_stat_activity \
            WHERE datname IS DISTINCT FROM current_database() AND backend_xid IS NOT NULL))"
    );
    LIST.replace("{horizon}", &horizon)
});
static LIST_SQLITE: LazyLock<String> = LazyLock::new(|| LIST.replace("{horizon}", "NULL"));

/// Remembers the highest id the retention deletes (`$1` the cutoff), in a counter row
/// made by the first prune. SQLite's row also holds the highest id given (`last_id`),
/// which the delete's trigger raises when the prune takes the tenant's newest events.
const MARK_PRUNED_SQLITE: &str = "INSERT INTO event_counters (tenant_id, last_id, pruned_through) \
     SELECT tenant_id, max(id), max(id) FROM events WHERE created_at < $1 GROUP BY tenant_id \
     ON CONFLICT (tenant_id) DO UPDATE SET pruned_through = max(pruned_through, excluded.pruned_through)";
const MARK_PRUNED_PG: &str = "INSERT INTO event_counters AS c (tenant_id, pruned_through) \
     SELECT tenant_id, max(id) FROM events WHERE created_at < $1 GROUP BY tenant_id \
     ON CONFLICT (tenant_id) DO UPDATE SET pruned_through = GREATEST(c.pruned_through, excluded.pruned_through)";

/// An event as its columns read it (the feed, the export, a delivery).
#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    id: i64,
    #[sqlx(rename = "type")]
    kind: String,
    created_at: DateTime<Utc>,
    agent_id: Option<String>,
    external_ref: Option<String>,
    actor: String,
    actor_job_id: Option<Uuid>,
    data: Json<serde_json::Value>,
}

impl From<EventRow> for Event {
    fn from(row: EventRow) -> Event {
        Event {
            id: row.id,
            kind: row.kind,
            created_at: row.created_at,
            agent_id: row.agent_id,
            external_ref: row.external_ref,
            actor: ActorView { kind: row.actor, job_id: row.actor_job_id },
            data: row.data.0,
        }
    }
}

#[derive(sqlx::FromRow)]
struct VersionRow {
    version: i32,
    change: String,
    created_at: DateTime<Utc>,
    actor: String,
    actor_job_id: Option<Uuid>,
    fact: Json<serde_json::Value>,
}

/// Which events a reader wants: after which id (none: from the oldest kept), of which
/// types (`types_key` form, empty for all), of which agent and person.
#[derive(Debug, Clone, Copy)]
pub struct EventFilter<'a> {
    pub after: Option<i64>,
    pub types: &'a str,
    pub agent_id: Option<&'a str>,
    pub external_ref: Option<&'a str>,
}

/// A page of the feed, or why the cursor cannot be served.
#[derive(Debug)]
pub enum Feed {
    /// The events after the cursor, oldest first. `held_back`: committed events past the
    /// page wait for older transactions still running (PostgreSQL's horizon, see the
    /// module docs); reading again in a moment returns them.
    Events { items: Vec<Event>, held_back: bool },
    /// The cursor is older than the retention: events after it were deleted, the highest
    /// of them is this.
    Expired(i64),
}

/// A feed row: the event, and the horizon of the statement that read it.
#[derive(sqlx::FromRow)]
struct FeedRow {
    #[sqlx(flatten)]
    event: EventRow,
    horizon: Option<i64>,
}

/// Whether the retention deleted events after the cursor `after` (`pruned`: the highest
/// id it deleted). A reader without a cursor starts from the oldest event kept.
fn expired(after: Option<i64>, pruned: Option<i64>) -> bool {
    matches!((after, pruned), (Some(after), Some(pruned)) if after < pruned)
}

impl Store {
    /// Opens a write transaction whose changes are made by `actor`: their events carry it.
    pub async fn begin_change(&self, actor: Actor) -> Result<Tx> {
        let mut tx = self.begin_write().await?;
        tx.1.actor = Some(actor);
        Ok(tx)
    }

    /// [`Store::begin_change`] for a change that serialises the writers of `owner`'s
    /// memory (see [`Tx::insert_fact`]): the owner's lock comes with the `BEGIN`, in its
    /// round trip.
    pub async fn begin_owner_change(&self, actor: Actor, owner: Owner<'_>) -> Result<Tx> {
        let mut tx = self.begin_write_locking(Some(owner)).await?;
        tx.1.actor = Some(actor);
        Ok(tx)
    }

    pub(super) fn outbox(&self) -> Outbox {
        Outbox {
            actor: None,
            pending: Vec::new(),
            written: Flushed::default(),
            event_waiters: self.event_waiters.clone(),
            deliveries_queued: self.deliveries_queued.clone(),
            subscriptions: self.subscriptions.clone(),
        }
    }

    /// Reads whether any webhook subscription exists: SQLite's event statement cannot
    /// count the deliveries its trigger queued, so its commits wake the senders whenever
    /// one may exist (SQLite has one process, which makes every subscription).
    pub async fn note_subscriptions(&self) -> Result<()> {
        let sql = "SELECT EXISTS (SELECT 1 FROM webhook_subscriptions)";
        let exist: bool = with_pool!(self, pool => sqlx::query_scalar(sql).fetch_one(pool).await?);
        self.subscriptions.store(exist, Ordering::Relaxed);
        Ok(())
    }

    /// The reads waiting for events, woken by each commit of this process that wrote
    /// events of their tenant.
    pub fn event_waiters(&self) -> &Arc<EventWaiters> {
        &self.event_waiters
    }

    /// Signalled after each commit of this process that queued webhook deliveries, and by
    /// [`Store::wake_senders`].
    pub fn deliveries_queued(&self) -> &Notify {
        &self.deliveries_queued
    }

    /// Wakes this process's webhook senders (a delivery was queued again by hand).
    pub fn wake_senders(&self) {
        self.deliveries_queued.notify_waiters();
    }

    /// The tenant's events after `filter.after`, oldest first, at most `limit`; `Expired`
    /// when the retention deleted events after a cursor given.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "list_events", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn list_events(&self, tenant: &TenantId, filter: EventFilter<'_>, limit: i64) -> Result<Feed> {
        let pruned = "SELECT pruned_through FROM event_counters WHERE tenant_id = $1";
        let list = self.dialect(LIST_PG.as_str(), LIST_SQLITE.as_str());
        let (pruned, rows): (Option<i64>, Vec<FeedRow>) = with_pool!(self, pool => {
            let pruned = sqlx::query_scalar(pruned).bind(tenant.as_str()).fetch_optional(pool).await?;
            if expired(filter.after, pruned) {
                (pruned, Vec::new())
            } else {
                let rows = sqlx::query_as(list)
                    .bind(tenant.as_str())
                    .bind(filter.after.unwrap_or(0))
                    .bind(filter.agent_id)
                    .bind(filter.external_ref)
                    .bind(filter.types)
                    .bind(limit)
                    .fetch_all(pool)
                    .await?;
                (pruned, rows)
            }
        });
        super::counted(&rows);
        if let Some(pruned) = pruned.filter(|_| expired(filter.after, pruned)) {
            return Ok(Feed::Expired(pruned));
        }
        let settled = rows.iter().take_while(|row| row.horizon.is_none_or(|horizon| row.event.id < horizon)).count();
        let held_back = settled < rows.len();
        let items = rows.into_iter().take(settled).map(|row| Event::from(row.event)).collect();
        Ok(Feed::Events { items, held_back })
    }

    /// Deletes the events written before `before` (their deliveries go with them) and
    /// remembers, per tenant, the highest id deleted; returns how many.
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "prune_events", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn prune_events(&self, before: DateTime<Utc>) -> Result<u64> {
        let mark = self.dialect(MARK_PRUNED_PG, MARK_PRUNED_SQLITE);
        let mut tx = self.begin_write().await?;
        let deleted = with_tx!(tx, tx => {
            sqlx::query(mark).bind(before).execute(&mut **tx).await?;
            sqlx::query("DELETE FROM events WHERE created_at < $1").bind(before).execute(&mut **tx).await?.rows_affected()
        });
        tx.commit().await?;
        Ok(deleted)
    }

    /// Every version of the owner's fact `id`, oldest first (empty when the fact is not
    /// the owner's, has expired, or was stored before history was kept).
    #[tracing::instrument(level = "debug", name = "statement", skip_all, fields(statement = "fact_history", backend = self.backend(), rows = tracing::field::Empty))]
    pub async fn fact_history(&self, owner: Owner<'_>, id: Uuid) -> Result<Vec<FactVersion>> {
        let sql = "SELECT v.version, v.change, v.created_at, v.actor, v.actor_job_id, v.fact \
                   FROM fact_versions v JOIN facts f ON f.id = v.fact_id \
                   WHERE f.tenant_id = $1 AND f.agent_id = $2 AND f.external_ref = $3 AND f.id = $4 \
                     AND (f.expires_at IS NULL OR f.expires_at > $5) \
                   ORDER BY v.version";
        let rows: Vec<VersionRow> = with_pool!(self, pool => {
            sqlx::query_as(sql)
                .bind(owner.tenant().as_str())
                .bind(owner.agent().as_str())
                .bind(owner.user().as_str())
                .bind(id)
                .bind(super::now())
                .fetch_all(pool)
                .await?
        });
        super::counted(&rows);
        Ok(rows
            .into_iter()
            .map(|row| FactVersion {
                version: row.version,
                change: row.change,
                created_at: row.created_at,
                actor: ActorView { kind: row.actor, job_id: row.actor_job_id },
                fact: row.fact.0,
            })
            .collect())
    }
}

impl Tx {
    /// Records an event of this transaction's change, in the tenant's feed.
    pub fn record(&mut self, tenant: &str, event: NewEvent) {
        self.1.pending.push((tenant.to_owned(), event));
    }

    /// Records a fact event for its owner.
    pub fn record_fact(&mut self, owner: Owner<'_>, kind: EventType, data: crate::domain::event::EventData) {
        let event = NewEvent {
            kind,
            agent_id: Some(owner.agent().as_str().to_owned()),
            external_ref: Some(owner.user().as_str().to_owned()),
            data,
        };
        self.record(owner.tenant().as_str(), event);
    }

    /// Records an event about a person (and an agent, when given).
    pub fn record_person(
        &mut self,
        tenant: &TenantId,
        agent: Option<&str>,
        user: &ExternalRef,
        kind: EventType,
        data: crate::domain::event::EventData,
    ) {
        let event =
            NewEvent { kind, agent_id: agent.map(str::to_owned), external_ref: Some(user.as_str().to_owned()), data };
        self.record(tenant.as_str(), event);
    }

    /// Writes the pending events (see the module docs); returns their types and the
    /// deliveries they queued. On a SQLite write the last event's statement also ends the
    /// writer's part (`Flushed::ended`): one round trip for both.
    pub(super) async fn flush_events(&mut self) -> Result<Flushed> {
        let mut flushed = std::mem::take(&mut self.1.written);
        if self.1.pending.is_empty() {
            return Ok(flushed);
        }
        let Some(actor) = self.1.actor else {
            return Err(sqlx::Error::Protocol("a change recorded events without its actor".into()));
        };
        // Events written inline come first in the transaction (see `Tx::inline_event`).
        let first = flushed.types.len();
        if first + self.1.pending.len() > PER_TRANSACTION {
            return Err(sqlx::Error::Protocol(format!("a change recorded more than {PER_TRANSACTION} events")));
        }
        let pending = std::mem::take(&mut self.1.pending);
        let now = super::now();
        let postgres = self.dialect(true, false);
        let ending = self.statement_ending();
        // SQLite's trigger rows are not counted: deliveries may have been queued whenever a
        // subscription exists.
        let maybe_queued = u64::from(self.1.subscriptions.load(Ordering::Relaxed));
        let last = pending.len() - 1;
        for (place, (tenant, event)) in pending.into_iter().enumerate() {
            let sql = match (postgres, ending.filter(|_| place == last)) {
                (true, _) => WRITE_PG.as_str(),
                (false, None) => WRITE_SQLITE,
                (false, Some(Ending::Commit)) => WRITE_SQLITE_AND_COMMIT.as_str(),
                (false, Some(Ending::Release)) => WRITE_SQLITE_AND_RELEASE.as_str(),
            };
            let fact_id = event.data.fact_id.filter(|_| writes_version(event.kind));
            let fact = fact_id.and(event.data.fact.as_ref()).map(Json);
            let data = Json(&event.data);
            let queued: i64 = with_tx!(self, tx => {
                let query = sqlx::query(sql)
                    .bind(&tenant)
                    .bind(event.kind.as_str())
                    .bind(now)
                    .bind(event.agent_id.as_deref())
                    .bind(event.external_ref.as_deref())
                    .bind(actor.kind())
                    .bind(actor.job_id())
                    .bind(data)
                    .bind(fact_id);
                // PostgreSQL's statement writes the version itself, from the fact bound here,
                // makes the id from the event's place in the transaction, and counts the
                // deliveries it queued.
                if postgres {
                    let row = query.bind(fact).bind((first + place) as i64).fetch_one(&mut **tx).await?;
                    sqlx::Row::try_get::<i64, _>(&row, 0)?
                } else {
                    query.execute(&mut **tx).await?;
                    0
                }
            });
            flushed.deliveries += if postgres { queued.unsigned_abs() } else { maybe_queued };
            flushed.wrote(event.kind, &tenant);
        }
        flushed.ended = ending;
        Ok(flushed)
    }

    /// Where the event of the transaction's next change may be written by that change's
    /// own statement, saving the event's round trip (PostgreSQL statements built with
    /// [`event_ctes`]): its place in the transaction and the actor. `None` while events
    /// are pending, which must keep their places before it, and in a transaction without
    /// an actor.
    pub(super) fn inline_event(&self) -> Option<(i64, Actor)> {
        let place = self.1.written.types.len();
        match self.1.actor {
            Some(actor) if self.1.pending.is_empty() && place < PER_TRANSACTION => Some((place as i64, actor)),
            _ => None,
        }
    }

    /// Notes an event of `tenant` written at the place [`Tx::inline_event`] gave, and the
    /// deliveries it queued.
    pub(super) fn wrote_event(&mut self, kind: EventType, tenant: &str, deliveries: i64) {
        self.1.written.wrote(kind, tenant);
        self.1.written.deliveries += deliveries.unsigned_abs();
    }
}
