-- The tenant's counter is no longer written by every event.
--
-- SQLite's writers are serialised and every page a transaction changes is written to the
-- WAL at its commit, so on SQLite a change's cost is counted in pages: a remembered
-- fact's transaction wrote ~20 WAL frames, one of them the tenant's counter row, moved by
-- every event (0011's `events_counter`). An event's id is now one more than the tenant's
-- highest, read by the event's own statement from `events`' key (whose last page the
-- insert writes anyway), or than `event_counters.last_id` where that is higher: the
-- counter now holds the highest id a delete took from the top of a tenant's events (an
-- erasure, the retention sweep), so that no id is ever given twice.
--
-- (Storing `events` and `fact_versions` WITHOUT ROWID, one B-tree each instead of the
-- rows and their key's index, was measured and not kept: their rows are large, and an
-- insert at the end of an index B-tree rebalances its neighbours where a rowid table's
-- append fills a fresh page, so each wrote ~2.5 pages instead of 2.)
DROP TRIGGER events_counter;
CREATE TRIGGER events_deleted_newest AFTER DELETE ON events
    WHEN NOT EXISTS (SELECT 1 FROM events WHERE tenant_id = OLD.tenant_id AND id > OLD.id)
BEGIN
    INSERT INTO event_counters (tenant_id, last_id) VALUES (OLD.tenant_id, OLD.id)
        ON CONFLICT (tenant_id) DO UPDATE SET last_id = max(last_id, excluded.last_id);
END;
