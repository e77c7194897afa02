-- Rolling summaries of long threads (issue 13).
-- `summary`: the older messages of a conversation folded into text by a `summarize` job;
-- `summary_through_seq`: the last seq it covers (0: none); `summary_queued_through_seq`: the
-- mark of the newest summarize job queued, so an append that fires twice queues once. The
-- summary is personal data: it lives on the conversation row only, so it is exported and
-- erased with it, and DELETE …/messages clears it.
ALTER TABLE conversations ADD COLUMN summary TEXT;
ALTER TABLE conversations ADD COLUMN summary_through_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE conversations ADD COLUMN summary_queued_through_seq BIGINT NOT NULL DEFAULT 0;
-- Per-agent settings: summarise once more than this many messages are unsummarised (0 = off),
-- keeping the newest `summary_window` verbatim.
ALTER TABLE agent_configs ADD COLUMN summarize_after_messages INTEGER NOT NULL DEFAULT 20;
ALTER TABLE agent_configs ADD COLUMN summary_window INTEGER NOT NULL DEFAULT 10;
-- Two kinds of job may now mark one conversation at one seq (an extraction and a summary
-- through the same message): the kind is part of "a trigger that fires twice queues once".
ALTER TABLE jobs DROP CONSTRAINT jobs_conversation_id_through_seq_key;
ALTER TABLE jobs ADD CONSTRAINT jobs_conversation_kind_seq UNIQUE (conversation_id, kind, through_seq);
