-- outbox.deliveries no longer references outbox.events through a foreign key.
-- Checking it locked the event row (FOR KEY SHARE) for every status row
-- written: a WAL record and a dirtied events page (a full-page image after
-- each checkpoint), about half the cost of writing a status row. Deleting or
-- truncating events still removes their status rows (the triggers below),
-- and the relay writes a status row only for an event it can see.
ALTER TABLE outbox.deliveries DROP CONSTRAINT IF EXISTS deliveries_event_id_fkey;

CREATE FUNCTION outbox.delete_deliveries_of_deleted_events() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM outbox.deliveries d USING deleted_events g WHERE d.event_id = g.id;
    RETURN NULL;
END $$;

CREATE TRIGGER events_delete_deliveries
    AFTER DELETE ON outbox.events REFERENCING OLD TABLE AS deleted_events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.delete_deliveries_of_deleted_events();

CREATE FUNCTION outbox.truncate_deliveries() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE outbox.deliveries;
    RETURN NULL;
END $$;

CREATE TRIGGER events_truncate_deliveries
    AFTER TRUNCATE ON outbox.events
    FOR EACH STATEMENT EXECUTE FUNCTION outbox.truncate_deliveries();
