-- Back to version 7: SKIPPED events become FAILED again (they were given up
-- on), and rows lose their topic, key and commit order.
DROP VIEW outbox.held_keys;
DROP FUNCTION outbox.skip(uuid);

UPDATE outbox.deliveries SET status = 'FAILED', last_error = coalesce(last_error, 'skipped by an operator')
WHERE status = 'SKIPPED';
ALTER TABLE outbox.deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE outbox.deliveries ADD CONSTRAINT deliveries_status_check
    CHECK (status IN ('PENDING', 'PROCESSING', 'SENT', 'FAILED'));

CREATE INDEX deliveries_pending_due_idx ON outbox.deliveries (next_attempt_at) WHERE status = 'PENDING';
DROP INDEX outbox.deliveries_pending_due_order_idx;
DROP INDEX outbox.deliveries_key_order_idx;

ALTER TABLE outbox.deliveries DROP COLUMN topic, DROP COLUMN key, DROP COLUMN commit_lsn, DROP COLUMN tx_position;

CREATE OR REPLACE FUNCTION outbox.resend(p_event_id uuid) RETURNS boolean
LANGUAGE sql AS $$
    WITH ev AS (SELECT id, max_attempts FROM outbox.events WHERE id = p_event_id),
    up AS (
        INSERT INTO outbox.deliveries AS d (event_id, status, attempts, next_attempt_at, max_attempts)
        SELECT ev.id, 'PENDING', 0, now(), ev.max_attempts FROM ev
        ON CONFLICT (event_id) DO UPDATE
        SET status = 'PENDING', attempts = 0, next_attempt_at = now(), last_error = NULL,
            failure_reason = NULL, locked_by = NULL, locked_at = NULL, updated_at = now()
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM up);
$$;

CREATE OR REPLACE FUNCTION outbox.purge(older_than interval, status text DEFAULT 'SENT', batch int DEFAULT 1000,
                                        topic text DEFAULT NULL) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    deleted bigint;
BEGIN
    IF purge.status IS NULL OR purge.status NOT IN ('SENT', 'FAILED') THEN
        RAISE EXCEPTION 'outbox.purge: status must be SENT or FAILED, not %', purge.status
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
