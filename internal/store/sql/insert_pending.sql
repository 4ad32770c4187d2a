-- Gives the events $1 a PENDING row, due now, with max attempts $2 (unless
-- the event has its own) and retry policy $3; rows that exist are left
-- alone. Their commit order is not known (commit_lsn 0/0): their key order
-- is their insertion order (seq).
INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, max_attempts, retry_policy,
                               topic, key, commit_lsn, tx_position, seq)
SELECT e.id, 'PENDING', 0, now(), coalesce(e.max_attempts, $2), $3::jsonb, e.topic, e.key, '0/0', 0, coalesce(e.seq, 0)
FROM outbox.events e WHERE e.id = ANY($1::uuid[])
ON CONFLICT (event_id) DO NOTHING
