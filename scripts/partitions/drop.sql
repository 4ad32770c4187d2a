-- Drops a detached pair of partitions (:part, YYYYMMDDHH24) a relation at a
-- time, indexes first, 200 ms apart, so that no one commit unlinks all
-- their files: the
-- first version dropped both tables in one statement (about 3 GB, 1.0 s),
-- and the application's INSERTs waited up to 270 ms on their WAL flushes
-- meanwhile (ext4 here: a 2 GB unlink took 430 ms, and an fdatasync of
-- another file up to 40 ms while it ran).
\set ON_ERROR_STOP on
SELECT format('DROP INDEX proto.%I', c.relname), 'SELECT pg_catalog.pg_sleep(0.2)'
FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid IN (('proto.events_' || :'part')::regclass, ('proto.deliveries_' || :'part')::regclass) AND NOT i.indisprimary
ORDER BY pg_catalog.pg_relation_size(c.oid) \gexec
DROP TABLE proto.deliveries_:part;
SELECT pg_catalog.pg_sleep(0.2);
DROP TABLE proto.events_:part;
