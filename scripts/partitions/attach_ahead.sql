-- Attaches a pair of range partitions to the converted outbox.events and
-- outbox.deliveries (convert.sql) for the ids of the next day, from
-- :seconds seconds from now: a range can be added only while the DEFAULT
-- partition (the old table) holds none of its ids. The CHECK, NOT VALID
-- then validated, spares ATTACH a scan of the DEFAULT partition under lock.
\set ON_ERROR_STOP on
SELECT set_config('attach.lo', proto_lo::text, false), set_config('attach.hi', proto_hi::text, false)
FROM (SELECT encode(overlay('\x00000000000000000000000000000000'::bytea
                    PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6), 'hex')::uuid AS proto_lo,
             encode(overlay('\x00000000000000000000000000000000'::bytea
                    PLACING substring(int8send(floor(extract(epoch FROM at + interval '1 day') * 1000)::bigint) FROM 3) FROM 1 FOR 6), 'hex')::uuid AS proto_hi
      FROM (SELECT now() + make_interval(secs => :seconds) AS at) t) b \gset
CREATE TABLE outbox.events_ahead (LIKE outbox.events INCLUDING ALL);
CREATE TABLE outbox.deliveries_ahead (LIKE outbox.deliveries INCLUDING ALL);
DO $$
DECLARE
    lo uuid := current_setting('attach.lo')::uuid;
    hi uuid := current_setting('attach.hi')::uuid;
BEGIN
    EXECUTE format('ALTER TABLE outbox.events_legacy ADD CONSTRAINT not_ahead CHECK (NOT (id >= %L AND id < %L)) NOT VALID', lo, hi);
    EXECUTE format('ALTER TABLE outbox.deliveries_legacy ADD CONSTRAINT not_ahead CHECK (NOT (event_id >= %L AND event_id < %L)) NOT VALID', lo, hi);
END $$;
ALTER TABLE outbox.events_legacy VALIDATE CONSTRAINT not_ahead;
ALTER TABLE outbox.deliveries_legacy VALIDATE CONSTRAINT not_ahead;
DO $$
DECLARE
    lo uuid := current_setting('attach.lo')::uuid;
    hi uuid := current_setting('attach.hi')::uuid;
BEGIN
    EXECUTE format('ALTER TABLE outbox.events ATTACH PARTITION outbox.events_ahead FOR VALUES FROM (%L) TO (%L)', lo, hi);
    EXECUTE format('ALTER TABLE outbox.deliveries ATTACH PARTITION outbox.deliveries_ahead FOR VALUES FROM (%L) TO (%L)', lo, hi);
END $$;
