-- The failure time of the ($5 + 1)-th newest FAILED status row matching $1
-- topic, $2 reason, $3 and $4 failed at or after and before (NULL: any),
-- read from the indexes of FAILED rows; no row when fewer match. A search
-- by key or error text goes no further back than it (store.SearchFloor).
SELECT d.updated_at FROM outbox.deliveries d
WHERE d.status = 'FAILED'
  AND ($1::text IS NULL OR d.topic = $1)
  AND ($2::text IS NULL OR d.failure_reason = $2)
  AND ($3::timestamptz IS NULL OR d.updated_at >= $3)
  AND ($4::timestamptz IS NULL OR d.updated_at < $4)
ORDER BY d.updated_at DESC, d.event_id DESC
OFFSET $5 LIMIT 1
