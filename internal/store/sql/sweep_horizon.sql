-- What bounds the gap sweep's horizon (horizon.go): the time of this
-- statement (the clock $1, or now()), the server's now() (the sample's own
-- time), the oldest prepared transaction's prepare time, and the
-- transactions open in this database other than this session's, each with
-- its virtual transaction id and its start when this role may see it.
--
-- Every transaction holds a lock on its own virtual transaction id from its
-- start, even before it writes, and pg_locks and the pid and database of
-- every pg_stat_activity row are readable by any role; xact_start of
-- another role's session is NULL unless the role is superuser or in
-- pg_read_all_stats. Sessions without a user (autovacuum, background
-- workers) are left out, as are, when visible, backends other than clients:
-- they never write events.
--
-- It must run in its own statement, before the sweep's: a sweep that read
-- the open transactions after taking its snapshot could miss one that
-- committed in between (gone from pg_locks, invisible to the snapshot) and
-- walk past its events for good.
SELECT coalesce($1::timestamptz, now()), now(),
       (SELECT min(prepared) FROM pg_prepared_xacts),
       coalesce(pg_catalog.array_agg(l.virtualxid ORDER BY l.virtualxid), '{}'),
       coalesce(pg_catalog.array_agg(a.xact_start ORDER BY l.virtualxid), '{}')
FROM pg_locks l
JOIN pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'virtualxid' AND l.granted AND a.pid <> pg_backend_pid()
  AND a.datname = current_database() AND a.usesysid IS NOT NULL
  AND coalesce(a.backend_type = 'client backend', true)
