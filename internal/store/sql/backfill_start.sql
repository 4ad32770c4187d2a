-- Records that slot $1 is being created and its backfill has not finished.
INSERT INTO outbox.slot_backfills (slot_name) VALUES ($1)
ON CONFLICT (slot_name) DO UPDATE SET started_at = now(), finished_at = NULL, events = NULL
