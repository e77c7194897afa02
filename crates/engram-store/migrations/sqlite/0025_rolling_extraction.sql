-- Rolling extraction: an agent extracts an open conversation every
-- `extract_every_user_turns` new user turns (NULL: only when it ends). Agents configured
-- before it get the documented default, their own `min_user_turns`, like agents created
-- after it.
ALTER TABLE agent_configs ADD COLUMN extract_every_user_turns INTEGER;
UPDATE agent_configs SET extract_every_user_turns = min_user_turns;
-- The conversation's user turns when its last segment was due (queued, or refused by a
-- rule such as consent): the next is due once `user_turns` is `extract_every_user_turns`
-- past it. Conversations before it start counting now (their unextracted turns go to the
-- next segment or to the end).
ALTER TABLE conversations ADD COLUMN segment_user_turns INTEGER NOT NULL DEFAULT 0;
UPDATE conversations SET segment_user_turns = user_turns;
-- An extraction job's segment is (from_seq, through_seq]: fixed when it is queued, so a
-- retry or a job re-claimed after a crash reads its own messages and no neighbour's. Jobs
-- queued before it read from their conversation's extraction mark, as they would have.
ALTER TABLE jobs ADD COLUMN from_seq INTEGER NOT NULL DEFAULT 0;
UPDATE jobs SET from_seq = COALESCE(
    (SELECT c.extracted_through_seq FROM conversations c WHERE c.id = jobs.conversation_id), 0)
WHERE kind = 'extract_facts' AND status IN ('queued', 'failed', 'running');
