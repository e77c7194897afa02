-- Every bad line of an import, not only the first 100 kept in `imports.errors`: read a
-- page at a time by line number (`GET /api/import/{id}/errors`, `engram import-errors`).
-- Like `imports.errors`, a report holds a line number, a code and a message that never
-- quotes the line: nothing personal.
CREATE TABLE import_errors (
    import_id UUID NOT NULL,
    tenant_id TEXT NOT NULL,
    line      BIGINT NOT NULL,
    code      TEXT NOT NULL,
    message   TEXT NOT NULL,
    PRIMARY KEY (import_id, line)
);
