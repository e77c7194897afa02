-- NDJSON import (issue 26).
--
-- `import_ids`: which record each client id of an import became, so that a re-run after
-- a crash adds nothing twice (the primary key is the idempotency check, written in the
-- transaction that writes the record) and an export writes back the id the records were
-- imported under. It names the person (`external_ref`), so a person's erasure deletes
-- their rows (`import_ids_person`); `record_id` is how an export finds a record's client
-- id (`import_ids_record`; two client ids may name one fact, said twice). `record_id` is
-- null for consent, which is the person's own row.
CREATE TABLE import_ids (
    tenant_id    TEXT NOT NULL,
    kind         TEXT NOT NULL,
    client_id    TEXT NOT NULL,
    record_id    UUID,
    external_ref TEXT NOT NULL,
    created_at   TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (tenant_id, kind, client_id)
);
CREATE INDEX import_ids_person ON import_ids (tenant_id, external_ref);
CREATE INDEX import_ids_record ON import_ids (tenant_id, kind, record_id);

-- One row per import, its progress counts updated after each batch. `errors` holds the
-- first bad lines' reports (line number, code, a message that never quotes the line),
-- so it holds nothing personal and outlives erasures.
CREATE TABLE imports (
    id          UUID PRIMARY KEY,
    tenant_id   TEXT NOT NULL,
    status      TEXT NOT NULL,
    lines_read  BIGINT NOT NULL DEFAULT 0,
    added       BIGINT NOT NULL DEFAULT 0,
    duplicates  BIGINT NOT NULL DEFAULT 0,
    failed      BIGINT NOT NULL DEFAULT 0,
    errors      JSONB NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ NOT NULL,
    finished_at TIMESTAMPTZ
);
-- the list route: a tenant's imports, newest first
CREATE INDEX imports_tenant_id ON imports (tenant_id, id DESC);
