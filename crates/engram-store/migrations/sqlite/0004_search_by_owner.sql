-- Search reads one owner's postings, not every owner's. facts_fts indexes the owner
-- beside the text, as one token (the hex of tenant, agent and user, 'x' between them:
-- letters and digits only, so the tokenizer keeps it whole), and a search MATCHes the
-- owner's token AND each query word: FTS5 skips through the longer posting list instead
-- of reading it all and joining every fact of every owner back to `facts`.
-- The token is a generated column of `facts`, so the index stays an external-content
-- index that 'rebuild' can refill from the table.
ALTER TABLE facts ADD COLUMN fts_owner TEXT
    GENERATED ALWAYS AS (hex(tenant_id) || 'x' || hex(agent_id) || 'x' || hex(external_ref)) VIRTUAL;

DROP TRIGGER facts_fts_insert;
DROP TRIGGER facts_fts_delete;
DROP TRIGGER facts_fts_update;
DROP TABLE facts_fts;

CREATE VIRTUAL TABLE facts_fts USING fts5 (
    fact, fts_owner, content = 'facts', content_rowid = 'rowid', tokenize = 'porter unicode61'
);
-- As in 0002: an erasure rewrites the index segments without the erased facts' terms.
INSERT INTO facts_fts (facts_fts, rank) VALUES ('secure-delete', 1);
CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts BEGIN
    INSERT INTO facts_fts (rowid, fact, fts_owner) VALUES (new.rowid, new.fact, new.fts_owner);
END;
CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, fact, fts_owner) VALUES ('delete', old.rowid, old.fact, old.fts_owner);
END;
CREATE TRIGGER facts_fts_update AFTER UPDATE OF fact ON facts BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, fact, fts_owner) VALUES ('delete', old.rowid, old.fact, old.fts_owner);
    INSERT INTO facts_fts (rowid, fact, fts_owner) VALUES (new.rowid, new.fact, new.fts_owner);
END;
INSERT INTO facts_fts (facts_fts) VALUES ('rebuild');
