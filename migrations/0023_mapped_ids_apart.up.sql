-- A status row of a mapped event is that event's alone. A mapped event's id
-- is outbox.event_id(table, id): a version 8 UUID that anyone can compute,
-- from a table's name and an id that is often the next number of a
-- sequence, and its status row shares outbox.deliveries with those of
-- outbox.events, keyed by id alone. A writer of outbox.events could insert
-- an event with the id of a mapped event already SENT and an old
-- created_at: retention deleted the intruder and with it, through the
-- trigger below, the mapped event's status row, days before its time. Now
-- deleting an event deletes only status rows of outbox.events (source
-- NULL), and so does retention (retention.sql).
--
-- outbox.events keeps taking any id: a CHECK against version 8 ids would
-- refuse one id in 16 of an application whose ids are hashes cast to uuid.
-- The relay tells the two apart by the status row's source instead
-- (existing.sql, claim.sql, dead_letter_claim.sql, event.sql).
CREATE OR REPLACE FUNCTION outbox.delete_deliveries_of_deleted_events() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM outbox.deliveries d USING deleted_events g WHERE d.event_id = g.id AND d.source IS NULL;
    RETURN NULL;
END $$;
