-- An event of outbox.events can no longer take the id of a mapped table's
-- event. A mapped event's id is outbox.event_id(table, id): a version 8
-- UUID that anyone can compute, from a table's name and an id that is
-- often the next number of a sequence. Its status row shares
-- outbox.deliveries with those of outbox.events, keyed by id alone. So a
-- role that may only insert events could insert one with the id of a mapped
-- event yet to be written: the relay published it and gave it that status
-- row, and when the application wrote its row the relay found the status
-- row and published nothing (an event lost). Or with the id of a mapped
-- event already SENT, created long ago: retention deleted the intruder
-- and with it, through the trigger below, that event's status row, before
-- its time.
--
-- Ids of version 8 are refused by a CHECK: the writer's INSERT fails at
-- once, naming the constraint. NOT VALID: the rows already there are not
-- read (a scan of a table of millions under a lock); for them, retention
-- (retention.sql) and the trigger below leave alone a status row of a
-- mapped event (source set).
ALTER TABLE outbox.events ADD CONSTRAINT events_id_not_a_mapped_events
    CHECK (pg_catalog.get_byte(pg_catalog.uuid_send(id), 6) >> 4 <> 8) NOT VALID;
COMMENT ON CONSTRAINT events_id_not_a_mapped_events ON outbox.events IS
    'ids of version 8 are those of mapped tables'' events (outbox.event_id): an event here may not take one';

CREATE OR REPLACE FUNCTION outbox.delete_deliveries_of_deleted_events() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM outbox.deliveries d USING deleted_events g WHERE d.event_id = g.id AND d.source IS NULL;
    RETURN NULL;
END $$;
