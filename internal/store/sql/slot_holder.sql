-- The pid of the process streaming from slot $1; no row when the slot does
-- not exist.
SELECT coalesce(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1
