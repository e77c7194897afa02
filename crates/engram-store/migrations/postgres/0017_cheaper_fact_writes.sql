-- Two costs of writing a fact, found in a profile of `engram-bench load`'s remember.
--
-- 1. The cap's count of the owner's unexpired facts (store::facts, INSERT) reads
--    `expires_at` since 0013, which `facts_owner_id` did not hold: it fetched every one of
--    the owner's rows from the table. Carried in the index, the count reads the index
--    alone again (an index-only scan where pages are all-visible).
DROP INDEX facts_owner_id;
CREATE INDEX facts_owner_id ON facts (tenant_id, agent_id, external_ref, id DESC) INCLUDE (expires_at);

-- 2. `owned_search` (0008) is computed by `engram_owned_lexemes`. As an SQL function with
--    a subquery it is not inlined, and PostgreSQL parses and plans an SQL function's body
--    again in every statement that calls it: 70–100 µs of CPU per fact inserted (an
--    eighth of a remember's transaction in `pgbench`). The same body in PL/pgSQL is
--    planned once per connection. Same arguments, same result, so the
--    values already stored stay right.
CREATE OR REPLACE FUNCTION engram_owned_lexemes(tenant TEXT, agent TEXT, ref TEXT, doc TSVECTOR) RETURNS TSVECTOR
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $$
BEGIN
    RETURN array_to_tsvector(ARRAY(
        SELECT engram_owner_key(tenant, agent, ref) || lexeme FROM unnest(tsvector_to_array(doc)) AS lexeme
    ));
END
$$;

-- 3. Each version row's foreign key to its fact was checked on insert (a lookup and a
--    share lock on the fact). The checks are redundant: a version is written only for a
--    fact its own transaction just inserted or changed, whose row that transaction holds
--    locked until it commits, so no delete can pass it. What the key did on delete —
--    taking the versions with their fact — a trigger does now, row by row as the cascade
--    did, by the versions' primary key.
ALTER TABLE fact_versions DROP CONSTRAINT fact_versions_fact_id_fkey;
CREATE FUNCTION engram_delete_fact_versions() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    DELETE FROM fact_versions WHERE fact_id = OLD.id;
    RETURN NULL;
END
$$;
CREATE TRIGGER facts_delete_versions AFTER DELETE ON facts
    FOR EACH ROW EXECUTE FUNCTION engram_delete_fact_versions();
