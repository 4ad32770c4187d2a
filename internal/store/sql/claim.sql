-- Takes due rows, oldest first, skipping rows another instance holds, and
-- returns each with its event in binary format (the layout that serves the
-- stream reads it), in commit order. relay_prev_delay_ms is the wait that
-- led here.
--
-- Per key, in commit order: a row with a key is taken only when no earlier
-- row of its topic and key is PENDING, PROCESSING or, when $4 (the hold
-- policy), FAILED, unless that earlier row is taken in this same claim (and
-- is then published first). Three steps, each an index descent per row or
-- per key:
--   due:     due rows whose key's first unfinished row is PENDING and due
--            (not PROCESSING, FAILED with hold, or waiting for a retry),
--            locked, skipping rows another instance is taking;
--   blocked: per key in due, its first unfinished row that due does not
--            hold; MATERIALIZED, so it runs once: planned inline while
--            outbox.deliveries looked empty, it was re-run for every row of
--            due (500 x 500 index probes per claim; a 200,000-event poll
--            drain took 2 to 4 times as long as without per-key order);
--   taken:   the rows of due before it. A row another instance holds is not
--            in due, so what comes after it waits: two instances never take
--            the same key's rows apart.
--
-- $1: instance; $2: limit; $3: now; $4: hold.
WITH due AS (
    SELECT d.event_id, d.topic, d.key, d.commit_lsn, d.tx_position, d.next_attempt_at, d.updated_at
    FROM outbox.deliveries d
    WHERE d.status = 'PENDING' AND d.next_attempt_at <= coalesce($3::timestamptz, now())
      AND (d.key IS NULL OR (
          SELECT h.status = 'PENDING' AND h.next_attempt_at <= coalesce($3::timestamptz, now())
          FROM outbox.deliveries h
          WHERE h.key IS NOT NULL AND h.status IN ('PENDING', 'PROCESSING', 'FAILED') AND (h.status <> 'FAILED' OR $4::boolean)
            AND h.topic = d.topic AND h.key = d.key
          ORDER BY h.commit_lsn, h.tx_position, h.event_id LIMIT 1))
    ORDER BY d.next_attempt_at, d.commit_lsn, d.tx_position, d.event_id
    LIMIT $2
    FOR UPDATE OF d SKIP LOCKED
), blocked AS MATERIALIZED (
    SELECT k.topic, k.key, b.commit_lsn, b.tx_position, b.event_id
    FROM (SELECT DISTINCT topic, key FROM due WHERE key IS NOT NULL) k CROSS JOIN LATERAL (
        SELECT b.commit_lsn, b.tx_position, b.event_id FROM outbox.deliveries b
        WHERE b.key IS NOT NULL AND b.status IN ('PENDING', 'PROCESSING', 'FAILED') AND (b.status <> 'FAILED' OR $4::boolean)
          AND b.topic = k.topic AND b.key = k.key AND b.event_id NOT IN (SELECT event_id FROM due)
        ORDER BY b.commit_lsn, b.tx_position, b.event_id LIMIT 1) b
), taken AS (
    SELECT due.* FROM due LEFT JOIN blocked bl ON bl.topic = due.topic AND bl.key = due.key
    WHERE due.key IS NULL OR bl.event_id IS NULL
       OR (due.commit_lsn, due.tx_position, due.event_id) < (bl.commit_lsn, bl.tx_position, bl.event_id)
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
