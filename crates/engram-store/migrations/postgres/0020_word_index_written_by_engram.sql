-- Search finds a fact's words through terms Engram writes, as on SQLite since 0019
-- (store::word_index): each the owner's tag followed by a stem, in `search_terms`. The
-- GIN index of those terms answers "this owner's facts holding any of these words" in
-- one scan, each matching fact once with its terms, and Engram tells which words each
-- holds and ranks them (store::ranking), the same code for both backends. Before, the
-- lexemes were made here (`owned_search`, 0008) and a search took each query word's
-- postings apart, one heap visit per (fact, word) pair, to count and rank them in SQL:
-- when every query word was common among a user's facts, 5 ms a 20-word search.
--
-- The index is on an expression, not a stored column: the terms are already stored, and
-- a query of whole terms (`'…' | '…'`) needs no recheck against the row.
--
-- Facts stored before this migration have no terms yet: Store::migrate writes them at
-- start-up, finding them through `facts_without_terms` (only them), as on SQLite.
DROP INDEX facts_owned_search;
ALTER TABLE facts DROP COLUMN owned_search;
DROP FUNCTION engram_owned_lexemes(TEXT, TEXT, TEXT, TSVECTOR);
DROP FUNCTION engram_owner_key(TEXT, TEXT, TEXT);
ALTER TABLE facts ADD COLUMN search_terms TEXT;
CREATE INDEX facts_without_terms ON facts (id) WHERE search_terms IS NULL;
-- fastupdate off, as 0008's: new entries go straight into the index, not into a pending
-- list that every search would read through until a vacuum merged it.
CREATE INDEX facts_words ON facts USING GIN (array_to_tsvector(string_to_array(search_terms, ' ')))
    WITH (fastupdate = off);
