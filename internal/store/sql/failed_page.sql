-- Pages through the FAILED status rows, oldest failure first, after a
-- cursor ($8 failed_at, $9 event id; NULL: from the oldest), with optional
-- filters ($1 topic, $2 event type, $3 reason, $4 and $5 failed at or
-- after and before, $6 key, $7 a text the last error contains; NULL: any).
-- $10: limit. The cursor is a place in the
-- order, not a row: a page goes on after its last event even when that
-- event is no longer FAILED. Each filter but the type, the key and the error is read from an
-- index of the FAILED rows (deliveries_failed_page_idx,
-- deliveries_failed_topic_idx, deliveries_failed_reason_idx). The type,
-- and the key of a status row without one, are read from the event only
-- for the filters that ask (a search by key reads none: 10,000 lookups
-- were most of its time), and the shown rows' from e.
SELECT d.event_id::text, coalesce(d.topic, e.topic, ''), coalesce(d.key, e.key, ''), coalesce(e.event_type, ''),
       coalesce(d.failure_reason, ''), coalesce(d.last_error, ''), d.attempts, d.updated_at,
       coalesce(d.dead_letter_status, ''), coalesce(d.dead_letter_error, '')
FROM outbox.deliveries d
LEFT JOIN LATERAL (SELECT r.topic, r.key, r.event_type FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1) e ON true
WHERE d.status = 'FAILED'
  AND ($1::text IS NULL OR d.topic = $1)
  AND ($2::text IS NULL OR (SELECT r.event_type FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1) = $2)
  AND ($3::text IS NULL OR d.failure_reason = $3)
  AND ($4::timestamptz IS NULL OR d.updated_at >= $4)
  AND ($5::timestamptz IS NULL OR d.updated_at < $5)
  AND ($6::text IS NULL OR coalesce(d.key, (SELECT r.key FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1)) = $6)
  AND ($7::text IS NULL OR pg_catalog.strpos(d.last_error, $7) > 0)
  AND ($8::timestamptz IS NULL OR (d.updated_at, d.event_id) > ($8, $9::uuid))
ORDER BY d.updated_at, d.event_id
LIMIT $10
