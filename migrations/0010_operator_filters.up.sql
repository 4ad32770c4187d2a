-- The operator commands filter alike (outbox-relay failed, resend, skip,
-- purge --topic --event-type --reason --since --until). Every filter is
-- NULL for "any"; the functions keep their earlier arguments, in order, so
-- calls written for them still work.

-- resend_failed: also bounded by when the events failed (failed_at of
-- outbox.failed_events); p_from and p_to still bound created_at.
DROP FUNCTION outbox.resend_failed(text, text, timestamptz, timestamptz, text);
CREATE FUNCTION outbox.resend_failed(
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

-- Give up on every FAILED event matching the filters, as outbox.skip does
-- for one (SKIPPED: never delivered, its key released). Returns how many.
CREATE FUNCTION outbox.skip_failed(
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

-- purge: also by event type, failure reason, and created_at since/until.
DROP FUNCTION outbox.purge(interval, text, int, text);
CREATE FUNCTION outbox.purge(older_than interval, status text DEFAULT 'SENT', batch int DEFAULT 1000,
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
