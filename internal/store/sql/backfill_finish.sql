-- Records that the backfill of slot $1 gave $2 events a row.
UPDATE outbox.slot_backfills SET finished_at = now(), events = $2 WHERE slot_name = $1
