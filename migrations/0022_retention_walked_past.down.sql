DROP FUNCTION outbox.retention_walk_mapped(timestamptz, timestamptz, integer, bigint);
DROP FUNCTION outbox.retention_walk(timestamptz, timestamptz, integer, bigint);
ALTER TABLE outbox.retention_progress DROP COLUMN walked_past, DROP COLUMN walked_past_at;
