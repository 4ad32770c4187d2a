-- Counts outbox.failed_events matching the filters of failed_page.sql, up
-- to $6 (NULL: all; the console bounds it).
SELECT count(*) FROM (
    SELECT 1 FROM outbox.failed_events
    WHERE ($1::text IS NULL OR topic = $1)
      AND ($2::text IS NULL OR event_type = $2)
      AND ($3::text IS NULL OR failure_reason = $3)
      AND ($4::timestamptz IS NULL OR failed_at >= $4)
      AND ($5::timestamptz IS NULL OR failed_at < $5)
    LIMIT $6) f
