-- Events, fact history and webhooks (issue 25).
--
-- `events` is an outbox: every change to memory inserts its event in the same transaction
-- as the change, so neither can exist without the other. Ids are per tenant, taken from
-- `event_counters` by the transaction's last statement: the counter row stays locked
-- until commit, so a tenant's events become visible in id order and a reader paging by
-- id never skips one that commits later. `pruned_through` is the highest id the
-- retention sweep deleted: a cursor below it is refused instead of silently missing events.
CREATE TABLE event_counters (
    tenant_id      TEXT PRIMARY KEY,
    last_id        BIGINT NOT NULL,
    pruned_through BIGINT NOT NULL DEFAULT 0
);
CREATE TABLE events (
    tenant_id    TEXT NOT NULL,
    id           BIGINT NOT NULL,
    type         TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    agent_id     TEXT,
    -- the person the event concerns (NULL for agent settings and for an erasure's own event)
    external_ref TEXT,
    actor        TEXT NOT NULL,
    actor_job_id UUID,
    -- the ids it concerns, the fact as it now is, counts
    data         JSONB NOT NULL,
    -- the fact whose next version (fact_versions) this event writes, if any
    version_of   UUID,
    PRIMARY KEY (tenant_id, id)
);
-- retention (the sweeper), erasure and export
CREATE INDEX events_created ON events (created_at);
CREATE INDEX events_person ON events (tenant_id, external_ref) WHERE external_ref IS NOT NULL;

-- Every version of a fact, oldest first: kept as long as the fact (cascade), past the
-- events' retention.
CREATE TABLE fact_versions (
    tenant_id    TEXT NOT NULL,
    fact_id      UUID NOT NULL REFERENCES facts (id) ON DELETE CASCADE,
    version      INTEGER NOT NULL,
    change       TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    actor        TEXT NOT NULL,
    actor_job_id UUID,
    fact         JSONB NOT NULL,
    PRIMARY KEY (fact_id, version)
);

-- Webhook subscriptions: `event_types` is ',a,b,' or '' for every type; `secret` signs
-- deliveries (Standard Webhooks) and is shown once. `failing_since`: the first failed
-- delivery since the last success; past ENGRAM_WEBHOOK_DISABLE_AFTER_SECS the
-- subscription is disabled with `disabled_reason`.
CREATE TABLE webhook_subscriptions (
    id              UUID PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    url             TEXT NOT NULL,
    event_types     TEXT NOT NULL,
    enabled         BOOLEAN NOT NULL,
    secret          TEXT NOT NULL,
    failing_since   TIMESTAMPTZ,
    disabled_reason TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX webhook_subscriptions_tenant ON webhook_subscriptions (tenant_id, id);

-- One delivery per (subscription, event), queued in the event's transaction; claimed
-- under a lease like jobs. It goes with its event (retention, erasure) and subscription.
CREATE TABLE webhook_deliveries (
    subscription_id UUID NOT NULL REFERENCES webhook_subscriptions (id) ON DELETE CASCADE,
    tenant_id       TEXT NOT NULL,
    event_id        BIGINT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    run_at          TIMESTAMPTZ NOT NULL,
    locked_until    TIMESTAMPTZ,
    lease_token     UUID,
    last_error      TEXT,
    delivered_at    TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (subscription_id, event_id),
    FOREIGN KEY (tenant_id, event_id) REFERENCES events (tenant_id, id) ON DELETE CASCADE
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (run_at) WHERE status IN ('queued', 'failed', 'running');
CREATE INDEX webhook_deliveries_event ON webhook_deliveries (tenant_id, event_id);

CREATE TABLE webhook_attempts (
    subscription_id UUID NOT NULL,
    event_id        BIGINT NOT NULL,
    attempt         INTEGER NOT NULL,
    attempted_at    TIMESTAMPTZ NOT NULL,
    status_code     INTEGER,
    error           TEXT,
    duration_ms     BIGINT NOT NULL,
    PRIMARY KEY (subscription_id, event_id, attempt),
    FOREIGN KEY (subscription_id, event_id) REFERENCES webhook_deliveries (subscription_id, event_id) ON DELETE CASCADE
);
