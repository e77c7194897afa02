-- When an erasure's old row versions left the database's pages (store::rgpd): the
-- touched tables vacuumed once no snapshot older than the erasure remained. NULL until
-- then: receipts written before this column are dated by the first purge after it.
ALTER TABLE erasure_receipts ADD COLUMN purged_at TIMESTAMPTZ;
-- The receipts still owed a purge: a few at most, found at every start and after each
-- erasure without reading the others.
CREATE INDEX erasure_receipts_unpurged ON erasure_receipts (id) WHERE purged_at IS NULL;
-- Which key tagged the word index's terms (store::word_index): a digest of the key, so
-- that a start with another key re-tags every fact. Empty until the first start with this
-- migration, which re-tags the terms written with the unkeyed tag of 0019.
CREATE TABLE word_index_key (
    id          INTEGER PRIMARY KEY CHECK (id = 1),
    fingerprint TEXT NOT NULL
);
