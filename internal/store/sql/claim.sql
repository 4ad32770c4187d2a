-- Takes due rows, oldest first, skipping rows another instance holds, and
-- returns each with its event in binary format (the layout that serves the
-- stream reads it), in commit order. relay_prev_delay_ms is the wait that
-- led here.
--
-- Per key, in commit order: a row with a key is taken only when no earlier
-- row of its topic and key is PENDING, PROCESSING or, when $4 (the hold
-- policy), FAILED, unless that earlier row is taken in this same claim (and
-- is then published first). Two steps:
--   due:   due rows whose key has no earlier row in the way that this claim
--          cannot take (one PROCESSING, FAILED with hold, or not due yet),
--          locked, skipping rows another instance is taking;
--   taken: those whose every earlier unfinished row is in due too. A row
--          another instance holds is not in due, so what comes after it
--          waits: two instances never take the same key's rows apart.
--
-- $1: instance; $2: limit; $3: now; $4: hold.
WITH due AS (
    SELECT d.event_id, d.topic, d.key, d.commit_lsn, d.tx_position, d.next_attempt_at, d.updated_at
    FROM outbox.deliveries d
    WHERE d.status = 'PENDING' AND d.next_attempt_at <= coalesce($3::timestamptz, now())
      AND (d.key IS NULL OR NOT EXISTS (
          SELECT 1 FROM outbox.deliveries b
          WHERE b.key IS NOT NULL AND b.status IN ('PENDING', 'PROCESSING', 'FAILED')
            AND b.topic = d.topic AND b.key = d.key
            AND (b.commit_lsn, b.tx_position, b.event_id) < (d.commit_lsn, d.tx_position, d.event_id)
            AND (b.status = 'PROCESSING' OR (b.status = 'FAILED' AND $4::boolean)
                 OR (b.status = 'PENDING' AND b.next_attempt_at > coalesce($3::timestamptz, now())))))
    ORDER BY d.next_attempt_at, d.commit_lsn, d.tx_position
    LIMIT $2
    FOR UPDATE OF d SKIP LOCKED
), taken AS (
    SELECT due.* FROM due
    WHERE due.key IS NULL OR NOT EXISTS (
        SELECT 1 FROM outbox.deliveries b
        WHERE b.key IS NOT NULL AND b.status IN ('PENDING', 'PROCESSING', 'FAILED')
          AND b.topic = due.topic AND b.key = due.key
          AND (b.commit_lsn, b.tx_position, b.event_id) < (due.commit_lsn, due.tx_position, due.event_id)
          AND (b.status <> 'FAILED' OR $4::boolean)
          AND NOT EXISTS (SELECT 1 FROM due o WHERE o.event_id = b.event_id))
), claimed AS (
    UPDATE outbox.deliveries d
    SET status = 'PROCESSING', locked_by = $1, locked_at = coalesce($3::timestamptz, now()),
        updated_at = coalesce($3::timestamptz, now())
    FROM taken JOIN outbox.events e ON e.id = taken.event_id
    WHERE d.event_id = taken.event_id
    RETURNING d.attempts AS relay_attempts, coalesce(d.max_attempts, 0) AS relay_max_attempts,
              d.retry_policy AS relay_retry_policy,
              (extract(epoch FROM taken.next_attempt_at - taken.updated_at) * 1000)::bigint AS relay_prev_delay_ms,
              taken.commit_lsn AS relay_commit_lsn, taken.tx_position AS relay_tx_position, e.*
)
SELECT * FROM claimed ORDER BY relay_commit_lsn NULLS FIRST, relay_tx_position NULLS FIRST, id
