-- Where each fact came from: the messages an extracted fact was drawn from, as a JSON
-- array of {conversation_id, seq}, read with the fact (no join on the hot reads). Empty
-- for manual and agent facts and for facts extracted before it (their messages are not
-- known). The list filter `source_conversation` reads it among one owner's facts, which
-- the facts_owner_id index finds and ENGRAM_MAX_FACTS_PER_USER bounds.
ALTER TABLE facts ADD COLUMN source_messages JSONB NOT NULL DEFAULT '[]';
-- Whether deleting a conversation through the API also deletes the facts drawn only from
-- it; off by default, so that existing agents keep their facts as before.
ALTER TABLE agent_configs ADD COLUMN delete_facts_with_conversation BOOLEAN NOT NULL DEFAULT FALSE;
