-- Whether a backfill of slot $1 started and never finished.
SELECT EXISTS (SELECT 1 FROM outbox.slot_backfills WHERE slot_name = $1 AND finished_at IS NULL)
