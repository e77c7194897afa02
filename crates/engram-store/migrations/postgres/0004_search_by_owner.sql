-- Nothing to do on PostgreSQL. Both dialects' migrations share their numbers and names,
-- so that one number means one change of the schema. SQLite's 0004 puts the owner into
-- its full-text index; PostgreSQL got the same (a search that reads one owner's postings)
-- later, in 0008_owner_keyed_search. Renumbering an applied migration is not possible
-- (databases record applied migrations by number), so this number holds a no-op here.
SELECT 1;
