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
DO $$
DECLARE
    lo uuid := current_setting('attach.lo')::uuid;
    hi uuid := current_setting('attach.hi')::uuid;
    t  text;
    k  text;
BEGIN
    FOREACH t IN ARRAY ARRAY['events', 'deliveries'] LOOP
        k := CASE t WHEN 'events' THEN 'id' ELSE 'event_id' END;
        EXECUTE format('CREATE TABLE outbox.%s_ahead (LIKE outbox.%s INCLUDING ALL)', t, t);
        EXECUTE format('ALTER TABLE outbox.%s_legacy ADD CONSTRAINT not_ahead CHECK (NOT (%s >= %L AND %s < %L)) NOT VALID',
                       t, k, lo, k, hi);
        COMMIT;
        EXECUTE format('ALTER TABLE outbox.%s_legacy VALIDATE CONSTRAINT not_ahead', t);
        COMMIT;
        EXECUTE format('ALTER TABLE outbox.%s ATTACH PARTITION outbox.%s_ahead FOR VALUES FROM (%L) TO (%L)', t, t, lo, hi);
        COMMIT;
    END LOOP;
END $$;
