-- Per-key order where the commit position is not known: the backfill of a
-- new slot, the gap sweep, --mode poll, the catch-up on a promoted standby
-- and resends of events without a row. Those rows were ordered by event id,
-- which is random below the millisecond (outbox.uuid_v7()) or altogether
-- (an application's own ids).
--
-- outbox.events.seq is the event's place in the insertion order, filled by
-- default from a sequence. nextval() is not transactional and the sequence
-- caches nothing (CACHE 1, the default: a per-session cache would hand out
-- ranges out of order), so the values increase within a session and, across
-- transactions, an event of a transaction that committed before another
-- began has the smaller one. Applications keep writing the same INSERT and
-- must not set seq themselves.
--
-- Safe on a large live outbox: adding a column without a default and then
-- giving it one change the catalog only (no rewrite, no scan; the ACCESS
-- EXCLUSIVE lock is held for milliseconds, once the transactions using the
-- table have finished). Existing events keep seq NULL: they were all written
-- before any new one and sort first, by id as before.
CREATE SEQUENCE outbox.events_seq_seq AS bigint;
ALTER TABLE outbox.events ADD COLUMN seq bigint;
ALTER TABLE outbox.events ALTER COLUMN seq SET DEFAULT nextval('outbox.events_seq_seq');
ALTER SEQUENCE outbox.events_seq_seq OWNED BY outbox.events.seq;
COMMENT ON COLUMN outbox.events.seq IS
    'insertion order, set by default (do not set it): orders a key''s events when their commit position is unknown';

-- Every status row carries its event's seq (0 for events from before this
-- version), and the key order of unfinished rows becomes (seq, commit_lsn,
-- tx_position, event_id): insertion order, whatever path wrote the row, so
-- rows the stream queued and rows written without a commit position (the
-- backfill, the sweep, a resend: commit_lsn 0/0) interleave correctly. Rows
-- from before this version (seq 0) come first, in their version 8 order.
-- A column with a constant default is added without a rewrite.
ALTER TABLE outbox.deliveries ADD COLUMN seq bigint NOT NULL DEFAULT 0;

-- The two order indexes cover unfinished rows only (the partial indexes of
-- version 8): building them scans the table once under a SHARE lock, which
-- holds status writes (not event inserts) for that scan.
DROP INDEX outbox.deliveries_key_order_idx;
CREATE INDEX deliveries_key_order_idx ON outbox.deliveries (topic, key, seq, commit_lsn, tx_position, event_id)
    WHERE key IS NOT NULL AND status IN ('PENDING', 'PROCESSING', 'FAILED');
DROP INDEX outbox.deliveries_pending_due_order_idx;
CREATE INDEX deliveries_pending_due_order_idx ON outbox.deliveries (next_attempt_at, seq, commit_lsn, tx_position, event_id)
    WHERE status = 'PENDING';

-- Resend one event, as before; an event without a row gets one in its
-- key's insertion order.
CREATE OR REPLACE FUNCTION outbox.resend(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH ev AS (SELECT id, topic, key, max_attempts, seq FROM outbox.events WHERE id = p_event_id),
    up AS (
        INSERT INTO outbox.deliveries AS d
            (event_id, status, attempts, next_attempt_at, max_attempts, topic, key, commit_lsn, tx_position, seq)
        SELECT ev.id, 'PENDING', 0, now(), ev.max_attempts, ev.topic, ev.key, '0/0', 0, coalesce(ev.seq, 0) FROM ev
        ON CONFLICT (event_id) DO UPDATE
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;

CREATE OR REPLACE VIEW outbox.held_keys AS
SELECT h.topic, h.key, h.event_id AS blocking_event_id, h.status, h.failure_reason, h.last_error,
       h.attempts, h.next_attempt_at, h.updated_at AS since,
       (SELECT count(*) FROM outbox.deliveries q
        WHERE q.topic = h.topic AND q.key = h.key AND q.key IS NOT NULL
          AND q.status IN ('PENDING', 'PROCESSING', 'FAILED')
          AND (q.seq, q.commit_lsn, q.tx_position, q.event_id) > (h.seq, h.commit_lsn, h.tx_position, h.event_id)) AS queued
FROM (
    SELECT DISTINCT ON (topic, key) event_id, topic, key, status, failure_reason, last_error, attempts,
           next_attempt_at, updated_at, commit_lsn, tx_position, seq
    FROM outbox.deliveries
    WHERE key IS NOT NULL AND status IN ('PENDING', 'PROCESSING', 'FAILED')
    ORDER BY topic, key, seq, commit_lsn, tx_position, event_id
) h
WHERE h.status = 'FAILED' OR h.attempts > 0;
