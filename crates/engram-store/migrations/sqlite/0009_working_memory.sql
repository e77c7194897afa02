-- Working memory (issue 24), as in PostgreSQL (UUIDs are blobs, times RFC 3339 text): a
-- free-form document an agent rewrites as it learns, one per
-- agent and end user (`conversation_id` NULL) and one per conversation. `etag` changes on
-- every write, so a writer that read an older version is refused (If-Match) instead of
-- silently overwriting. A conversation's document goes with it (cascade); the person's go
-- with their erasure (`external_ref` is the conversation's for conversation documents).
CREATE TABLE working_memories (
    id              BLOB PRIMARY KEY,
    tenant_id       TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    external_ref    TEXT NOT NULL,
    conversation_id BLOB REFERENCES conversations (id) ON DELETE CASCADE,
    content         TEXT NOT NULL,
    etag            TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);
-- At most one document per scope; the two partial indexes are what a concurrent create
-- meets (INSERT … ON CONFLICT DO NOTHING), and they serve every read by scope.
CREATE UNIQUE INDEX working_memories_user ON working_memories (tenant_id, agent_id, external_ref)
    WHERE conversation_id IS NULL;
CREATE UNIQUE INDEX working_memories_conversation ON working_memories (conversation_id)
    WHERE conversation_id IS NOT NULL;
-- Export and erasure read a person's documents across agents.
CREATE INDEX working_memories_tenant_ref ON working_memories (tenant_id, external_ref);
