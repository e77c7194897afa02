-- Engram schema (SQLite, the embedded default). Same tables as PostgreSQL; UUIDs are
-- 16-byte blobs, times RFC 3339 text in UTC (which sorts like the time), JSON as text.

CREATE TABLE agent_configs (
    tenant_id               TEXT NOT NULL,
    agent_id                TEXT NOT NULL,
    memory_enabled          BOOLEAN NOT NULL,
    min_user_turns          INTEGER NOT NULL,
    max_injected_facts      INTEGER NOT NULL,
    min_confidence          REAL NOT NULL,
    extraction_instructions TEXT,
    created_at              TEXT NOT NULL,
    updated_at              TEXT NOT NULL,
    PRIMARY KEY (tenant_id, agent_id)
);

CREATE TABLE user_consents (
    tenant_id    TEXT NOT NULL,
    external_ref TEXT NOT NULL,
    ai_consent   BOOLEAN NOT NULL,
    updated_at   TEXT NOT NULL,
    PRIMARY KEY (tenant_id, external_ref)
);

CREATE TABLE conversations (
    id                    BLOB PRIMARY KEY,
    tenant_id             TEXT NOT NULL,
    agent_id              TEXT NOT NULL,
    external_ref          TEXT NOT NULL,
    title                 TEXT,
    metadata              TEXT NOT NULL,
    status                TEXT NOT NULL,
    message_count         INTEGER NOT NULL DEFAULT 0,
    user_turns            INTEGER NOT NULL DEFAULT 0,
    last_seq              INTEGER NOT NULL DEFAULT 0,
    last_user_seq         INTEGER NOT NULL DEFAULT 0,
    extracted_through_seq INTEGER NOT NULL DEFAULT 0,
    queued_through_seq    INTEGER NOT NULL DEFAULT 0,
    created_at            TEXT NOT NULL,
    updated_at            TEXT NOT NULL,
    ended_at              TEXT
);
CREATE INDEX conversations_tenant_updated ON conversations (tenant_id, updated_at DESC, id DESC);
CREATE INDEX conversations_tenant_agent_updated ON conversations (tenant_id, agent_id, updated_at DESC, id DESC);
CREATE INDEX conversations_tenant_ref_updated ON conversations (tenant_id, external_ref, updated_at DESC, id DESC);
CREATE INDEX conversations_open_idle ON conversations (updated_at) WHERE status = 'open';

CREATE TABLE messages (
    id              BLOB PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq             INTEGER NOT NULL,
    role            TEXT NOT NULL,
    content         TEXT NOT NULL,
    name            TEXT,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    metadata        TEXT,
    created_at      TEXT NOT NULL,
    UNIQUE (conversation_id, seq)
);

CREATE TABLE idempotency_keys (
    conversation_id BLOB NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    tenant_id       TEXT NOT NULL,
    key             TEXT NOT NULL,
    request_hash    TEXT NOT NULL,
    response        TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    PRIMARY KEY (conversation_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);

CREATE TABLE facts (
    id              BLOB PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    external_ref    TEXT NOT NULL,
    fact            TEXT NOT NULL,
    normalized      TEXT NOT NULL,
    tags            TEXT NOT NULL,
    score           REAL,
    source          TEXT NOT NULL,
    conversation_id BLOB,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (tenant_id, agent_id, external_ref, normalized)
);
CREATE INDEX facts_owner_id ON facts (tenant_id, agent_id, external_ref, id DESC);
CREATE INDEX facts_tenant_ref ON facts (tenant_id, external_ref);

-- Full-text index over facts.fact (porter stemming), kept in step by triggers.
CREATE VIRTUAL TABLE facts_fts USING fts5 (fact, content = 'facts', content_rowid = 'rowid', tokenize = 'porter unicode61');
CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts (rowid, fact) VALUES (new.rowid, new.fact);
END;
CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, fact) VALUES ('delete', old.rowid, old.fact);
END;
CREATE TRIGGER facts_fts_update AFTER UPDATE OF fact ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, fact) VALUES ('delete', old.rowid, old.fact);
    INSERT INTO facts_fts (rowid, fact) VALUES (new.rowid, new.fact);
END;

CREATE TABLE jobs (
    id              BLOB PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    agent_id        TEXT NOT NULL,
    external_ref    TEXT NOT NULL,
    conversation_id BLOB NOT NULL,
    through_seq     INTEGER NOT NULL,
    facts_added     INTEGER,
    last_error      TEXT,
    run_at          TEXT NOT NULL,
    locked_until    TEXT,
    lease_token     BLOB,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (conversation_id, through_seq)
);
CREATE INDEX jobs_claimable ON jobs (run_at) WHERE status IN ('queued', 'failed');
CREATE INDEX jobs_running_lease ON jobs (locked_until) WHERE status = 'running';
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status IN ('succeeded', 'cancelled');
CREATE INDEX jobs_tenant_id ON jobs (tenant_id, id DESC);
CREATE INDEX jobs_tenant_ref ON jobs (tenant_id, external_ref);

CREATE TABLE erasure_receipts (
    id           BLOB PRIMARY KEY,
    tenant_id    TEXT NOT NULL,
    subject_hash TEXT NOT NULL,
    deleted      TEXT NOT NULL,
    completed_at TEXT NOT NULL
);
