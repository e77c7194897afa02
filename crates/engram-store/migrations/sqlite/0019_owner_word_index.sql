-- Search keys each word by its owner (store::word_index). Since 0004, facts_fts indexed a
-- fact's text with its owner as one more token, and a search MATCHed the owner's token
-- AND each query word: FTS5 walked the owner's whole posting list beside each word's, so
-- a 20-word search of words common among a user's facts cost the owner's list twenty
-- times. Now each term is the owner's tag followed by a stem, written by Engram with the
-- fact (`search_terms`: the stemmer is Snowball English, as PostgreSQL's), and one term's
-- postings are exactly one owner's facts holding that word. The tokenizer is `ascii` (a
-- term holds letters and digits only, so it splits only between terms), and the index
-- keeps no positions (`detail = none`): a search asks for whole terms.
--
-- Facts stored before this migration have no terms yet: Store::migrate writes them at
-- start-up, and the triggers index them as it does. It looks for them at every start
-- through `facts_without_terms`, an index of only the facts without terms (empty once
-- they all have theirs), so that a start never scans the table.
DROP TRIGGER facts_fts_insert;
DROP TRIGGER facts_fts_delete;
DROP TRIGGER facts_fts_update;
DROP TABLE facts_fts;
ALTER TABLE facts DROP COLUMN fts_owner;
ALTER TABLE facts ADD COLUMN search_terms TEXT;
CREATE INDEX facts_without_terms ON facts (search_terms) WHERE search_terms IS NULL;

CREATE VIRTUAL TABLE facts_fts USING fts5 (
    search_terms, content = 'facts', content_rowid = 'rowid', tokenize = 'ascii', detail = 'none'
);
-- As in 0002: an erasure rewrites the index segments without the erased facts' terms.
INSERT INTO facts_fts (facts_fts, rank) VALUES ('secure-delete', 1);
CREATE TRIGGER facts_fts_insert AFTER INSERT ON facts WHEN new.search_terms IS NOT NULL BEGIN
    INSERT INTO facts_fts (rowid, search_terms) VALUES (new.rowid, new.search_terms);
END;
CREATE TRIGGER facts_fts_delete AFTER DELETE ON facts WHEN old.search_terms IS NOT NULL BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, search_terms) VALUES ('delete', old.rowid, old.search_terms);
END;
-- An update that leaves the terms as they were (tags, score, supersession) leaves the
-- index alone. A fact without terms was never indexed: there is nothing to delete.
CREATE TRIGGER facts_fts_update AFTER UPDATE OF search_terms ON facts
    WHEN old.search_terms IS NOT new.search_terms BEGIN
    INSERT INTO facts_fts (facts_fts, rowid, search_terms)
        SELECT 'delete', old.rowid, old.search_terms WHERE old.search_terms IS NOT NULL;
    INSERT INTO facts_fts (rowid, search_terms)
        SELECT new.rowid, new.search_terms WHERE new.search_terms IS NOT NULL;
END;
