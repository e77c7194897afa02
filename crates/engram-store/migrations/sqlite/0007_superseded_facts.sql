-- Facts that replace each other (issue 14): a fact in a single-valued slot (name, home
-- city, job, employer, age, relationship status, birthday) supersedes the owner's older
-- fact of that slot. `slot` is set by the store from the fact's text; a superseded fact
-- keeps its row (readable with `include_superseded`, exported, erased like any fact) and
-- names its successor.
ALTER TABLE facts ADD COLUMN slot TEXT;
ALTER TABLE facts ADD COLUMN superseded_by BLOB;
ALTER TABLE facts ADD COLUMN superseded_at TEXT;
CREATE INDEX facts_owner_slot ON facts (tenant_id, agent_id, external_ref, slot) WHERE slot IS NOT NULL;
