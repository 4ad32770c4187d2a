-- Purging delivered (or failed) events, for teams that schedule their own
-- cleanup; the relay's --retention does the same for SENT events.
--
-- Deletes up to batch events created more than older_than ago whose
-- delivery has the given status (SENT or FAILED: PENDING and PROCESSING
-- events are never purged), oldest first, optionally of one topic, with
-- their delivery rows, skipping rows another session holds. Returns how
-- many it deleted; each call is one short transaction, so call it until it
-- returns 0.
CREATE FUNCTION outbox.purge(older_than interval, status text DEFAULT 'SENT', batch int DEFAULT 1000,
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
