-- outbox.skip($1), and the event's status after it ('' when it has no
-- status row). The subquery reads the statement's snapshot, from before the
-- skip, so a skipped event's status is written out.
WITH s AS (SELECT outbox.skip($1::uuid) AS skipped)
SELECT s.skipped,
       CASE WHEN s.skipped THEN 'SKIPPED'
            ELSE coalesce((SELECT d.status FROM outbox.deliveries d WHERE d.event_id = $1::uuid), '') END
FROM s
