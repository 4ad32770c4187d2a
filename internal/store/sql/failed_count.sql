-- Counts the FAILED status rows matching the filters of failed_page.sql,
-- up to $6 (NULL: all), from the indexes of FAILED rows; the type's filter
-- reads each one's event.
SELECT count(*) FROM (
    SELECT 1 FROM outbox.deliveries d
    WHERE d.status = 'FAILED'
      AND ($1::text IS NULL OR d.topic = $1)
      AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM outbox.relayed_events r WHERE r.id = d.event_id AND r.event_type = $2))
      AND ($3::text IS NULL OR d.failure_reason = $3)
      AND ($4::timestamptz IS NULL OR d.updated_at >= $4)
      AND ($5::timestamptz IS NULL OR d.updated_at < $5)
    LIMIT $6) f
