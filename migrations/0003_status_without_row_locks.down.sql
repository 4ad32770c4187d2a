DROP TRIGGER IF EXISTS events_truncate_deliveries ON outbox.events;
DROP TRIGGER IF EXISTS events_delete_deliveries ON outbox.events;
DROP FUNCTION IF EXISTS outbox.truncate_deliveries();
DROP FUNCTION IF EXISTS outbox.delete_deliveries_of_deleted_events();
-- Rows whose event is gone (deleted while its status was being written).
DELETE FROM outbox.deliveries d WHERE NOT EXISTS (SELECT 1 FROM outbox.events e WHERE e.id = d.event_id);
ALTER TABLE outbox.deliveries ADD CONSTRAINT deliveries_event_id_fkey
    FOREIGN KEY (event_id) REFERENCES outbox.events (id) ON DELETE CASCADE;
