-- Events, fact history and webhooks (issue 25).
-- SQLite: as in PostgreSQL (UUIDs are blobs, times RFC 3339 text, JSON text).
--
-- `events` is an outbox: every change to memory inserts its event in the same transaction
-- as the change, so neither can exist without the other. Ids are per tenant, taken from
-- `event_counters` by the transaction's last statement: the counter row stays locked
-- until commit, so a tenant's events become visible in id order and a reader paging by
-- id never skips one that commits later. `pruned_through` is the highest id the
-- retention sweep deleted: a cursor below it is refused instead of silently missing events.
CREATE TABLE event_counters (
    tenant_id      TEXT PRIMARY KEY,
    last_id        INTEGER NOT NULL,
    pruned_through INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE events (
    tenant_id    TEXT NOT NULL,
    id           INTEGER NOT NULL,
    type         TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    agent_id     TEXT,
    -- the person the event concerns (NULL for agent settings and for an erasure's own event)
    external_ref TEXT,
    actor        TEXT NOT NULL,
    actor_job_id BLOB,
    -- the ids it concerns, the fact as it now is, counts
    data         TEXT NOT NULL,
    -- the fact whose next version (fact_versions) this event writes, if any
    version_of   BLOB,
    PRIMARY KEY (tenant_id, id)
);
-- retention (the sweeper), erasure and export
CREATE INDEX events_created ON events (created_at);
CREATE INDEX events_person ON events (tenant_id, external_ref) WHERE external_ref IS NOT NULL;

-- Every version of a fact, oldest first: kept as long as the fact (cascade), past the
-- events' retention.
CREATE TABLE fact_versions (
    tenant_id    TEXT NOT NULL,
    fact_id      BLOB NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    change       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    actor        TEXT NOT NULL,
    actor_job_id BLOB,
    fact         TEXT NOT NULL,
    PRIMARY KEY (fact_id, version)
);

-- Webhook subscriptions: `event_types` is ',a,b,' or '' for every type; `secret` signs
-- deliveries (Standard Webhooks) and is shown once. `failing_since`: the first failed
-- delivery since the last success; past ENGRAM_WEBHOOK_DISABLE_AFTER_SECS the
-- subscription is disabled with `disabled_reason`.
CREATE TABLE webhook_subscriptions (
    id              BLOB PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    url             TEXT NOT NULL,
    event_types     TEXT NOT NULL,
    enabled         BOOLEAN NOT NULL,
    secret          TEXT NOT NULL,
    failing_since   TEXT,
    disabled_reason TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, id);

-- One delivery per (subscription, event), queued in the event's transaction; claimed
-- under a lease like jobs. It goes with its event (retention, erasure) and subscription.
CREATE TABLE webhook_deliveries (
    subscription_id BLOB NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    tenant_id       TEXT NOT NULL,
    event_id        INTEGER NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    run_at          TEXT NOT NULL,
    locked_until    TEXT,
    lease_token     BLOB,
    last_error      TEXT,
    delivered_at    TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    PRIMARY KEY (subscription_id, event_id),
    FOREIGN KEY (tenant_id, event_id) REFERENCES events (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (run_at) WHERE status IN ('queued', 'failed', 'running');
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (tenant_id, event_id);

CREATE TABLE webhook_attempts (
    subscription_id BLOB NOT NULL,
    event_id        INTEGER NOT NULL,
    attempt         INTEGER NOT NULL,
    attempted_at    TEXT NOT NULL,
    status_code     INTEGER,
    error           TEXT,
    duration_ms     INTEGER NOT NULL,
    PRIMARY KEY (subscription_id, event_id, attempt),
    FOREIGN KEY (subscription_id, event_id) REFERENCES webhook_deliveries (subscription_id, event_id) ON DELETE CASCADE
);

-- SQLite writes an event in one statement (`INSERT INTO events`, its id the tenant's
-- counter + 1: SQLite's writers are serialised, so no two take one id); these triggers do
-- the rest inside it, as PostgreSQL's writing CTE does in one round trip: move the
-- counter, write the fact's next version, queue the deliveries.
CREATE TRIGGER events_counter AFTER INSERT ON events
BEGIN
    INSERT INTO event_counters (tenant_id, last_id) VALUES (NEW.tenant_id, NEW.id)
        ON CONFLICT (tenant_id) DO UPDATE SET last_id = excluded.last_id;
END;
CREATE TRIGGER events_fact_version AFTER INSERT ON events WHEN NEW.version_of IS NOT NULL
BEGIN
    INSERT INTO fact_versions (tenant_id, fact_id, version, change, created_at, actor, actor_job_id, fact)
    SELECT NEW.tenant_id, f.id,
           (SELECT COALESCE(max(version), 0) + 1 FROM fact_versions WHERE fact_id = f.id),
           NEW.type, NEW.created_at, NEW.actor, NEW.actor_job_id, json_extract(NEW.data, '$.fact')
    FROM facts f WHERE f.id = NEW.version_of;
END;
CREATE TRIGGER events_deliveries AFTER INSERT ON events
BEGIN
    INSERT INTO webhook_deliveries (subscription_id, tenant_id, event_id, status, run_at, created_at, updated_at)
    SELECT id, NEW.tenant_id, NEW.id, 'queued', NEW.created_at, NEW.created_at, NEW.created_at
    FROM webhook_subscriptions
    WHERE tenant_id = NEW.tenant_id AND enabled AND (event_types = '' OR event_types LIKE '%,' || NEW.type || ',%');
END;
