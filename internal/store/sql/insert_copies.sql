-- Keeps the records of mapped events (0012_mapped_tables.up.sql) before
-- their status rows are written; a copy that exists (a replay) is left alone.
--
-- $1..$10: Copies in column form (mapped.go).
INSERT INTO outbox.mapped_events (id, source, source_id, topic, key, kafka_key, value, headers, event_type, created_at)
SELECT * FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[], $7::bytea[],
                     $8::jsonb[], $9::text[], $10::timestamptz[])
ON CONFLICT (id) DO NOTHING
