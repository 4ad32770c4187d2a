-- One event and its status row, for the console's detail page: the status
-- row's columns, then the event's own (outbox.events) or its kept record
-- (outbox.mapped_events), either of which may be gone.
SELECT d.event_id::text, d.status, d.attempts, coalesce(d.max_attempts, 0), coalesce(d.failure_reason, ''),
       coalesce(d.last_error, ''), d.created_at, d.updated_at, d.next_attempt_at, d.sent_at,
       d.kafka_partition, d.kafka_offset, coalesce(d.locked_by, ''), coalesce(d.source, 'outbox.events'),
       coalesce(e.topic, m.topic, d.topic, ''), coalesce(e.key, m.key, d.key, ''), coalesce(e.event_type, m.event_type, ''),
       coalesce(e.headers::text, m.headers::text, ''), e.created_at, coalesce(pg_catalog.convert_to(e.payload::text, 'UTF8'::name), m.value),
       e.id IS NOT NULL OR m.id IS NOT NULL,
       coalesce(d.dead_letter_status, ''), d.dead_lettered_at, coalesce(d.dead_letter_error, '')
FROM outbox.deliveries d
LEFT JOIN outbox.events e ON e.id = d.event_id AND d.source IS NULL -- a mapped event's row shows its copy (claim.sql)
LEFT JOIN outbox.mapped_events m ON m.id = d.event_id
WHERE d.event_id = $1::uuid
