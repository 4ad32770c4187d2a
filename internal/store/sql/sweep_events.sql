-- The events the gap sweep would give a PENDING row (sweep.sql: committed,
-- without a status row, created_at in [$1, $2), in (created_at, seq)
-- order, at most $3), read for delivery: each with its created_at, whether
-- its key waits, and its columns in binary format (the layout that serves
-- the stream reads them).
--
-- A key waits when it has rows the stream would queue behind
-- (queued_keys.sql): with the hold policy ($4), any PENDING, PROCESSING or
-- FAILED row; without it, a row queued and not yet attempted. One probe of
-- deliveries_key_order_idx per event.
--
-- The events are chosen on their ordering columns alone and then read by
-- primary key: sorted with every column, 200,000 candidates spilled 100 MB
-- to disk to give 5,000 (160 ms a statement).
SELECT f.created_at AS relay_created_at, w.waits IS NOT NULL AS relay_waits, e.*
FROM (
    SELECT e.id, e.created_at, e.seq, e.topic, e.key FROM outbox.events e
    WHERE e.created_at >= $1 AND e.created_at < $2
      AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = e.id)
    ORDER BY e.created_at, e.seq NULLS FIRST, e.id
    LIMIT $3
) f
CROSS JOIN LATERAL (SELECT e.* FROM outbox.events e WHERE e.id = f.id OFFSET 0) e
LEFT JOIN LATERAL (
    SELECT true AS waits FROM outbox.deliveries h
    WHERE f.key IS NOT NULL AND h.key IS NOT NULL AND h.status IN ('PENDING', 'PROCESSING', 'FAILED')
      AND h.topic = f.topic AND h.key = f.key
      AND (CASE WHEN $4::boolean THEN true ELSE h.status IN ('PENDING', 'PROCESSING') AND h.attempts = 0 END)
    LIMIT 1) w ON true
ORDER BY f.created_at, f.seq NULLS FIRST, f.id
