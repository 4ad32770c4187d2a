-- Retries, resends and operator views.

-- An INSERT may override the number of attempts for one event.
ALTER TABLE outbox.events ADD COLUMN max_attempts integer CHECK (max_attempts > 0);

-- The retry policy is fixed when the status row is created, so changing the
-- relay's configuration (a rolling deploy) does not change events in flight.
ALTER TABLE outbox.deliveries
    ADD COLUMN max_attempts integer NOT NULL DEFAULT 5 CHECK (max_attempts > 0),
    ADD COLUMN retry_policy jsonb;

-- Always set, so that a plain UPDATE ... SET status = 'PENDING' is due at once.
UPDATE outbox.deliveries SET next_attempt_at = updated_at WHERE next_attempt_at IS NULL;
ALTER TABLE outbox.deliveries ALTER COLUMN next_attempt_at SET DEFAULT now(),
                              ALTER COLUMN next_attempt_at SET NOT NULL;

-- Resend one event: back to PENDING now, attempts reset, failure cleared.
-- Works for FAILED, PENDING and SENT (a replay) events, and for events that
-- have no status row yet. Returns false when the event does not exist.
CREATE FUNCTION outbox.resend(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH ev AS (SELECT id, max_attempts FROM outbox.events WHERE id = p_event_id),
    up AS (
        INSERT INTO outbox.deliveries AS d (event_id, status, attempts, next_attempt_at, max_attempts)
        SELECT ev.id, 'PENDING', 0, now(), coalesce(ev.max_attempts, 5) FROM ev
        ON CONFLICT (event_id) DO UPDATE
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;

-- Resend every FAILED event matching all the given filters (NULL: any).
-- Returns how many were resent.
CREATE FUNCTION outbox.resend_failed(
    p_topic      text        DEFAULT NULL,
    p_event_type text        DEFAULT NULL,
    p_from       timestamptz DEFAULT NULL,
    p_to         timestamptz DEFAULT NULL,
    p_reason     text        DEFAULT NULL
) RETURNS bigint
LANGUAGE sql AS $$
    WITH up AS (
        UPDATE outbox.deliveries d
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        FROM outbox.events e
        WHERE e.id = d.event_id AND d.status = 'FAILED'
          AND (p_topic IS NULL OR e.topic = p_topic)
          AND (p_event_type IS NULL OR e.event_type = p_event_type)
          AND (p_from IS NULL OR e.created_at >= p_from)
          AND (p_to IS NULL OR e.created_at < p_to)
          AND (p_reason IS NULL OR d.failure_reason = p_reason)
        RETURNING 1
    )
    SELECT count(*) FROM up;
$$;

-- Every failed event with what an operator needs to decide.
CREATE VIEW outbox.failed_events AS
SELECT e.id AS event_id, e.topic, e.key, e.event_type, e.created_at,
       d.failure_reason, d.last_error, d.attempts, d.max_attempts,
       d.updated_at AS failed_at, d.created_at AS first_attempt_at
FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id
WHERE d.status = 'FAILED';

-- Counts per status and topic, and how long the oldest PENDING row has waited.
CREATE VIEW outbox.delivery_stats AS
SELECT e.topic, d.status, count(*) AS events,
       max(now() - e.created_at) FILTER (WHERE d.status = 'PENDING') AS oldest_pending_age,
       max(d.updated_at) AS last_change
FROM outbox.deliveries d JOIN outbox.events e ON e.id = d.event_id
GROUP BY e.topic, d.status;

-- Paging through failures by time, then id.
CREATE INDEX deliveries_failed_page_idx ON outbox.deliveries (updated_at, event_id)
    WHERE status = 'FAILED';
DROP INDEX outbox.deliveries_failed_idx;
