-- Per topic ($1, an array): its newest FAILED event's reason, error and
-- time (deliveries_failed_topic_idx, read backwards), and the oldest
-- created_at among at most $2 of its PENDING rows (deliveries_status_topic_idx)
-- with how many it read: $2 read, the oldest PENDING may be older still.
SELECT t.topic, coalesce(f.failure_reason, ''), coalesce(f.last_error, ''), f.updated_at, p.oldest, coalesce(p.n, 0)
FROM unnest($1::text[]) t (topic)
LEFT JOIN LATERAL (
    SELECT d.failure_reason, d.last_error, d.updated_at FROM outbox.deliveries d
    WHERE d.status = 'FAILED' AND d.topic = t.topic
    ORDER BY d.updated_at DESC, d.event_id DESC LIMIT 1) f ON true
LEFT JOIN LATERAL (
    SELECT min(x.created_at) AS oldest, count(*) AS n FROM (
        SELECT d.created_at FROM outbox.deliveries d
        WHERE d.status <> 'SENT' AND d.status = 'PENDING' AND d.topic = t.topic LIMIT $2) x) p ON true
