DROP FUNCTION outbox.skip_failed(text, text, text, timestamptz, timestamptz);
DROP FUNCTION outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz);
DROP FUNCTION outbox.purge(interval, text, int, text, text, text, timestamptz, timestamptz);

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

-- Purge may take SKIPPED events too.
CREATE FUNCTION outbox.purge(older_than interval, status text DEFAULT 'SENT', batch int DEFAULT 1000,
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
