-- Vectors of facts for recall by meaning (issue 12). Plain bytea, no extension: the
-- vectors of one user (at most ENGRAM_MAX_FACTS_PER_USER) are compared in the server.
-- A vector is current while its model is the configured one and its fact_updated_at is
-- the fact's updated_at: an edit makes it stale without touching this table, and the
-- embedding worker replaces it. Deleting a fact (erasure, forget-all, eviction) deletes
-- its vector with it.
CREATE TABLE fact_vectors (
    fact_id         UUID PRIMARY KEY REFERENCES facts (id) ON DELETE CASCADE,
    -- the vector's model tag (`local:all-MiniLM-L6-v2`, `openai:<model>`)
    model           TEXT NOT NULL,
    dims            INTEGER NOT NULL,
    -- little-endian f32 × dims, L2-normalised
    vector          BYTEA NOT NULL,
    fact_updated_at TIMESTAMPTZ NOT NULL
);
