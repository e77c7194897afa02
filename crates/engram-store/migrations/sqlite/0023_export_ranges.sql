-- `engram export` pages through a tenant's records from the last one of the page before,
-- and reads the page's client ids at once: with these indexes each page is one range of
-- an index, read in order, and each client id one seek. SQLite keeps no statistics and
-- planned the tenant's equality first, reading and sorting every row of the tenant (and
-- every client id of a kind) again for each page of 500: an export of 100 000 facts
-- was quadratic.
CREATE INDEX conversations_tenant_id ON conversations (tenant_id, id);
CREATE INDEX facts_tenant_id ON facts (tenant_id, id);
-- `kind` joins the person's index (erasure still reads its prefix), so that a page of
-- consents finds its client ids by person, not by a scan of every consent's.
DROP INDEX import_ids_person;
CREATE INDEX import_ids_person ON import_ids (tenant_id, external_ref, kind);
