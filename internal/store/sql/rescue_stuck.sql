-- Takes back rows left PROCESSING by an instance that died. That counts as
-- an attempt, so an event that crashes the relay cannot loop, and a failed
-- one: outbox.delivery_attempts gets it, as record_outcomes.sql adds and
-- trims them (the last 10 of each event).
--
-- $1: threshold in ms; $2: limit; $3: the relay's max attempts, for rows
-- without their own; $4: now.
WITH stuck AS (
    SELECT event_id FROM outbox.deliveries
    WHERE status = 'PROCESSING'
      AND locked_at < coalesce($4::timestamptz, now()) - $1 * interval '1 millisecond'
    ORDER BY locked_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), up AS (
    UPDATE outbox.deliveries d
    SET attempts = d.attempts + 1,
        status = CASE WHEN d.attempts + 1 >= coalesce(d.max_attempts, $3) THEN 'FAILED' ELSE 'PENDING' END,
        failure_reason = CASE WHEN d.attempts + 1 >= coalesce(d.max_attempts, $3) THEN 'RETRIES_EXHAUSTED' END,
        last_error = pg_catalog.format('stuck in PROCESSING since %s (claimed by %s): the relay holding it stopped without finishing',
                                       d.locked_at, d.locked_by),
        next_attempt_at = coalesce($4::timestamptz, now()), locked_by = NULL, locked_at = NULL,
        updated_at = coalesce($4::timestamptz, now())
    FROM stuck
    WHERE d.event_id = stuck.event_id
    RETURNING d.event_id, d.status, d.last_error, d.attempts, d.failure_reason
), attempt AS (
    INSERT INTO outbox.delivery_attempts (event_id, attempt, failed_at, failure_reason, error)
    SELECT up.event_id, up.attempts, coalesce($4::timestamptz, now()), up.failure_reason, up.last_error FROM up
), trimmed AS (
    DELETE FROM outbox.delivery_attempts a
    USING (SELECT old.event_id, old.id FROM up
           CROSS JOIN LATERAL (SELECT x.event_id, x.id FROM outbox.delivery_attempts x WHERE x.event_id = up.event_id
                               ORDER BY x.id DESC OFFSET 9) old) old
    WHERE a.event_id = old.event_id AND a.id = old.id
)
SELECT up.event_id::text, up.status, up.last_error, up.attempts, coalesce(up.failure_reason, ''),
       (SELECT e.topic FROM outbox.relayed_events e WHERE e.id = up.event_id)
FROM up
