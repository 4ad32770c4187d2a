-- Gives the events $1 a PENDING row, due now, with max attempts $2 (unless
-- the event has its own) and retry policy $3; rows that exist are left
-- alone.
INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, max_attempts, retry_policy)
SELECT e.id, 'PENDING', 0, now(), coalesce(e.max_attempts, $2), $3::jsonb
FROM outbox.events e WHERE e.id = ANY($1::uuid[])
ON CONFLICT (event_id) DO NOTHING
