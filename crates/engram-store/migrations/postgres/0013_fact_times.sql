-- When a fact was true, and expiry (issue 26).
--
-- `observed_at`: when the person said it (the message's time for extracted facts, given
-- or the time it was stored for others); facts stored before this migration take their
-- `created_at`. `valid_until`: when it stopped being true, the `observed_at` of the fact
-- that superseded it (facts superseded before this migration take their `superseded_at`).
-- A fact is current at T when observed_at <= T < valid_until (or no valid_until).
-- `expires_at`: after it the fact is left out of every read at once, and the sweeper
-- deletes it with its vector and history (`facts_expiring`, partial: only facts that
-- expire are in it, so the sweep reads nothing else).
ALTER TABLE facts ADD COLUMN observed_at TIMESTAMPTZ;
UPDATE facts SET observed_at = created_at;
ALTER TABLE facts ALTER COLUMN observed_at SET NOT NULL;
ALTER TABLE facts ADD COLUMN valid_until TIMESTAMPTZ;
UPDATE facts SET valid_until = superseded_at WHERE superseded_by IS NOT NULL;
ALTER TABLE facts ADD COLUMN expires_at TIMESTAMPTZ;
CREATE INDEX facts_expiring ON facts (expires_at) WHERE expires_at IS NOT NULL;
