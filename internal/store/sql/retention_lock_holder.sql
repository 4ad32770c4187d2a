-- Who holds the retention advisory lock ($1: its key's text) when this
-- relay could not take it: the session's pid, role and application_name,
-- and whether it may be a relay's (its role is this session's, or a member
-- of outbox_relay; a superuser is a member of every role). No row: nobody
-- holds it now. An advisory lock takes no privilege, so any session of the
-- database can hold it; pg_locks and these columns of pg_stat_activity are
-- readable by every role.
SELECT a.pid, coalesce(a.usename::text, ''), coalesce(a.application_name, ''),
       a.usesysid = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER)
       OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles g
                  WHERE g.rolname = 'outbox_relay' AND pg_catalog.pg_has_role(a.usesysid, g.oid, 'MEMBER'))
FROM pg_catalog.pg_locks l
JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = pg_catalog.hashtextextended($1::text, 0::bigint)
LIMIT 1
