-- Vectors of facts for recall by meaning (issue 12); see the PostgreSQL migration.
-- Foreign keys are on for every connection (Store::connect), so the cascade holds here too.
CREATE TABLE fact_vectors (
    fact_id         BLOB PRIMARY KEY REFERENCES facts (id) ON DELETE CASCADE,
    model           TEXT NOT NULL,
    dims            INTEGER NOT NULL,
    vector          BLOB NOT NULL,
    fact_updated_at TEXT NOT NULL
);
