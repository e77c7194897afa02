-- Nothing to do on PostgreSQL, whose full-text index has keyed each lexeme by its owner
-- since 0008. SQLite's 0019 does the same for its word index; both dialects share their
-- numbers.
SELECT 1;
