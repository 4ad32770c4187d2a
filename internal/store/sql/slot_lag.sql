-- How many bytes of WAL the stream's slot ($1) has not confirmed; no row
-- when the slot does not exist or was invalidated (it will never move
-- again, so nothing should wait for it).
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint
FROM pg_replication_slots WHERE slot_name = $1 AND wal_status IS DISTINCT FROM 'lost'
