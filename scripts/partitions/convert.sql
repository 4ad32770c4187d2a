-- A prototype of the migration partitioned retention needs (docs/performance.md,
-- "Partitioned retention: the experiment"), to learn what breaks; not a
-- migration of the relay's. It turns an installation's outbox.events and
-- outbox.deliveries into tables partitioned by ranges of event id, with the
-- old tables, rows and all, as their DEFAULT partitions (no row is copied), in
-- one transaction that holds both tables for a moment. Then run the relay's
-- migrate (its grants) and CALL partition_tools.add_range for the ranges
-- ahead (tools.sql).
-- Under a running relay the LOCK TABLE below can be a deadlock's victim (a
-- relay transaction that holds one of the two tables and waits for the
-- other); the transaction then rolls back whole: run it again
-- (convert-check.sh does).
\set ON_ERROR_STOP on
BEGIN;
SET LOCAL lock_timeout = '5s';
LOCK TABLE outbox.events, outbox.deliveries IN ACCESS EXCLUSIVE MODE;

-- The views that read the tables, to be made again on the new ones (a view
-- holds its tables by OID).
CREATE TEMP TABLE views ON COMMIT DROP AS
SELECT c.oid::regclass::text AS name, pg_catalog.pg_get_viewdef(c.oid) AS def
FROM pg_catalog.pg_class c
WHERE c.relkind = 'v' AND EXISTS (
    SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
    WHERE r.ev_class = c.oid AND d.refobjid IN ('outbox.events'::regclass, 'outbox.deliveries'::regclass));

-- The old tables and their indexes step aside, so the new ones get the names.
DO $$
DECLARE i record;
BEGIN
    FOR i IN SELECT x.indexrelid::regclass AS idx, c.relname
             FROM pg_catalog.pg_index x JOIN pg_catalog.pg_class c ON c.oid = x.indexrelid
             WHERE x.indrelid IN ('outbox.events'::regclass, 'outbox.deliveries'::regclass) LOOP
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_constraint WHERE conindid = i.idx::oid) THEN
            EXECUTE format('ALTER TABLE %s RENAME CONSTRAINT %I TO %I',
                (SELECT conrelid::regclass FROM pg_catalog.pg_constraint WHERE conindid = i.idx::oid), i.relname, 'legacy_' || i.relname);
        ELSE
            EXECUTE format('ALTER INDEX %s RENAME TO %I', i.idx, 'legacy_' || i.relname);
        END IF;
    END LOOP;
END $$;
ALTER TABLE outbox.events RENAME TO events_legacy;
ALTER TABLE outbox.deliveries RENAME TO deliveries_legacy;

CREATE TABLE outbox.events (LIKE outbox.events_legacy INCLUDING ALL) PARTITION BY RANGE (id);
CREATE TABLE outbox.deliveries (LIKE outbox.deliveries_legacy INCLUDING ALL) PARTITION BY RANGE (event_id);
ALTER TABLE outbox.events ATTACH PARTITION outbox.events_legacy DEFAULT;
ALTER TABLE outbox.deliveries ATTACH PARTITION outbox.deliveries_legacy DEFAULT;

-- The new tables' indexes take the names the old ones had (the relay's
-- migrate, indexes.sql, knows them by name): each parent index has the old
-- one attached to it now. Through a temporary name first: a name LIKE gave
-- one may be the name another one had.
CREATE TEMP TABLE index_names ON COMMIT DROP AS
SELECT h.inhparent AS parent, substr(c.relname, 8) AS name,
       (SELECT conname FROM pg_catalog.pg_constraint WHERE conindid = h.inhparent) AS conname,
       (SELECT conrelid::regclass FROM pg_catalog.pg_constraint WHERE conindid = h.inhparent) AS rel
FROM pg_catalog.pg_inherits h JOIN pg_catalog.pg_class c ON c.oid = h.inhrelid
WHERE c.relname LIKE 'legacy\_%' AND c.relnamespace = 'outbox'::regnamespace;
DO $$
DECLARE i record;
BEGIN
    FOR i IN SELECT * FROM index_names WHERE conname IS NULL LOOP
        EXECUTE format('ALTER INDEX %s RENAME TO %I', i.parent::regclass, 'renaming_' || i.parent);
    END LOOP;
    FOR i IN SELECT * FROM index_names LOOP
        IF i.conname IS NULL THEN
            EXECUTE format('ALTER INDEX outbox.%I RENAME TO %I', 'renaming_' || i.parent, i.name);
        ELSIF i.conname <> i.name THEN
            EXECUTE format('ALTER TABLE %s RENAME CONSTRAINT %I TO %I', i.rel, i.conname, i.name);
        END IF;
    END LOOP;
END $$;

-- The statement triggers move to the parents (a statement on the parent
-- fires the parent's).
DO $$
DECLARE t record;
BEGIN
    FOR t IN SELECT tgname, tgrelid::regclass AS rel, pg_catalog.pg_get_triggerdef(oid) AS def
             FROM pg_catalog.pg_trigger
             WHERE tgrelid IN ('outbox.events_legacy'::regclass, 'outbox.deliveries_legacy'::regclass) AND NOT tgisinternal LOOP
        EXECUTE format('DROP TRIGGER %I ON %s', t.tgname, t.rel);
        EXECUTE replace(replace(t.def, 'ON outbox.events_legacy ', 'ON outbox.events '),
                        'ON outbox.deliveries_legacy ', 'ON outbox.deliveries ');
    END LOOP;
END $$;

DO $$
DECLARE v record;
BEGIN
    FOR v IN SELECT * FROM views LOOP
        EXECUTE format('CREATE OR REPLACE VIEW %s AS %s', v.name, v.def);
    END LOOP;
END $$;

-- The stream sees inserts into any partition as inserts into outbox.events.
ALTER PUBLICATION outbox_relay SET TABLE outbox.events;
ALTER PUBLICATION outbox_relay SET (publish = 'insert', publish_via_partition_root = true);
COMMIT;
