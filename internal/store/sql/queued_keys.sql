-- The keys whose new events the stream must queue under the hold policy:
-- every key with a PENDING, PROCESSING or FAILED row, each with whether it
-- is draining (its first unfinished event is queued and will be delivered
-- next: not FAILED, not waiting for a retry). Under continue, QueuedKeys
-- reads queued_keys_continue.sql, where a failure alone does not stop a key.
--
-- The keys are walked one index descent each (a loose index scan over
-- deliveries_key_order_idx), not row by row, and each key's rows are read in
-- that index's order: an EXISTS probe was planned as a sequential scan
-- (cheap to its first row, the planner thought), a scan of the whole table
-- per key. $1: at most this many.
WITH RECURSIVE k AS (
    (SELECT d.topic, d.key FROM outbox.deliveries d
     WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING', 'FAILED')
     ORDER BY d.topic, d.key LIMIT 1)
    UNION ALL
    SELECT n.topic, n.key FROM k CROSS JOIN LATERAL (
        SELECT d.topic, d.key FROM outbox.deliveries d
        WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING', 'FAILED')
          AND (d.topic, d.key) > (k.topic, k.key)
        ORDER BY d.topic, d.key LIMIT 1) n
)
SELECT k.topic, k.key, coalesce(h.status IN ('PENDING', 'PROCESSING') AND h.attempts = 0, false) AS draining
FROM k LEFT JOIN LATERAL (
    SELECT d.status, d.attempts FROM outbox.deliveries d
    WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING', 'FAILED')
      AND d.topic = k.topic AND d.key = k.key
    ORDER BY d.seq, d.commit_lsn, d.tx_position, d.event_id LIMIT 1) h ON true
LIMIT $1
