-- Who holds the retention advisory lock ($1: its key's text) when this
-- relay could not take it: the session's pid, role and application_name,
-- and whether it may be a relay's (its role is this session's, or a member
-- of outbox_relay; a superuser is a member of every role). A prepared
-- transaction that holds it (max_prepared_transactions above 0) has no
-- session: pid 0, its owner as the role, and "prepared transaction" and its
-- gid as the name; no relay holds it so, and ending a session does not end
-- it (ROLLBACK PREPARED does). No row: nobody holds it now. An advisory lock
-- takes no privilege, so any session of the database can hold it;
-- pg_locks, pg_prepared_xacts and these columns of pg_stat_activity are
-- readable by every role.
SELECT coalesce(a.pid, 0), coalesce(a.usename::text, p.owner::text, ''),
       coalesce(a.application_name, 'prepared transaction ' || p.gid, ''),
       a.pid IS NOT NULL AND (
           a.usesysid = (SELECT r.oid FROM pg_catalog.pg_roles r WHERE r.rolname = CURRENT_USER)
           OR EXISTS (SELECT 1 FROM pg_catalog.pg_roles g
                      WHERE g.rolname = 'outbox_relay' AND pg_catalog.pg_has_role(a.usesysid, g.oid, 'MEMBER')))
FROM pg_catalog.pg_locks l
LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
-- A prepared transaction's locks share its virtual transaction, and with
-- them the lock on its own transaction id, which pg_prepared_xacts names.
LEFT JOIN LATERAL (
    SELECT x.gid, x.owner FROM pg_catalog.pg_locks t
    JOIN pg_catalog.pg_prepared_xacts x ON x.transaction = t.transactionid
    WHERE l.pid IS NULL AND t.pid IS NULL AND t.locktype = 'transactionid' AND t.virtualtransaction = l.virtualtransaction
    LIMIT 1) p ON true
WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
  AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
  AND ((l.classid::bigint << 32) | l.objid::bigint) = pg_catalog.hashtextextended($1::text, 0::bigint)
LIMIT 1
