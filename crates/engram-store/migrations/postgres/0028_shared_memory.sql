-- Shared memory: the other agents of the tenant whose facts an agent's memory context
-- and search read (a JSON array of agent ids; empty: its own facts only). Read with the
-- agent's settings (primary key); the facts of the agents named are then read through
-- `facts_owner_id`, as the agent's own.
ALTER TABLE agent_configs ADD COLUMN reads_facts_of JSONB NOT NULL DEFAULT '[]';
