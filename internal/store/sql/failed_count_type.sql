-- failed_count.sql with an event type ($2, not NULL): the type is read
-- from each event, so the count walks the newest $6 FAILED rows matching
-- the other filters (NULL: all) and counts those of the type among them;
-- then how many it walked (when $6, more may be older).
SELECT count(*) FILTER (WHERE e.event_type = $2), count(*)
FROM (SELECT d.event_id FROM outbox.deliveries d
      WHERE d.status = 'FAILED'
        AND ($1::text IS NULL OR d.topic = $1)
        AND ($3::text IS NULL OR d.failure_reason = $3)
        AND ($4::timestamptz IS NULL OR d.updated_at >= $4)
        AND ($5::timestamptz IS NULL OR d.updated_at < $5)
      ORDER BY d.updated_at DESC, d.event_id DESC
      LIMIT $6) d
LEFT JOIN LATERAL (SELECT r.event_type FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1) e ON true
