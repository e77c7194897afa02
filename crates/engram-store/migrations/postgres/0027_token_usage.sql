-- What the model cost: the tokens each job's provider reported (0 for the builtin), and
-- whether the tenant's daily token budget was spent when it was due (NULL: it was not;
-- 'waited': it waited for the next UTC day; 'builtin': the builtin ran instead).
ALTER TABLE jobs ADD COLUMN input_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN over_budget TEXT;
-- The same tokens per tenant, agent and UTC day, kept when finished jobs are deleted: what
-- the budget is checked against and what the usage views sum. `over_budget_jobs` counts
-- the times a job met the spent budget. The key serves both reads (a tenant's day, and its
-- days from a date on).
CREATE TABLE token_usage (
    tenant_id        TEXT NOT NULL,
    day              DATE NOT NULL,
    agent_id         TEXT NOT NULL,
    input_tokens     BIGINT NOT NULL DEFAULT 0,
    output_tokens    BIGINT NOT NULL DEFAULT 0,
    jobs             BIGINT NOT NULL DEFAULT 0,
    over_budget_jobs BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_id, day, agent_id)
);
