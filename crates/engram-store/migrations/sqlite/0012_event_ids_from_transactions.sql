-- Nothing changes on SQLite: its writers are serialised, so an event id is still the
-- tenant's counter plus one (PostgreSQL's ids now come from transaction ids).
SELECT 1;
