-- Forgetting and retention (issue 26).
--
-- `recall_count` / `last_recalled_at`: how often and when a fact was last returned by a
-- read (memory context, search, the tools). Reads note them in memory; a background
-- flusher adds them here in batches, so a read never writes (a crash may lose the counts
-- of the last few seconds, never a fact).
--
-- The agent's forgetting policies and message retention; 0 (or false) is off, the default,
-- so existing agents keep everything as before. The sweeper reads only the agents that
-- set one (`agent_configs_forgetting`, partial: the others are not in it).
ALTER TABLE facts ADD COLUMN recall_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE facts ADD COLUMN last_recalled_at TEXT;
ALTER TABLE agent_configs ADD COLUMN forget_extracted_after_days INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_configs ADD COLUMN forget_unrecalled_after_days INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_configs ADD COLUMN keep_best_facts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_configs ADD COLUMN forget_curated_facts BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE agent_configs ADD COLUMN max_messages_per_conversation INTEGER NOT NULL DEFAULT 0;
ALTER TABLE agent_configs ADD COLUMN delete_conversations_after_days INTEGER NOT NULL DEFAULT 0;
CREATE INDEX agent_configs_forgetting ON agent_configs (tenant_id, agent_id)
    WHERE forget_extracted_after_days > 0 OR forget_unrecalled_after_days > 0 OR keep_best_facts > 0
       OR max_messages_per_conversation > 0 OR delete_conversations_after_days > 0;
-- The policies' scans: one agent's facts (the owner index leads with tenant and agent) and
-- one agent's ended conversations.
CREATE INDEX conversations_ended ON conversations (tenant_id, agent_id, ended_at) WHERE ended_at IS NOT NULL;
