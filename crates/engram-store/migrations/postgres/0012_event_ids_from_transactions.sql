-- PostgreSQL event ids come from transaction ids (see store::events): writers no longer
-- take the tenant's counter row, whose lock, held to each commit, serialised every commit
-- of a tenant. The row keeps only the retention's mark. Ids written before stay below the
-- new ones: a transaction writes fewer than 4096 events, so a tenant's count of events
-- is below 4096 times the current transaction id.
ALTER TABLE event_counters DROP COLUMN last_id;
