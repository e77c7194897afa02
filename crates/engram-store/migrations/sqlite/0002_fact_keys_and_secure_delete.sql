-- Erasure must leave nothing in the file. FTS5 otherwise keeps a deleted fact's terms in
-- its index segments (and writes a delete marker holding them again) until a merge; with
-- 'secure-delete' a delete rewrites the segments without them. The option is stored in
-- facts_fts_config, so it holds for every connection. Needs SQLite >= 3.42 (bundled: 3.51).
-- The rest of the guarantee is PRAGMA secure_delete (every connection, see Store::connect)
-- and a WAL checkpoint after each erasure (Store::erase_user).
INSERT INTO facts_fts (facts_fts, rank) VALUES ('secure-delete', 1);
