-- Per-key order: queued events (a spill during a Kafka outage, or events
-- held behind a failed one of their key) are delivered by the poller in
-- commit order per topic and key.
--
-- Rows that can queue or hold a key (written PENDING, PROCESSING or FAILED)
-- carry their event's topic and key and their place in the commit order:
-- the commit LSN of the transaction and the event's position in it. Rows
-- the stream writes SENT leave them NULL (they never hold anything). Rows
-- the relay writes without the stream (the gap sweep, a resend of an event
-- with no row) get commit_lsn 0/0: they are older than anything queued.
ALTER TABLE outbox.deliveries
    ADD COLUMN topic       text,
    ADD COLUMN key         text,
    ADD COLUMN commit_lsn  pg_lsn,
    ADD COLUMN tx_position integer;

-- SKIPPED: an operator gave up on a FAILED event (outbox.skip); it is never
-- delivered and no longer holds its key.
ALTER TABLE outbox.deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE outbox.deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED', 'SKIPPED'));

UPDATE outbox.deliveries d SET topic = e.topic, key = e.key, commit_lsn = '0/0', tx_position = 0
FROM outbox.events e
WHERE e.id = d.event_id AND d.status IN ('PENDING', 'PROCESSING', 'FAILED');

-- The unfinished events of each key in commit order: the poller's per-key
-- claim, the stream's list of keys to queue, outbox.held_keys.
CREATE INDEX deliveries_key_order_idx ON outbox.deliveries (topic, key, commit_lsn, tx_position, event_id)
    WHERE key IS NOT NULL AND status IN ('PENDING', 'PROCESSING', 'FAILED');

-- Due rows for the poller, oldest first and, among rows due together, in
-- commit order.
CREATE INDEX deliveries_pending_due_order_idx ON outbox.deliveries (next_attempt_at, commit_lsn, tx_position, event_id)
    WHERE status = 'PENDING';
DROP INDEX outbox.deliveries_pending_due_idx;

-- Resend one event, as before; an event without a row gets one with its
-- topic and key, ordered before anything queued for its key.
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

-- Give up on one FAILED event: it becomes SKIPPED, is never delivered, and
-- releases its key. Returns false (and changes nothing) unless the event is
-- FAILED.
CREATE FUNCTION outbox.skip(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH up AS (
        UPDATE outbox.deliveries SET status = 'SKIPPED', locked_by = NULL, locked_at = NULL, updated_at = now()
        WHERE event_id = p_event_id AND status = 'FAILED'
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;

-- Keys whose earliest unfinished event is FAILED or waiting for a retry,
-- with that event and how many events of the key are queued behind it.
-- With --failed-key-policy=hold both stop the key; with continue only the
-- events already queued behind a retry wait (queued > 0), and a FAILED
-- event holds nothing.
CREATE VIEW outbox.held_keys AS
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

-- Purge may take SKIPPED events too.
CREATE OR REPLACE FUNCTION outbox.purge(older_than interval, status text DEFAULT 'SENT', batch int DEFAULT 1000,
                                        topic text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    deleted bigint;
BEGIN
    IF purge.status IS NULL OR purge.status NOT IN ('SENT', 'FAILED', 'SKIPPED') THEN
        RAISE EXCEPTION 'outbox.purge: status must be SENT, FAILED or SKIPPED, not %', purge.status
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF purge.batch IS NULL OR purge.batch < 1 THEN
        RAISE EXCEPTION 'outbox.purge: batch must be at least 1' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    WITH doomed AS (
        SELECT e.id FROM outbox.events e JOIN outbox.deliveries d ON d.event_id = e.id
        WHERE e.created_at < now() - purge.older_than AND d.status = purge.status
          AND (purge.topic IS NULL OR e.topic = purge.topic)
        ORDER BY e.created_at
        LIMIT purge.batch
        FOR UPDATE OF d SKIP LOCKED
    )
    DELETE FROM outbox.events e USING doomed WHERE e.id = doomed.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END $$;
