-- The records of mapped events $1, for the poller (claim.sql returns their
-- status rows without an outbox.events row).
SELECT id, source, source_id, topic, pg_catalog.convert_to(key, 'UTF8'::name), value, headers, event_type, created_at,
       coalesce(partition, -1), coalesce(seq, 0)
FROM outbox.mapped_events WHERE id = ANY($1::uuid[])
