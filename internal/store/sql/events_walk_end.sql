-- Where events_page.sql's walk ended: the $4th status row before event $1
-- (NULL: from the newest) matching $2 status and $3 reason (NULL: any), as
-- events_page.sql walks them; no row when the walk reached the oldest.
SELECT d.event_id::text FROM outbox.deliveries d
WHERE ($1::uuid IS NULL OR d.event_id < $1)
  AND ($2::text IS NULL OR d.status = $2)
  AND ($3::text IS NULL OR d.failure_reason = $3)
ORDER BY d.event_id DESC
OFFSET $4 - 1 LIMIT 1
