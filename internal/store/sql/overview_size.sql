-- How many rows outbox.deliveries holds, from the statistics (no scan):
-- the live rows the statistics collector counts as rows come and go, else
-- the planner's estimate from the last VACUUM or ANALYZE. Neither needs a
-- privilege. Then the age of the oldest PENDING event (its partial index
-- on the status row's created_at; 0 when none is PENDING).
SELECT (SELECT coalesce(nullif(s.n_live_tup, 0), greatest(c.reltuples, 0)::bigint)
        FROM pg_class c LEFT JOIN pg_stat_all_tables s ON s.relid = c.oid
        WHERE c.oid = 'outbox.deliveries'::regclass),
       coalesce((SELECT greatest(extract(epoch FROM now() - coalesce(
                            (SELECT r.created_at FROM outbox.relayed_events r WHERE r.id = d.event_id LIMIT 1),
                            d.created_at)), 0)
                 FROM outbox.deliveries d WHERE d.status = 'PENDING' ORDER BY d.created_at LIMIT 1), 0)::float8
