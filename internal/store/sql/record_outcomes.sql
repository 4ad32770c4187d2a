-- Records what happened to claimed rows, only where this instance ($10)
-- still holds them: a row taken back and claimed again is not touched.
--
-- Each row recorded with an error (a failed attempt: retried or FAILED)
-- adds it to outbox.delivery_attempts in the same statement (0019), and its
-- event keeps the last 10 (store.AttemptsKept): the older ones are deleted
-- (this statement sees the attempts from before it, so it keeps 9 of them).
-- Read from the outcomes, not from the updated rows (RETURNING), so that
-- SENT rows cost nothing more.
--
-- $1..$9: Outcomes in column form (outcomes.go), as insert_outcomes.sql
-- takes them (without the commit order: the rows have theirs); $11: now.
WITH up AS (
    UPDATE outbox.deliveries d
    SET status = u.status, attempts = u.attempts,
        last_error = NULLIF(u.last_error, ''), failure_reason = NULLIF(u.reason, ''),
        next_attempt_at = coalesce($11::timestamptz, now()) + u.delay_ms * interval '1 millisecond',
        kafka_partition = CASE WHEN u.status = 'SENT' THEN NULLIF(u.part, -1) ELSE d.kafka_partition END,
        kafka_offset = CASE WHEN u.status = 'SENT' THEN NULLIF(u.off, -1) ELSE d.kafka_offset END,
        sent_at = CASE WHEN u.status = 'SENT' THEN coalesce($11::timestamptz, now()) ELSE d.sent_at END,
        max_attempts = u.max_attempts,
        locked_by = NULL, locked_at = NULL, updated_at = coalesce($11::timestamptz, now())
    FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[], $6::int[], $7::bigint[],
                $8::bigint[], $9::int[])
         AS u(id, status, attempts, last_error, reason, part, off, delay_ms, max_attempts)
    WHERE d.event_id = u.id AND d.status = 'PROCESSING' AND d.locked_by = $10
), failed AS (
    -- the rows with an error that the update changes: it sees the table
    -- as it was, so these are the ones this instance still holds
    SELECT f.id, f.attempts, NULLIF(f.reason, '') AS reason, f.last_error
    FROM unnest($1::uuid[], $3::int[], $4::text[], $5::text[]) AS f(id, attempts, last_error, reason)
    WHERE f.last_error <> ''
      AND EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = f.id AND d.status = 'PROCESSING' AND d.locked_by = $10)
), attempt AS (
    INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, failure_reason, error)
    SELECT failed.id, failed.attempts, coalesce($11::timestamptz, now()), failed.reason, failed.last_error FROM failed
)
DELETE FROM outbox.delivery_attempts a
USING (SELECT old.event_id, old.id FROM failed
       CROSS JOIN LATERAL (SELECT x.event_id, x.id FROM outbox.delivery_attempts x WHERE x.event_id = failed.id
                           ORDER BY x.id DESC OFFSET 9) old) old
WHERE a.event_id = old.event_id AND a.id = old.id
