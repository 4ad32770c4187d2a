DROP FUNCTION outbox.skip_failed(text, text, text, timestamptz, timestamptz, text, text);
CREATE FUNCTION outbox.skip_failed(
    p_topic        text        DEFAULT NULL,
    p_event_type   text        DEFAULT NULL,
    p_reason       text        DEFAULT NULL,
    p_failed_since timestamptz DEFAULT NULL,
    p_failed_until timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH up AS (
        UPDATE outbox.deliveries d
        SET status = 'SKIPPED', locked_by = NULL, locked_at = NULL, updated_at = now()
        FROM outbox.relayed_events e
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

DROP FUNCTION outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz, text, text);
CREATE FUNCTION outbox.resend_failed(
    p_topic        text        DEFAULT NULL,
    p_event_type   text        DEFAULT NULL,
    p_from         timestamptz DEFAULT NULL,
    p_to           timestamptz DEFAULT NULL,
    p_reason       text        DEFAULT NULL,
    p_failed_since timestamptz DEFAULT NULL,
    p_failed_until timestamptz DEFAULT NULL
) RETURNS bigint
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    WITH up AS (
        UPDATE outbox.deliveries d
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        FROM outbox.relayed_events e
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

REVOKE EXECUTE ON FUNCTION
    outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz),
    outbox.skip_failed(text, text, text, timestamptz, timestamptz) FROM PUBLIC;

DROP TRIGGER deliveries_truncate_attempts ON outbox.deliveries;
DROP FUNCTION outbox.truncate_attempts();
DROP TRIGGER deliveries_delete_attempts ON outbox.deliveries;
DROP FUNCTION outbox.delete_attempts_of_deleted_deliveries();
DROP TABLE outbox.delivery_attempts;
