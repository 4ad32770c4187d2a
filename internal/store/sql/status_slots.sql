-- The replication slots of this database: whether a process streams from
-- them, and how much WAL each holds back.
SELECT slot_name, coalesce(plugin, ''), active, coalesce(active_pid, 0), coalesce(wal_status, ''),
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint, 0)
FROM pg_replication_slots WHERE database = current_database()
ORDER BY slot_name
