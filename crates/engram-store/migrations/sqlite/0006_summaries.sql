-- Rolling summaries of long threads (issue 13).
-- `summary`: the older messages of a conversation folded into text by a `summarize` job;
-- `summary_through_seq`: the last seq it covers (0: none); `summary_queued_through_seq`: the
-- mark of the newest summarize job queued, so an append that fires twice queues once. The
-- summary is personal data: it lives on the conversation row only, so it is exported and
-- erased with it (zeroed by secure_delete like the rest of the row), and DELETE …/messages
-- clears it.
ALTER TABLE conversations ADD COLUMN summary TEXT;
ALTER TABLE conversations ADD COLUMN summary_through_seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN summary_queued_through_seq INTEGER NOT NULL DEFAULT 0;
-- Per-agent settings: summarise once more than this many messages are unsummarised (0 = off),
-- keeping the newest `summary_window` verbatim.
ALTER TABLE agent_configs ADD COLUMN summarize_after_messages INTEGER NOT NULL DEFAULT 20;
ALTER TABLE agent_configs ADD COLUMN summary_window INTEGER NOT NULL DEFAULT 10;
-- Two kinds of job may now mark one conversation at one seq (an extraction and a summary
-- through the same message): the kind is part of "a trigger that fires twice queues once".
-- SQLite cannot change a table's constraint in place: the table is rebuilt, same columns.
CREATE TABLE jobs_rebuilt (
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
    UNIQUE (conversation_id, kind, through_seq)
);
INSERT INTO jobs_rebuilt (id, tenant_id, kind, status, attempts, agent_id, external_ref, conversation_id,
    through_seq, facts_added, last_error, run_at, locked_until, lease_token, created_at, updated_at)
SELECT id, tenant_id, kind, status, attempts, agent_id, external_ref, conversation_id,
    through_seq, facts_added, last_error, run_at, locked_until, lease_token, created_at, updated_at FROM jobs;
DROP TABLE jobs;
ALTER TABLE jobs_rebuilt RENAME TO jobs;
CREATE INDEX jobs_claimable ON jobs (run_at) WHERE status IN ('queued', 'failed');
CREATE INDEX jobs_running_lease ON jobs (locked_until) WHERE status = 'running';
CREATE INDEX jobs_finished ON jobs (updated_at) WHERE status IN ('succeeded', 'cancelled');
CREATE INDEX jobs_tenant_id ON jobs (tenant_id, id DESC);
CREATE INDEX jobs_tenant_ref ON jobs (tenant_id, external_ref);
