-- outbox.skip($1), and the event's status after it (NULL: no status row).
WITH s AS (SELECT outbox.skip($1::uuid) AS skipped)
SELECT s.skipped, (SELECT d.status FROM outbox.deliveries d WHERE d.event_id = $1::uuid) FROM s
