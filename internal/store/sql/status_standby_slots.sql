-- The standbys' physical slots named in synchronized_standby_slots
-- (PostgreSQL 17 and newer; none before, and none on a standby): the
-- primary holds the changes of failover slots back until each of them has
-- confirmed them. Whether a standby streams from each, how far behind the
-- primary's WAL it is, and both positions as byte offsets.
SELECT n.name, coalesce(s.active, false), s.slot_name IS NOT NULL,
       coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), s.restart_lsn)::bigint, 0),
       coalesce(pg_wal_lsn_diff(s.restart_lsn, '0/0')::bigint, 0),
       pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
FROM unnest(string_to_array(replace(coalesce(current_setting('synchronized_standby_slots', true), ''), ' ', ''), ',')) AS n(name)
LEFT JOIN pg_replication_slots s ON s.slot_name = n.name
WHERE n.name <> '' AND NOT pg_is_in_recovery()
ORDER BY n.name
