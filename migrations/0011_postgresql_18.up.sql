-- What PostgreSQL 18 brings, where the server has it: before 18 this
-- changes nothing (and a server upgraded to 18 afterwards keeps the earlier
-- forms, which work as before).
--
-- * uuidv7() is built in: outbox.uuid_v7(), the default event id, calls it.
--   It is written in C and monotonic within a session (sub-millisecond
--   ordering), so the ids of one transaction sort in insertion order.
-- * publish_generated_columns: the publication streams stored generated
--   columns, so a generated column of outbox.events (an event_type computed
--   from the payload, say) reaches the relay on the stream as it does
--   through SQL (the poller, the backfill).
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 180000 THEN
        CREATE OR REPLACE FUNCTION outbox.uuid_v7() RETURNS uuid
        LANGUAGE sql VOLATILE PARALLEL SAFE AS 'SELECT uuidv7()';
        IF EXISTS (SELECT 1 FROM pg_publication WHERE pubname = 'outbox_relay') THEN
            ALTER PUBLICATION outbox_relay SET (publish_generated_columns = stored);
        END IF;
    END IF;
END $$;
