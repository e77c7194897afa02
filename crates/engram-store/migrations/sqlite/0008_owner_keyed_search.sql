-- Nothing to do on SQLite. Both dialects' migrations share their numbers and names, so
-- that one number means one change of the schema. PostgreSQL's 0008 keys its full-text
-- index by owner; SQLite's index has held the owner since 0004_search_by_owner.
-- Renumbering an applied migration is not possible (databases record applied migrations
-- by number), so this number holds a no-op here.
SELECT 1;
