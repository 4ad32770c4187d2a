-- Takes due rows, oldest first, skipping rows another instance holds, and
-- returns each with its event in binary format (the layout that serves the
-- stream reads it). relay_prev_delay_ms is the wait that led here.
--
-- $1: instance; $2: limit; $3: now.
WITH due AS (
    SELECT event_id, next_attempt_at, updated_at FROM outbox.deliveries
    WHERE status = 'PENDING' AND next_attempt_at <= coalesce($3::timestamptz, now())
    ORDER BY next_attempt_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
UPDATE outbox.deliveries d
SET status = 'PROCESSING', locked_by = $1, locked_at = coalesce($3::timestamptz, now()),
    updated_at = coalesce($3::timestamptz, now())
FROM due JOIN outbox.events e ON e.id = due.event_id
WHERE d.event_id = due.event_id
RETURNING d.attempts AS relay_attempts, coalesce(d.max_attempts, 0) AS relay_max_attempts,
          d.retry_policy AS relay_retry_policy,
          (extract(epoch FROM due.next_attempt_at - due.updated_at) * 1000)::bigint AS relay_prev_delay_ms,
          e.*
