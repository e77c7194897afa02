-- A fact's duplicate key is its normalised text, up to 1 000 characters in any script:
-- 1 000 CJK characters are 3 000 bytes, over what one btree entry may hold (about
-- 2 700), so the unique index on the text itself refused such facts with an error.
-- The unique index holds the text's MD5 instead (32 bytes, any length of text). Two
-- different texts of one owner with the same MD5 would count as one fact; no text a
-- person writes does that by chance.
ALTER TABLE facts DROP CONSTRAINT facts_tenant_id_agent_id_external_ref_normalized_key;
CREATE UNIQUE INDEX facts_owner_key_md5 ON facts (tenant_id, agent_id, external_ref, md5(normalized));
