-- Nothing to do on SQLite, whose word index Engram has written since 0019. PostgreSQL's
-- 0020 does the same for its own; both dialects share their numbers.
SELECT 1;
