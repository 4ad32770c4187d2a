-- DELETE-based retention of one partition's events at the relay's base pace
-- (relay/retention.go: 100 events a statement, SENT ones only, with their
-- status rows, synchronous_commit off, then a pause of 4 times the
-- statement's time, at least 10 ms), for :seconds seconds. It deletes from
-- the partitions directly, as the relay's statement deletes from an
-- unpartitioned outbox.events.
CREATE OR REPLACE PROCEDURE proto.retain_by_delete(part text, seconds float8)
LANGUAGE plpgsql AS $$
DECLARE
    cursor_at timestamptz := '-infinity';
    last_at   timestamptz;
    started   timestamptz := clock_timestamp();
    t0        timestamptz;
    took      float8;
    walked    int;
    deleted   int;
    total     bigint := 0;
BEGIN
    WHILE extract(epoch FROM clock_timestamp() - started) < seconds LOOP
        t0 := clock_timestamp();
        PERFORM set_config('synchronous_commit', 'off', true);
        EXECUTE format($q$
            WITH walked AS (
                SELECT e.id, e.created_at FROM proto.events_%1$s e
                WHERE e.created_at >= $1 ORDER BY e.created_at LIMIT 100
            ), doomed AS (
                SELECT w.id FROM walked w JOIN proto.deliveries_%1$s d ON d.event_id = w.id
                WHERE d.status = 'SENT' FOR UPDATE OF d SKIP LOCKED
            ), gone AS (
                DELETE FROM proto.deliveries_%1$s d USING doomed WHERE d.event_id = doomed.id RETURNING 1
            ), deleted AS (
                DELETE FROM proto.events_%1$s e USING doomed WHERE e.id = doomed.id RETURNING 1
            )
            SELECT (SELECT count(*) FROM walked), (SELECT max(created_at) FROM walked),
                   (SELECT count(*) FROM deleted) + 0 * (SELECT count(*) FROM gone)$q$, part)
            INTO walked, last_at, deleted USING cursor_at;
        COMMIT;
        total := total + deleted;
        EXIT WHEN walked < 100;
        cursor_at := last_at;
        took := extract(epoch FROM clock_timestamp() - t0);
        PERFORM pg_sleep(greatest(0.010, 4 * took));
    END LOOP;
    RAISE NOTICE 'retain_by_delete: % events deleted from partition % in % s', total, part,
        round(extract(epoch FROM clock_timestamp() - started)::numeric, 1);
END $$;
