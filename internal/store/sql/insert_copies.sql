-- Keeps the records of mapped events (0012_mapped_tables.up.sql) before
-- their status rows are written; a copy that exists (a replay) is left alone.
--
-- $1..$11: Copies in column form (mapped.go); a partition of -1 is none.
INSERT INTO outbox.mapped_events (id, source, source_id, topic, key, value, headers, event_type, created_at, partition, seq)
SELECT id, source, source_id, topic, key, value, headers, event_type, created_at, NULLIF(partition, -1), seq
FROM unnest($1::uuid[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bytea[],
            $7::jsonb[], $8::text[], $9::timestamptz[], $10::int[], $11::bigint[])
     AS u(id, source, source_id, topic, key, value, headers, event_type, created_at, partition, seq)
ON CONFLICT (id) DO NOTHING
