-- What the experiment's tables (schema.sql) and the converted relay tables
-- (convert.sql, convert-check.sh) both need: the bound of a range of
-- time-ordered ids, and adding a pair of range partitions. In a schema of
-- its own, partition_tools, made again by each run.
DROP SCHEMA IF EXISTS partition_tools CASCADE;
CREATE SCHEMA partition_tools;

-- The lowest version-7 id of an instant (the first 48 bits are the
-- creation time in ms): the bound of a partition's range.
CREATE FUNCTION partition_tools.uuid_floor(at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT encode(overlay('\x00000000000000000000000000000000'::bytea
                  PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 'hex')::uuid
$$;

-- A pair of partitions, tables.events_<name> and tables.deliveries_<name>,
-- for the ids of [at, at + width), next to the DEFAULT partitions
-- tables.events_<dflt> and tables.deliveries_<dflt>: created as plain
-- tables and attached (SHARE UPDATE EXCLUSIVE on the parent, not ACCESS
-- EXCLUSIVE as CREATE TABLE ... PARTITION OF takes), after a CHECK on the
-- DEFAULT partitions (not_<name>) that proves they hold no row of the
-- range, so that ATTACH does not scan them under its ACCESS EXCLUSIVE lock
-- on the DEFAULT partition. A range can be added only while the DEFAULT
-- partition holds none of its ids: ahead of time. Each step commits: CALL
-- it outside a transaction. No lock_timeout (docs/performance.md says
-- what that leaves).
CREATE PROCEDURE partition_tools.add_range(tables text, dflt text, name text, at timestamptz, width interval)
LANGUAGE plpgsql AS $$
DECLARE
    lo uuid := partition_tools.uuid_floor(at);
    hi uuid := partition_tools.uuid_floor(at + width);
    t  text;
    k  text;
BEGIN
    FOREACH t IN ARRAY ARRAY['events', 'deliveries'] LOOP
        k := CASE t WHEN 'events' THEN 'id' ELSE 'event_id' END;
        EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING ALL)', tables, t || '_' || name, tables, t);
        -- NOT VALID, then VALIDATE: the scan of the DEFAULT partition under
        -- SHARE UPDATE EXCLUSIVE, which does not stop its INSERTs.
        EXECUTE format('ALTER TABLE %I.%I ADD CONSTRAINT %I CHECK (NOT (%I >= %L AND %I < %L)) NOT VALID',
                       tables, t || '_' || dflt, 'not_' || name, k, lo, k, hi);
        COMMIT;
        EXECUTE format('ALTER TABLE %I.%I VALIDATE CONSTRAINT %I', tables, t || '_' || dflt, 'not_' || name);
        COMMIT;
        EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
                       tables, t, tables, t || '_' || name, lo, hi);
        COMMIT;
    END LOOP;
END $$;
