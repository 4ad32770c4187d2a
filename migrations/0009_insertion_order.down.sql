-- Back to version 8: rows without a commit position are ordered by event id
-- again.
CREATE OR REPLACE VIEW outbox.held_keys AS
SELECT h.topic, h.key, h.event_id AS blocking_event_id, h.status, h.failure_reason, h.last_error,
       h.attempts, h.next_attempt_at, h.updated_at AS since,
       (SELECT count(*) FROM outbox.deliveries q
        WHERE q.topic = h.topic AND q.key = h.key AND q.key IS NOT NULL
          AND q.status IN ('PENDING', 'PROCESSING', 'FAILED')
          AND (q.commit_lsn, q.tx_position, q.event_id) > (h.commit_lsn, h.tx_position, h.event_id)) AS queued
FROM (
    SELECT DISTINCT ON (topic, key) event_id, topic, key, status, failure_reason, last_error, attempts,
           next_attempt_at, updated_at, commit_lsn, tx_position
    FROM outbox.deliveries
    WHERE key IS NOT NULL AND status IN ('PENDING', 'PROCESSING', 'FAILED')
    ORDER BY topic, key, commit_lsn, tx_position, event_id
) h
WHERE h.status = 'FAILED' OR h.attempts > 0;

CREATE OR REPLACE FUNCTION outbox.resend(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH ev AS (SELECT id, topic, key, max_attempts FROM outbox.events WHERE id = p_event_id),
    up AS (
        INSERT INTO outbox.deliveries AS d
            (event_id, status, attempts, next_attempt_at, max_attempts, topic, key, commit_lsn, tx_position)
        SELECT ev.id, 'PENDING', 0, now(), ev.max_attempts, ev.topic, ev.key, '0/0', 0 FROM ev
        ON CONFLICT (event_id) DO UPDATE
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;

DROP INDEX outbox.deliveries_key_order_idx;
CREATE INDEX deliveries_key_order_idx ON outbox.deliveries (topic, key, commit_lsn, tx_position, event_id)
    WHERE key IS NOT NULL AND status IN ('PENDING', 'PROCESSING', 'FAILED');
DROP INDEX outbox.deliveries_pending_due_order_idx;
CREATE INDEX deliveries_pending_due_order_idx ON outbox.deliveries (next_attempt_at, commit_lsn, tx_position, event_id)
    WHERE status = 'PENDING';

ALTER TABLE outbox.deliveries DROP COLUMN seq;
ALTER TABLE outbox.events DROP COLUMN seq;
