-- Threads as agent frameworks use them (issue 13).
-- `key`: the client's own name for a thread, unique per tenant and agent when set. The
-- partial unique index is what makes two concurrent creates with one key end as one
-- thread (INSERT … ON CONFLICT DO NOTHING), and it serves `GET /api/conversations?key=`.
-- `memory`: false opts this one conversation out of extraction.
ALTER TABLE conversations ADD COLUMN key TEXT;
ALTER TABLE conversations ADD COLUMN memory BOOLEAN NOT NULL DEFAULT TRUE;
CREATE UNIQUE INDEX conversations_tenant_agent_key ON conversations (tenant_id, agent_id, key) WHERE key IS NOT NULL;
