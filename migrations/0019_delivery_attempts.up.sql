-- An event's attempts (issue 44): each failed attempt's time, reason and
-- error, written by the relay in the statement that records the failure
-- (insert_outcomes.sql for the stream, record_outcomes.sql for the
-- poller's retries, rescue_stuck.sql for a row taken back from a relay
-- that died), so the SENT path writes nothing here. Each event keeps its
-- last 10 (store.AttemptsKept): the statements that add one delete the
-- older ones. The rows go with their status row (retention, purge, a
-- DELETE or TRUNCATE of outbox.events or outbox.deliveries: the triggers
-- below), and stay when an operator resends the event: the attempts before
-- the resend are history too. No foreign key, as outbox.deliveries has none
-- (0003): checking it would lock the status row for every attempt, and
-- would keep outbox.deliveries from being truncated.
--
-- The relay writes it (outbox_relay: SELECT, INSERT, DELETE); operators and
-- the console read it (outbox_operator: SELECT); roles.sql grants both.
CREATE TABLE outbox.delivery_attempts (
    event_id       uuid        NOT NULL,
    -- the order the attempts were written in (a resend starts attempt
    -- over at 1)
    id             bigint      GENERATED ALWAYS AS IDENTITY,
    -- the status row's attempts after this one (an INVALID_EVENT or a
    -- topic refused before sending counts none, as in the status row)
    attempt        integer     NOT NULL,
    failed_at      timestamptz NOT NULL,
    -- NULL: the attempt is retried (PENDING); else why it ended FAILED
    failure_reason text,
    error          text        NOT NULL,
    PRIMARY KEY (event_id, id)
);

COMMENT ON TABLE outbox.delivery_attempts IS
    'the last 10 failed attempts of each event (time, reason, error), written by the relay as attempts fail';

CREATE FUNCTION outbox.delete_attempts_of_deleted_deliveries() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM outbox.delivery_attempts a USING deleted_deliveries g WHERE a.event_id = g.event_id;
    RETURN NULL;
END $$;

CREATE TRIGGER deliveries_delete_attempts
    AFTER DELETE ON outbox.deliveries REFERENCING OLD TABLE AS deleted_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.delete_attempts_of_deleted_deliveries();

CREATE FUNCTION outbox.truncate_attempts() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    TRUNCATE outbox.delivery_attempts;
    RETURN NULL;
END $$;

CREATE TRIGGER deliveries_truncate_attempts
    AFTER TRUNCATE ON outbox.deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.truncate_attempts();

-- Search on FAILED (issue 44): the actions on every FAILED event matching a
-- filter take the console's search too, by key (p_key) and by a substring
-- of the last error (p_error_contains, case-sensitive), so that they change
-- exactly the rows the search lists. New parameters come last, with
-- defaults: calls with the earlier ones mean what they meant.
DROP FUNCTION outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz);
CREATE FUNCTION outbox.resend_failed(
    p_topic          text        DEFAULT NULL,
    p_event_type     text        DEFAULT NULL,
    p_from           timestamptz DEFAULT NULL,
    p_to             timestamptz DEFAULT NULL,
    p_reason         text        DEFAULT NULL,
    p_failed_since   timestamptz DEFAULT NULL,
    p_failed_until   timestamptz DEFAULT NULL,
    p_key            text        DEFAULT NULL,
    p_error_contains text        DEFAULT NULL
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
          AND (p_key IS NULL OR coalesce(d.key, e.key) = p_key)
          AND (p_error_contains IS NULL OR strpos(d.last_error, p_error_contains) > 0)
        RETURNING 1
    )
    SELECT count(*) FROM up;
$$;

DROP FUNCTION outbox.skip_failed(text, text, text, timestamptz, timestamptz);
CREATE FUNCTION outbox.skip_failed(
    p_topic          text        DEFAULT NULL,
    p_event_type     text        DEFAULT NULL,
    p_reason         text        DEFAULT NULL,
    p_failed_since   timestamptz DEFAULT NULL,
    p_failed_until   timestamptz DEFAULT NULL,
    p_key            text        DEFAULT NULL,
    p_error_contains text        DEFAULT NULL
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
          AND (p_key IS NULL OR coalesce(d.key, e.key) = p_key)
          AND (p_error_contains IS NULL OR strpos(d.last_error, p_error_contains) > 0)
        RETURNING 1
    )
    SELECT count(*) FROM up;
$$;

-- roles.sql grants EXECUTE to outbox_operator (with migrate --roles=false,
-- grant it yourself).
REVOKE EXECUTE ON FUNCTION
    outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz, text, text),
    outbox.skip_failed(text, text, text, timestamptz, timestamptz, text, text) FROM PUBLIC;
