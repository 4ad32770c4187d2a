-- Back to version 11: the functions and views over outbox.events alone, as
-- versions 9, 10 and 2 wrote them (a migration cannot call an older one).
-- Status rows of mapped events go with their copies.
DELETE FROM outbox.deliveries WHERE source IS NOT NULL;
DELETE FROM outbox.deliveries d USING outbox.mapped_events m WHERE d.event_id = m.id;

DROP VIEW outbox.failed_events;
DROP VIEW outbox.delivery_stats;
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

DROP FUNCTION outbox.resend(text, text);

CREATE OR REPLACE FUNCTION outbox.resend_failed(
    p_topic        text        DEFAULT NULL,
    p_event_type   text        DEFAULT NULL,
    p_from         timestamptz DEFAULT NULL,
    p_to           timestamptz DEFAULT NULL,
    p_reason       text        DEFAULT NULL,
    p_failed_since timestamptz DEFAULT NULL,
    p_failed_until timestamptz DEFAULT NULL
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
          AND (p_failed_since IS NULL OR d.updated_at >= p_failed_since)
          AND (p_failed_until IS NULL OR d.updated_at < p_failed_until)
        RETURNING 1
    )
    SELECT count(*) FROM up;
$$;

CREATE OR REPLACE FUNCTION outbox.skip_failed(
    p_topic        text        DEFAULT NULL,
    p_event_type   text        DEFAULT NULL,
    p_reason       text        DEFAULT NULL,
    p_failed_since timestamptz DEFAULT NULL,
    p_failed_until timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE sql AS $$
    WITH up AS (
        UPDATE outbox.deliveries d
        SET status = 'SKIPPED', locked_by = NULL, locked_at = NULL, updated_at = now()
        FROM outbox.events e
        WHERE e.id = d.event_id AND d.status = 'FAILED'
          AND (p_topic IS NULL OR e.topic = p_topic)
          AND (p_event_type IS NULL OR e.event_type = p_event_type)
          AND (p_reason IS NULL OR d.failure_reason = p_reason)
          AND (p_failed_since IS NULL OR d.updated_at >= p_failed_since)
          AND (p_failed_until IS NULL OR d.updated_at < p_failed_until)
        RETURNING 1
    )
    SELECT count(*) FROM up;
$$;

CREATE OR REPLACE FUNCTION outbox.purge(older_than interval, status text DEFAULT 'SENT', batch int DEFAULT 1000,
                             topic text DEFAULT NULL, event_type text DEFAULT NULL, reason text DEFAULT NULL,
                             since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL) RETURNS bigint
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
          AND (purge.event_type IS NULL OR e.event_type = purge.event_type)
          AND (purge.reason IS NULL OR d.failure_reason = purge.reason)
          AND (purge.since IS NULL OR e.created_at >= purge.since)
          AND (purge.until IS NULL OR e.created_at < purge.until)
        ORDER BY e.created_at
        LIMIT purge.batch
        FOR UPDATE OF d SKIP LOCKED
    )
    DELETE FROM outbox.events e USING doomed WHERE e.id = doomed.id;
    GET DIAGNOSTICS deleted = ROW_COUNT;
    RETURN deleted;
END $$;

DROP VIEW outbox.relayed_events;
DROP FUNCTION outbox.event_id(text, text);
DROP TABLE outbox.mapped_events;
DROP INDEX outbox.deliveries_mapped_created_at_idx;
ALTER TABLE outbox.deliveries DROP COLUMN source;
