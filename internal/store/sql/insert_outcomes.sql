-- Records a batch of stream outcomes in one statement and returns how many
-- of their events it could see. A row that appeared meanwhile belongs to
-- whoever wrote it and is left alone. A row whose event is not visible is
-- left out: the event was deleted, or (for a moment after a walsender sends
-- a commit) it is not visible to other sessions yet.
--
-- The existence check is a LATERAL probe per row so that the plan cannot
-- turn around: a semi-join planned while outbox.events looked small walked
-- the whole table once per status row (minutes per statement after a
-- 1,000,000-row transaction). The store's status pool also disables
-- sequential scans, so the probe is always the primary key.
--
-- Rows that are not SENT (queued, waiting for a retry, failed) take their
-- event's topic and key, read by the same probe, and their place in the
-- commit order: they can hold their key (0008_key_order.up.sql). Every row
-- takes the event's insertion order (seq), the key order of queued rows
-- (0009_insertion_order.up.sql).
--
-- A queued row with delay -1 (store.UntilBackfilled) waits, next_attempt_at
-- 'infinity', until no backfill is running (release_backfilled.sql).
--
-- Each row written with an error (a failed attempt: retried or FAILED) adds
-- it to outbox.delivery_attempts in the same statement (0019); an event
-- whose status row existed before the statement (a batch written again, a
-- row the gap sweep wrote) adds nothing: the statement sees the table as it
-- was, so this is the row it inserts. Read from the outcomes, not from the
-- inserted rows (RETURNING), so that the SENT rows of the batch cost
-- nothing more. Its event has no attempts yet (they go with its status
-- row), so nothing is trimmed here (record_outcomes.sql trims).
--
-- $1..$11: Outcomes in column form (outcomes.go); $12: retry policy; $13: now.
WITH u AS (
    SELECT u.*, seen.topic, seen.key, seen.seq
    FROM unnest($1::uuid[], $2::text[], $3::int[], $4::text[], $5::text[], $6::int[], $7::bigint[],
                $8::bigint[], $9::int[], $10::bigint[], $11::int[])
         AS u(id, status, attempts, last_error, reason, part, off, delay_ms, max_attempts, lsn, pos)
    CROSS JOIN LATERAL (SELECT e.topic, e.key, e.seq FROM outbox.events e WHERE e.id = u.id LIMIT 1) AS seen
), ins AS (
    INSERT INTO outbox.deliveries
        (event_id, status, attempts, last_error, failure_reason, next_attempt_at, kafka_partition, kafka_offset,
         sent_at, max_attempts, retry_policy, topic, key, commit_lsn, tx_position, seq)
    SELECT u.id, u.status, u.attempts, NULLIF(u.last_error, ''), NULLIF(u.reason, ''),
           CASE WHEN u.delay_ms < 0 THEN 'infinity'
                ELSE coalesce($13::timestamptz, now()) + u.delay_ms * interval '1 millisecond' END,
           NULLIF(u.part, -1), NULLIF(u.off, -1),
           CASE WHEN u.status = 'SENT' THEN coalesce($13::timestamptz, now()) END,
           u.max_attempts, $12::jsonb,
           CASE WHEN u.status <> 'SENT' THEN u.topic END, CASE WHEN u.status <> 'SENT' THEN u.key END,
           CASE WHEN u.status <> 'SENT' THEN '0/0'::pg_lsn + u.lsn END,
           CASE WHEN u.status <> 'SENT' THEN u.pos END, coalesce(u.seq, 0)
    FROM u
    ON CONFLICT (event_id) DO NOTHING
), attempt AS (
    INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, failure_reason, error)
    SELECT u.id, u.attempts, coalesce($13::timestamptz, now()), NULLIF(u.reason, ''), u.last_error
    FROM u
    WHERE u.last_error <> ''
      AND NOT EXISTS (SELECT 1 FROM outbox.deliveries d WHERE d.event_id = u.id)
)
SELECT count(*) FROM u
