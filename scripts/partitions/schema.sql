-- The prototype of partitioned retention (docs/performance.md, "Partitioned
-- retention: the experiment"): proto.events and proto.deliveries, copies of
-- outbox.events and outbox.deliveries (columns, defaults, checks, indexes)
-- partitioned by ranges of event id, :hours hours of time-ordered ids
-- (version 7: the first 48 bits are the creation time in ms) to a partition, and a
-- DEFAULT partition for ids of other schemes. Not the relay's schema: the
-- relay does not read these tables.
DROP SCHEMA IF EXISTS proto CASCADE;
CREATE SCHEMA proto;

-- The lowest version-7 id of an instant: the bound of a day's partition.
CREATE FUNCTION proto.uuid_floor(at timestamptz) RETURNS uuid
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT encode(overlay('\x00000000000000000000000000000000'::bytea
                  PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 'hex')::uuid
$$;

CREATE TABLE proto.events (LIKE outbox.events INCLUDING ALL) PARTITION BY RANGE (id);
CREATE TABLE proto.deliveries (LIKE outbox.deliveries INCLUDING ALL) PARTITION BY RANGE (event_id);
CREATE TABLE proto.events_default PARTITION OF proto.events DEFAULT;
CREATE TABLE proto.deliveries_default PARTITION OF proto.deliveries DEFAULT;

-- A pair of partitions for the ids of [at, at + width): created as plain
-- tables and attached (SHARE UPDATE EXCLUSIVE on the parent, not ACCESS
-- EXCLUSIVE as CREATE TABLE ... PARTITION OF takes), after a CHECK on the
-- DEFAULT partitions that proves they hold no row of the range, so that
-- ATTACH does not scan them under its ACCESS EXCLUSIVE lock on the DEFAULT
-- partition. Named by the range's start, YYYYMMDDHH24 (UTC). Each step
-- commits: CALL it outside a transaction.
CREATE PROCEDURE proto.add_range(at timestamptz, width interval) LANGUAGE plpgsql AS $$
DECLARE
    lo uuid := proto.uuid_floor(at);
    hi uuid := proto.uuid_floor(at + width);
    s  text := to_char(at AT TIME ZONE 'UTC', 'YYYYMMDDHH24');
    t  text;
    k  text;
BEGIN
    FOREACH t IN ARRAY ARRAY['events', 'deliveries'] LOOP
        k := CASE t WHEN 'events' THEN 'id' ELSE 'event_id' END;
        EXECUTE format('CREATE TABLE proto.%s_%s (LIKE proto.%s INCLUDING ALL)', t, s, t);
        COMMIT;
        -- NOT VALID, then VALIDATE: the scan of the DEFAULT partition under
        -- SHARE UPDATE EXCLUSIVE, which does not stop its INSERTs.
        EXECUTE format('ALTER TABLE proto.%s_default ADD CONSTRAINT not_%s CHECK (NOT (%s >= %L AND %s < %L)) NOT VALID',
                       t, s, k, lo, k, hi);
        COMMIT;
        EXECUTE format('ALTER TABLE proto.%s_default VALIDATE CONSTRAINT not_%s', t, s);
        COMMIT;
        EXECUTE format('ALTER TABLE proto.%s ATTACH PARTITION proto.%s_%s FOR VALUES FROM (%L) TO (%L)', t, t, s, lo, hi);
        COMMIT;
    END LOOP;
END $$;

-- From 8 days ago to tomorrow, :hours hours to a partition.
SELECT set_config('proto.hours', :'hours', false);
DO $$
DECLARE
    w interval := make_interval(hours => current_setting('proto.hours')::int);
    at timestamptz;
BEGIN
    FOR at IN SELECT g FROM generate_series(date_trunc('day', now()) - interval '8 days',
                                            date_trunc('day', now()) + interval '1 day', w) g LOOP
        CALL proto.add_range(at, w);
    END LOOP;
END $$;
