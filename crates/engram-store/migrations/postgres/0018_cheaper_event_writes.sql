-- Nothing to do on PostgreSQL, whose event ids come from transaction ids (0012), not a
-- counter. SQLite's 0018 stops writing the tenant's counter with every event; both
-- dialects share their numbers.
SELECT 1;
