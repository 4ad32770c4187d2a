-- FAILED events by failure_reason, most first: of at most $1 FAILED rows
-- (NULL: all; the console bounds it, `outbox-relay status` does not).
SELECT failure_reason, count(*)
FROM (SELECT failure_reason FROM outbox.deliveries WHERE status = 'FAILED' LIMIT $1) f
GROUP BY 1 ORDER BY 2 DESC, 1
