-- FAILED events by failure_reason, most first.
SELECT failure_reason, count(*) FROM outbox.deliveries WHERE status = 'FAILED' GROUP BY 1 ORDER BY 2 DESC, 1
