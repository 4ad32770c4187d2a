-- queued_keys.sql under --failed-key-policy continue: the keys with a row
-- queued and not yet attempted (PENDING or PROCESSING, attempts 0), each
-- with whether it is draining (its first PENDING or PROCESSING row is such
-- a row: it is delivered next, not waiting for a retry).
--
-- The keys are walked one descent each over deliveries_queued_key_idx
-- (indexes.sql), which holds only such rows: a FAILED row holds no key
-- under continue, and walking every key with a FAILED row (queued_keys.sql's
-- walk, which the hold policy needs) read all of them on every refresh.
-- Without that index the walk reads deliveries_key_order_idx: right, and
-- as slow as before. $1: at most this many.
WITH RECURSIVE k AS (
    (SELECT d.topic, d.key FROM outbox.deliveries d
     WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING') AND d.attempts = 0
     ORDER BY d.topic, d.key LIMIT 1)
    UNION ALL
    SELECT n.topic, n.key FROM k CROSS JOIN LATERAL (
        SELECT d.topic, d.key FROM outbox.deliveries d
        WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING') AND d.attempts = 0
          AND (d.topic, d.key) > (k.topic, k.key)
        ORDER BY d.topic, d.key LIMIT 1) n
)
SELECT k.topic, k.key, coalesce(h.status IN ('PENDING', 'PROCESSING') AND h.attempts = 0, false) AS draining
FROM k LEFT JOIN LATERAL (
    SELECT d.status, d.attempts FROM outbox.deliveries d
    WHERE d.key IS NOT NULL AND d.status IN ('PENDING', 'PROCESSING')
      AND d.topic = k.topic AND d.key = k.key
    ORDER BY d.seq, d.commit_lsn, d.tx_position, d.event_id LIMIT 1) h ON true
LIMIT $1
