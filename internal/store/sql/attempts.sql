-- An event's failed attempts, newest first: the last AttemptsKept
-- (outbox.delivery_attempts keeps no more). $1: the event id.
SELECT a.attempt, a.failed_at, coalesce(a.failure_reason, ''), a.error
FROM outbox.delivery_attempts a
WHERE a.event_id = $1::uuid
ORDER BY a.id DESC
