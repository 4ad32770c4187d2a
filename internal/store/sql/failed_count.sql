-- Counts the FAILED status rows matching $1 topic, $2 reason, $3 and $4
-- failed at or after and before (NULL: any), up to $5 (NULL: all), from
-- the indexes of FAILED rows. With an event type: failed_count_type.sql.
SELECT count(*) FROM (
    SELECT 1 FROM outbox.deliveries d
    WHERE d.status = 'FAILED'
      AND ($1::text IS NULL OR d.topic = $1)
      AND ($2::text IS NULL OR d.failure_reason = $2)
      AND ($3::timestamptz IS NULL OR d.updated_at >= $3)
      AND ($4::timestamptz IS NULL OR d.updated_at < $4)
    LIMIT $5) f
