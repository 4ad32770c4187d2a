CREATE OR REPLACE FUNCTION outbox.delete_deliveries_of_deleted_events() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    DELETE FROM outbox.deliveries d USING deleted_events g WHERE d.event_id = g.id;
    RETURN NULL;
END $$;
