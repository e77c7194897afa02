-- Two costs of writing a fact, found in a profile of `engram-bench load`'s remember.
--
-- 1. The cap's count of the owner's unexpired facts (store::facts, INSERT) reads
--    `expires_at` since 0013, which `facts_owner_id` did not hold: it read every one of
--    the owner's rows from the table. With the column in the index (last, so the index
--    still orders an owner's facts by id), the index covers the count.
DROP INDEX facts_owner_id;
CREATE INDEX facts_owner_id ON facts (tenant_id, agent_id, external_ref, id DESC, expires_at);

-- 2. Each version row's foreign key to its fact was checked on insert. The check is
--    redundant: a version is written only for a fact its own transaction just inserted
--    or changed, and only while the fact is there (`events_fact_version` reads it), and
--    SQLite's writers are serialised. What the key did on delete — taking the versions
--    with their fact — a trigger does now. SQLite cannot drop a constraint, so the table
--    is made again without it, and the trigger that writes it with it.
DROP TRIGGER events_fact_version;
CREATE TABLE fact_versions_new (
    tenant_id    TEXT NOT NULL,
    fact_id      BLOB NOT NULL,
    version      INTEGER NOT NULL,
    change       TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    actor        TEXT NOT NULL,
    actor_job_id BLOB,
    fact         TEXT NOT NULL,
    PRIMARY KEY (fact_id, version)
);
INSERT INTO fact_versions_new (tenant_id, fact_id, version, change, created_at, actor, actor_job_id, fact)
    SELECT tenant_id, fact_id, version, change, created_at, actor, actor_job_id, fact FROM fact_versions;
DROP TABLE fact_versions;
ALTER TABLE fact_versions_new RENAME TO fact_versions;
CREATE TRIGGER events_fact_version AFTER INSERT ON events WHEN NEW.version_of IS NOT NULL
BEGIN
    INSERT INTO fact_versions (tenant_id, fact_id, version, change, created_at, actor, actor_job_id, fact)
    SELECT NEW.tenant_id, f.id,
           (SELECT COALESCE(max(version), 0) + 1 FROM fact_versions WHERE fact_id = f.id),
           NEW.type, NEW.created_at, NEW.actor, NEW.actor_job_id, json_extract(NEW.data, '$.fact')
    FROM facts f WHERE f.id = NEW.version_of;
END;
CREATE TRIGGER facts_delete_versions AFTER DELETE ON facts
BEGIN
    DELETE FROM fact_versions WHERE fact_id = OLD.id;
END;
