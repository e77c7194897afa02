-- Engram schema (PostgreSQL). Every table carries tenant_id and every query filters on it.

CREATE TABLE agent_configs (
    tenant_id               TEXT NOT NULL,
    agent_id                TEXT NOT NULL,
    memory_enabled          BOOLEAN NOT NULL,
    min_user_turns          INTEGER NOT NULL,
    max_injected_facts      INTEGER NOT NULL,
    min_confidence          DOUBLE PRECISION NOT NULL,
    extraction_instructions TEXT,
    created_at              TIMESTAMPTZ NOT NULL,
    updated_at              TIMESTAMPTZ NOT NULL,
    -- also the keyset index of the list route (ordered by agent_id)
    PRIMARY KEY (tenant_id, agent_id)
);

CREATE TABLE user_consents (
    tenant_id    TEXT NOT NULL,
    external_ref TEXT NOT NULL,
    ai_consent   BOOLEAN NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, external_ref)
);

CREATE TABLE conversations (
    id                    UUID PRIMARY KEY,
    tenant_id             TEXT NOT NULL,
    agent_id              TEXT NOT NULL,
    external_ref          TEXT NOT NULL,
    title                 TEXT,
    metadata              JSONB NOT NULL,
    status                TEXT NOT NULL,
    message_count         BIGINT NOT NULL DEFAULT 0,
    user_turns            BIGINT NOT NULL DEFAULT 0,
    last_seq              BIGINT NOT NULL DEFAULT 0,
    -- seq of the newest user message: "nothing new" compares it with the two marks below
    last_user_seq         BIGINT NOT NULL DEFAULT 0,
    extracted_through_seq BIGINT NOT NULL DEFAULT 0,
    queued_through_seq    BIGINT NOT NULL DEFAULT 0,
    created_at            TIMESTAMPTZ NOT NULL,
    updated_at            TIMESTAMPTZ NOT NULL,
    ended_at              TIMESTAMPTZ
);
-- list: most recently updated first, optionally filtered by agent or user
CREATE INDEX conversations_tenant_updated ON conversations (tenant_id, updated_at DESC, id DESC);
CREATE INDEX conversations_tenant_agent_updated ON conversations (tenant_id, agent_id, updated_at DESC, id DESC);
CREATE INDEX conversations_tenant_ref_updated ON conversations (tenant_id, external_ref, updated_at DESC, id DESC);
-- idle sweeper
CREATE INDEX conversations_open_idle ON conversations (updated_at) WHERE status = 'open';

CREATE TABLE messages (
    id              UUID PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    conversation_id UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             BIGINT NOT NULL,
    role            TEXT NOT NULL,
    content         JSONB NOT NULL,
    name            TEXT,
    tool_calls      JSONB,
    tool_call_id    TEXT,
    metadata        JSONB,
    created_at      TIMESTAMPTZ NOT NULL,
    -- read by seq (oldest first, last=N) and guarantees no duplicate seq
    UNIQUE (conversation_id, seq)
);

CREATE TABLE idempotency_keys (
    conversation_id UUID NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    tenant_id       TEXT NOT NULL,
    key             TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    response        JSONB NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (conversation_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

CREATE TABLE facts (
    id              UUID PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    external_ref    TEXT NOT NULL,
    fact            TEXT NOT NULL,
    normalized      TEXT NOT NULL,
    tags            JSONB NOT NULL,
    score           DOUBLE PRECISION,
    source          TEXT NOT NULL,
    conversation_id UUID,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    search          TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', fact)) STORED,
    -- the duplicate rule, held by the database so concurrent duplicates resolve to one row
    UNIQUE (tenant_id, agent_id, external_ref, normalized)
);
-- list newest first (ids are UUIDv7: time-ordered)
CREATE INDEX facts_owner_id ON facts (tenant_id, agent_id, external_ref, id DESC);
-- erasure across agents
CREATE INDEX facts_tenant_ref ON facts (tenant_id, external_ref);
CREATE INDEX facts_search ON facts USING GIN (search);

CREATE TABLE jobs (
    id              UUID PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    agent_id        TEXT NOT NULL,
    external_ref    TEXT NOT NULL,
    conversation_id UUID NOT NULL,
    through_seq     BIGINT NOT NULL,
    facts_added     INTEGER,
    last_error      TEXT,
    run_at          TIMESTAMPTZ NOT NULL,
    locked_until    TIMESTAMPTZ,
    lease_token     UUID,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    -- a trigger that fires twice queues once
    UNIQUE (conversation_id, through_seq)
);
-- claim: runnable jobs by due time
CREATE INDEX jobs_claimable ON jobs (run_at) WHERE status IN ('queued', 'failed');
CREATE INDEX jobs_running_lease ON jobs (locked_until) WHERE status = 'running';
-- retention of finished jobs (the sweeper)
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status IN ('succeeded', 'cancelled');
CREATE INDEX jobs_tenant_id ON jobs (tenant_id, id DESC);
CREATE INDEX jobs_tenant_ref ON jobs (tenant_id, external_ref);

CREATE TABLE erasure_receipts (
    id           UUID PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    subject_hash TEXT NOT NULL,
    deleted      JSONB NOT NULL,
    completed_at TIMESTAMPTZ NOT NULL
);
