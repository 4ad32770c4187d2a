-- Gives a PENDING row, due now, to committed events that have none, walking
-- events by created_at from a cursor ($1) up to a horizon ($2,
-- sweep_horizon.sql). $3: limit; $4: max attempts and $5: retry policy for
-- the new rows; $6: now. The commit order of such events is not known
-- (commit_lsn 0/0): their key order is their insertion order (seq).
--
-- Events are taken in (created_at, seq) order, so what one sweep gives a
-- row is, per key, a prefix of what it will find: an event of a transaction
-- that committed before another began has the earlier created_at (its
-- transaction's start) and the smaller seq, and a transaction's events share
-- created_at and follow seq. The poller never sees a key's later event
-- without its earlier one.
WITH found AS (
    SELECT e.id, e.created_at, e.max_attempts, e.topic, e.key, e.seq FROM outbox.events e
    WHERE e.created_at >= $1 AND e.created_at < $2
      AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = e.id)
    ORDER BY e.created_at, e.seq NULLS FIRST, e.id
    LIMIT $3
), ins AS (
    INSERT INTO outbox.deliveries (event_id, status, attempts, next_attempt_at, max_attempts, retry_policy,
                                   topic, key, commit_lsn, tx_position, seq)
    SELECT id, 'PENDING', 0, coalesce($6::timestamptz, now()), coalesce(max_attempts, $4), $5::jsonb,
           topic, key, '0/0', 0, coalesce(seq, 0)
    FROM found
    ON CONFLICT (event_id) DO NOTHING
    RETURNING 1
)
SELECT (SELECT count(*) FROM found), (SELECT max(created_at) FROM found), (SELECT count(*) FROM ins)
