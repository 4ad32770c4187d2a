-- The prototype of partitioned retention (docs/performance.md, "Partitioned
-- retention: the experiment"): proto.events and proto.deliveries, copies of
-- outbox.events and outbox.deliveries (columns, defaults, checks, indexes)
-- partitioned by ranges of event id, :hours hours of time-ordered ids
-- (version 7: the first 48 bits are the creation time in ms) to a partition, and a
-- DEFAULT partition for ids of other schemes. Not the relay's schema: the
-- relay does not read these tables.
DROP SCHEMA IF EXISTS proto CASCADE;
CREATE SCHEMA proto;

\ir tools.sql

CREATE TABLE proto.events (LIKE outbox.events INCLUDING ALL) PARTITION BY RANGE (id);
CREATE TABLE proto.deliveries (LIKE outbox.deliveries INCLUDING ALL) PARTITION BY RANGE (event_id);
CREATE TABLE proto.events_default PARTITION OF proto.events DEFAULT;
CREATE TABLE proto.deliveries_default PARTITION OF proto.deliveries DEFAULT;

-- From 8 days ago to tomorrow, :hours hours to a partition, each pair named
-- by its range's start, YYYYMMDDHH24 (UTC).
SELECT set_config('proto.hours', :'hours', false);
DO $$
DECLARE
    w interval := make_interval(hours => current_setting('proto.hours')::int);
    at timestamptz;
BEGIN
    FOR at IN SELECT g FROM generate_series(date_trunc('day', now()) - interval '8 days',
                                            date_trunc('day', now()) + interval '1 day', w) g LOOP
        CALL partition_tools.add_range('proto', 'default', to_char(at AT TIME ZONE 'UTC', 'YYYYMMDDHH24'), at, w);
    END LOOP;
END $$;
