-- Pages through outbox.failed_events, newest last, after a given event
-- ($6; keyset on failed_at, event_id), with optional filters ($1..$5, NULL:
-- any). $7: limit.
SELECT event_id::text, topic, coalesce(key, ''), coalesce(event_type, ''), failure_reason, coalesce(last_error, ''),
       attempts, failed_at, coalesce(dead_letter_status, ''), coalesce(dead_letter_error, '')
FROM outbox.failed_events f
WHERE ($1::text IS NULL OR topic = $1)
  AND ($2::text IS NULL OR event_type = $2)
  AND ($3::text IS NULL OR failure_reason = $3)
  AND ($4::timestamptz IS NULL OR failed_at >= $4)
  AND ($5::timestamptz IS NULL OR failed_at < $5)
  AND ($6::uuid IS NULL OR (failed_at, event_id) >
       (SELECT failed_at, event_id FROM outbox.failed_events WHERE event_id = $6))
ORDER BY failed_at, event_id
LIMIT $7
