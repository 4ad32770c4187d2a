-- The replication slots of this database: whether a process streams from
-- them, how much WAL each holds back, and (PostgreSQL 17 and newer; NULL
-- before) whether it is a failover slot and whether it was synchronized
-- from the primary (on a standby). to_jsonb reads columns an older server
-- does not have as NULL.
SELECT slot_name, coalesce(plugin, ''), active, coalesce(active_pid, 0), coalesce(wal_status, ''),
       coalesce(pg_wal_lsn_diff(CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END,
                                confirmed_flush_lsn)::bigint, 0),
       (pg_catalog.to_jsonb(s) ->> 'failover')::boolean, (pg_catalog.to_jsonb(s) ->> 'synced')::boolean
FROM pg_replication_slots s WHERE database = current_database()
ORDER BY slot_name
