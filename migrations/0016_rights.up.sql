-- Operators change status rows and events only through the outbox's
-- functions: they run with their owner's rights (the role that migrates),
-- so outbox_operator needs no INSERT, UPDATE or DELETE on any table
-- (roles.sql takes those back). Each has a fixed search_path and names
-- every object of the outbox with its schema; built-ins come from
-- pg_catalog.
ALTER FUNCTION outbox.resend(uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION outbox.resend(text, text) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION outbox.skip(uuid) SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION outbox.skip_failed(text, text, text, timestamptz, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
ALTER FUNCTION outbox.purge(interval, text, int, text, text, text, timestamptz, timestamptz)
    SECURITY DEFINER SET search_path = pg_catalog, pg_temp;

-- Resend one event only if it is still FAILED (the console's resend: a
-- page that showed it FAILED changes nothing once someone else has resent
-- or skipped it); status is its status before ('' when it has no status
-- row). Was a statement of the console's own, with SELECT ... FOR UPDATE
-- on outbox.deliveries, which needs UPDATE on the table.
CREATE FUNCTION outbox.resend_if_failed(p_event_id uuid, OUT resent boolean, OUT status text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    SELECT d.status INTO resend_if_failed.status FROM outbox.deliveries d
    WHERE d.event_id = p_event_id FOR UPDATE;
    resend_if_failed.status := coalesce(resend_if_failed.status, '');
    resend_if_failed.resent := false;
    IF resend_if_failed.status = 'FAILED' THEN
        resend_if_failed.resent := outbox.resend(p_event_id);
    END IF;
END;
$$;

-- SECURITY DEFINER functions are nobody's but the operators' (roles.sql
-- grants EXECUTE to outbox_operator; with migrate --roles=false, grant it
-- yourself).
REVOKE EXECUTE ON FUNCTION outbox.resend(uuid), outbox.resend(text, text),
    outbox.resend_failed(text, text, timestamptz, timestamptz, text, timestamptz, timestamptz),
    outbox.skip(uuid), outbox.skip_failed(text, text, text, timestamptz, timestamptz),
    outbox.purge(interval, text, int, text, text, text, timestamptz, timestamptz),
    outbox.resend_if_failed(uuid) FROM PUBLIC;
