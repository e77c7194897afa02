-- Imported conversations queued for extraction (`POST /api/import?extract=true`), one
-- more count of an import's progress.
ALTER TABLE imports ADD COLUMN queued_for_extraction BIGINT NOT NULL DEFAULT 0;
