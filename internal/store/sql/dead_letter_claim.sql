-- Takes up to $2 FAILED rows whose failure is not on the dead-letter topic
-- yet, failed at or after $1 (when the topic was first used), oldest
-- failure first, skipping rows another relay holds, and holds them until
-- now + $3 ms (a relay that dies holding them lets them go then). The lease
-- leaves updated_at alone: it is the failure's time, which dead_letter_done
-- checks. Each row comes with its event in binary format, as claim.sql
-- returns it (a mapped event's record is read from outbox.mapped_events).
--
-- $1: since; $2: limit; $3: lease in ms; $4: now.
WITH due AS (
    SELECT event_id FROM outbox.deliveries
    WHERE status = 'FAILED' AND updated_at >= $1
      AND (dead_lettered_at IS NULL OR dead_lettered_at < updated_at)
      AND (dead_letter_lease IS NULL OR dead_letter_lease < coalesce($4::timestamptz, now()))
    ORDER BY updated_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), leased AS (
    UPDATE outbox.deliveries d
    SET dead_letter_lease = coalesce($4::timestamptz, now()) + $3 * interval '1 millisecond'
    FROM due
    WHERE d.event_id = due.event_id
    RETURNING d.event_id, d.failure_reason, d.last_error, d.attempts, d.updated_at, d.topic, d.key, d.source
)
SELECT l.event_id AS relay_event_id, coalesce(l.failure_reason, '') AS relay_reason,
       coalesce(l.last_error, '') AS relay_last_error, l.attempts AS relay_attempts, l.updated_at AS relay_failed_at,
       coalesce(l.topic, '') AS relay_topic, e.*
FROM leased l LEFT JOIN outbox.events e ON e.id = l.event_id AND l.source IS NULL -- a mapped event's: its copy (claim.sql)
ORDER BY l.updated_at, l.event_id
