-- When a job's first attempt began (issue 30), as in PostgreSQL (RFC 3339 text): an LLM
-- extraction that keeps failing falls back to the builtin rules once another try would not
-- end within ENGRAM_LLM_JOB_BUDGET_SECS of it. Set by the first claim, kept by later ones,
-- cleared by a manual retry.
ALTER TABLE jobs ADD COLUMN started_at TEXT;
